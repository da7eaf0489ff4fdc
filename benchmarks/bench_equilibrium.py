"""BNE solver benchmark: the three cases of issue #38, each timed once in this run.

    python benchmarks/bench_equilibrium.py [--json FILE] [--only TEXT] [--validate] [--games [NAME]]

Rows: a user's black-box first-price mechanism (``outcome`` only, one report vector
per call), 4 sellers, U[0, 1] (target <= 10 s, issue #48); the same written for a (B, n) batch
(``batched = True``); built-in pay-as-bid at 100 sellers, U[1, 5] (target <= 30 s);
the same at 30 sellers on Beta(2, 5) on [0, 2], whose bid function jumps
(docs/equilibrium.md, "Pay-as-bid on a Beta law"; no target of its own: compare's
whole run, three mechanisms, has 180 s);
two classes, first price, costs U[1, 2] and U[0, 2] (target <= 30 s); an IC mechanism
(uniform-price, 4 sellers; target <= 2 s).  Each row with
the solver's path, its evaluations (report vectors), iterations, ``converged``, the
verified epsilon / utility, the exact one by an independent measure where the game has
one (``exact_relative_epsilon``) and the L-infinity distance to the closed form where
there is one; ``--only TEXT`` runs the rows whose case contains TEXT.  ``--validate`` prints
instead the validation table of docs/equilibrium.md (closed forms, samples=4096);
``--games`` the reference games of tests/bne_reference.py (each with an equilibrium
proved by an exact best response) on the exact and on the sampled path.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from shared_mechanisms import BatchedFirstPrice  # noqa: E402  (the same rule for a (B, n) batch)

from market_sim.games.equilibrium import bne  # noqa: E402
from market_sim.mechanisms.first_price import (  # noqa: E402
    FirstPrice,
    asymmetric_first_price_bid,
    first_price_bid,
)


class BlackBoxFirstPrice:
    """Single-unit first-price procurement, ``outcome`` only."""

    def outcome(self, reports, rng=None):
        r = np.asarray(reports, dtype=float)
        won = r == r.min()
        eps = won / won.sum()
        return eps, r * eps


ASYMMETRIC = [lambda c, g=g: asymmetric_first_price_bid(c, g) for g in (0, 1)]
UNSEEN = [lambda c, g=g: asymmetric_first_price_bid(c, g, (1.0, 0.0), 3.0) for g in (0, 1)]
TWO_CLASSES = [("uniform:1:2", 1), ("uniform:0:2", 1)]

CASES = [
    ("black-box first price, outcome only", BlackBoxFirstPrice(), [("uniform:0:1", 4)],
     [lambda c: c + (1 - c) / 4], {}, 10),
    ("black-box first price, outcome only, Beta(1,3)", BlackBoxFirstPrice(),
     [("beta:1:3:0:1", 4)], [lambda c: c + (1 - c) / 10], {}, 10),
    ("first price, batched = True", BatchedFirstPrice(), [("uniform:0:1", 4)],
     [lambda c: c + (1 - c) / 4], {"samples": 4096}, 15),
    ("pay-as-bid (built in), 100 sellers", "pay-as-bid", [("uniform:1:5", 100)], None, {}, 30),
    ("pay-as-bid (built in), 30 sellers, Beta(2,5) on [0,2] (a jump)", "pay-as-bid",
     [("beta:2:5:0:2", 30)], None, {}, 180),
    ("two classes U[1,2] + U[0,2], first price, sampled", BatchedFirstPrice(), TWO_CLASSES,
     ASYMMETRIC, {"samples": 4096}, 30),
    ("two classes U[1,2] + U[0,2], FirstPrice (interim)", FirstPrice(1), TWO_CLASSES,
     ASYMMETRIC, {"samples": 4096}, 30),
    ("IC mechanism: uniform-price, 4 sellers", "uniform-price", [("uniform:0:1", 4)], None,
     {}, 2),
    ("IC mechanism: offline, 5 sellers, samples=128", "offline", [("uniform:1:5", 5)], None,
     {"samples": 128}, 2),
]  # fmt: skip


def exact_relative_epsilon(case: str, r) -> float:
    """The result's exact relative epsilon by an independent measure, where the game has
    one (the one-class first-price rows): ``bne_reference.exact_gain``, the exact best
    response at 401 x 2 costs over 4001 reports and refinement, against the exact law of
    the others' reports (the result's bid table, interpolated), none of the solver's
    code; NaN for the other rows."""
    from bne_reference import table_relative_epsilon  # tests/ (above)

    if "first price" not in case or len(r.classes) != 1:
        return float("nan")
    return table_relative_epsilon(r)


def games(only=None):
    """The reference games (tests/bne_reference.py) on the exact (interim) and on the
    sampled path: epsilon / u and L-inf on the costs where the reference wins >= 1%, the
    bars of issue #48 (1% and 0.01)."""
    from bne_reference import GAMES  # tests/ is on the path (above)

    print("| game | path | seconds | iterations | converged | eps / u by class | "
          "L-inf (reference wins >= 1%) by class |")  # fmt: skip
    print("|---|---|---|---|---|---|---|")
    for name, make in GAMES.items():
        if only is not None and only not in name:
            continue
        p = make()
        for exact in (True, False):
            r = bne(p.mechanism, p.population, np.random.default_rng(0),
                    reference=list(p.bids), exact=exact, samples=4096)  # fmt: skip
            eps = ", ".join(f"{c.check.epsilon_relative:.2%}" for c in r.classes)
            linf = ", ".join(f"{c.check.distances['linf_active']:.4f}" for c in r.classes)
            print(f"| {p.name} | {r.options['path']} | {r.seconds:.1f} | {r.iterations} "
                  f"({r.stopped_by}) | {r.converged} | {eps} | {linf} |", flush=True)  # fmt: skip


def validate(only=None):
    """The validation table of docs/equilibrium.md (the rows whose case contains
    ``only``, if given)."""
    fp = "examples/first_price.py:FirstPriceProcurement"
    print("| case | path | seconds | iterations | eps / u (95% CI) | L (95% CI) "
          "| L2 (wins >= 1%) | L-inf (wins >= 1%) | L-inf (all) |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|")
    cases = [
        (
            f"first price, m = {m}, U[0, 1]",
            fp,
            [("uniform:0:1", m)],
            [lambda c, m=m: c + (1 - c) / m],
            {},
        )
        for m in (2, 3, 4, 5)
    ]
    cases += [
        (
            f"{k}-unit first price, n = {n}, U[{lo}, {hi}]{tag}",
            FirstPrice(k),
            [(f"uniform:{lo}:{hi}", n)],
            [lambda c, n=n, k=k, lo=lo, hi=hi: first_price_bid(c, n, k, lo, hi)],
            {"exact": exact},
        )
        for exact, tag in [(False, ""), (True, " (interim)")]
        for n, k, lo, hi in [(4, 2, 0, 1), (3, 2, 1, 3), (5, 2, 0, 1)]
    ]
    cases += [
        ("asymmetric first price", BatchedFirstPrice(), TWO_CLASSES, ASYMMETRIC, {}),
        ("asymmetric first price (interim)", FirstPrice(1), TWO_CLASSES, ASYMMETRIC, {}),
        ("asymmetric first price, U[1, 3] + U[0, 3] (interim; not tuned on)", FirstPrice(1),
         [("uniform:1:3", 1), ("uniform:0:3", 1)], UNSEEN, {}),
        ("asymmetric first price, 1 x U[1, 2] + 2 x U[0, 2] (interim; no closed form)",
         FirstPrice(1), [("uniform:1:2", 1), ("uniform:0:2", 2)], None, {}),
    ]  # fmt: skip
    for label, mech, pop, ref, opts in cases:
        if only is not None and only not in label:
            continue
        r = bne(mech, pop, np.random.default_rng(0), reference=ref, **{"samples": 4096, **opts})
        for g, cl in enumerate(r.classes):
            ch, u = cl.check, cl.check.utility
            d = {k: f"{v:.4f}" for k, v in ch.distances.items()}
            tag = f" (class {g}: {cl.dist})" if len(r.classes) > 1 else ""
            print(
                f"| {label}{tag} | {r.options['path']} | {r.seconds:.1f} | {r.iterations} "
                f"({r.stopped_by}) | {ch.epsilon_relative:.2%} [{ch.epsilon_ci[0] / u:.2%}, "
                f"{ch.epsilon_ci[1] / u:.2%}] | {ch.relative_loss:.2%} "
                f"[{ch.relative_loss_ci[0]:.2%}, {ch.relative_loss_ci[1]:.2%}] | "
                f"{d.get('l2_active', 'n/a')} | {d.get('linf_active', 'n/a')} | "
                f"{d.get('linf', 'n/a')} |",
                flush=True,
            )


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--json", default=None)
    ap.add_argument("--validate", action="store_true", help="the closed-form table instead")
    ap.add_argument("--only", default=None, help="only the cases (rows) containing this")
    ap.add_argument("--games", nargs="?", const="", default=None, help="the reference games")
    args = ap.parse_args(argv)
    if args.games is not None:
        games(args.games or None)
        return
    if args.validate:
        validate(args.only)
        return
    print(f"# bne, seed 0; {platform.machine()}, {time.strftime('%F %H:%M')}, "
          f"load average {os.getloadavg()[0]:.1f} at the start")  # fmt: skip
    print("| case | path | seconds | CPU seconds | target | evaluations | iterations "
          "| converged | epsilon / utility | exact epsilon / utility "
          "| L-inf (wins >= 1%) |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    rows = []
    for label, mech, pop, ref, opts, target in CASES:
        if args.only is not None and args.only not in label:
            continue
        cpu0 = time.process_time()
        r = bne(mech, pop, np.random.default_rng(0), reference=ref, **opts)
        cpu = time.process_time() - cpu0  # the process's own: what a free core would take
        linf = max(
            (c.check.distances.get("linf_active", np.nan) for c in r.classes), default=np.nan
        )
        eps_rel = max(c.check.epsilon_relative for c in r.classes)
        exact = exact_relative_epsilon(label, r)
        ok = "✓" if r.seconds <= target else "✗"
        print(
            f"| {label} | {r.options['path']} | {r.seconds:.1f} | {cpu:.1f} | <= {target} s {ok} | "
            f"{r.options['calls']} | {r.iterations} ({r.stopped_by}) | {r.converged} | "
            f"{eps_rel:.3g} | {exact:.3g} | {linf:.3g} |",
            flush=True,
        )
        rows.append(
            dict(case=label, path=r.options["path"], seconds=r.seconds, cpu_seconds=cpu,
                 target=target,
                 calls=r.options["calls"], iterations=r.iterations,
                 stopped_by=r.stopped_by, converged=r.converged, epsilon=r.epsilon,
                 epsilon_relative=eps_rel, exact_epsilon_relative=exact, linf_active=linf)
        )  # fmt: skip
    print(f"(load average {os.getloadavg()[0]:.1f} at the end)")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=2)


if __name__ == "__main__":
    main()
