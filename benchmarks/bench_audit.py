"""Audit benchmark: the audit of one market against one best-response round of it.

    python benchmarks/bench_audit.py [--m 10000] [--json benchmarks/audit.json]

Both times are measured back to back in this run (the best of ``--reps`` each), so
the ratio survives a noisy machine.  Target: auditing one market of
m = 10^4 sellers under the offline mechanism (default search: 33-point grid, 12
probes, 32 random reports and the local search, plus the Myerson check) costs at
most 15x one best-response round of a ``MarketModel`` over the same market.  Target:
the default audit (every candidate kind, the targeted and the interior opponent
profiles) at 10 sellers x 20 markets (issue #54, item 9): the offline mechanism on
library laws at most 10 s, a user's deterministic black box at most 5 s, a randomized
Monte Carlo lottery at most 15 s (``--defaults-only``: these alone), each also as a
ratio to a best-response round timed in the same run.  Also reported: the 10^4 ratio
for the online mechanism.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_offline import warm_step_time, write_json  # noqa: E402

from market_sim.agents import MarketModel  # noqa: E402
from market_sim.auditing import audit  # noqa: E402
from market_sim.mechanisms.base import Mechanism  # noqa: E402

DIST = "uniform:0:1"


class Lottery(Mechanism):
    """IC in expectation: eps = 1 - r, Myerson payments, plus a mean-zero bonus."""

    randomized = True

    def outcome(self, reports, rng=None):
        r = np.asarray(reports, dtype=float)
        eps = 1.0 - r
        return eps, r * eps + 0.5 * (1.0 - r) ** 2 + 0.1 * (r - 0.5) * rng.standard_normal()


class Threshold(Mechanism):
    """A user's deterministic black box: the 4 lowest reports win and are paid their bids."""

    def outcome(self, reports, rng=None):
        r = np.asarray(reports, dtype=float)
        eps = (r <= np.sort(r)[3]).astype(float)
        return eps, r * eps


def br_round(m, mechanism, reps):
    """Best time of one best-response round (after a first one)."""
    model = MarketModel(
        n_sellers=m,
        dist=DIST,
        mechanism=mechanism,
        strategy="best-response",
        seed=0,
        measure_regret=False,
        rounds=reps + 1,
    )
    return warm_step_time(model, reps)


def audit_time(m, mechanism, reps, markets=1):
    best, res = np.inf, None
    for _ in range(reps):
        t = time.perf_counter()
        res = audit(mechanism, DIST, m, markets, np.random.default_rng(0))
        best = min(best, time.perf_counter() - t)
    return best, res


# (label, mechanism, law, target in seconds): the audit at its defaults, 10 sellers x 20
# markets (issue #54, item 9)
DEFAULT_CASES = (
    ("offline", "offline", "uniform:0:1", 10.0),
    ("offline", "offline", "beta:2:5:0:2", 10.0),
    ("offline", "offline", "beta:2:2:0:1", 10.0),
    ("offline", "offline", "truncnorm:0.5:0.25:0:1", 10.0),
    ("offline", "offline", "truncexpon:1:0:2", 10.0),
    ("deterministic black box", Threshold(), DIST, 5.0),
    ("randomized lottery (Monte Carlo)", Lottery(), DIST, 15.0),
)


def default_sizes(reps: int) -> list[dict]:
    """The 10 x 20 audits of ``DEFAULT_CASES``, each against its target, with a
    reference (one best-response round of 1000 sellers, offline) timed in this run: the
    ratio audit / reference says how a loaded machine moved the seconds."""
    ref = br_round(1000, "offline", reps)
    rows = []
    for label, mech, law, limit in DEFAULT_CASES:
        t = time.perf_counter()
        res = audit(mech, law, 10, 20, np.random.default_rng(0))
        t = time.perf_counter() - t
        s = res.summary
        rows.append(
            {
                "case": f"audit 10 x 20, {label}, {law}",
                "audit_s": t,
                "reference_s": ref,
                "ratio_to_reference": t / ref,
                "target": f"<= {limit} s",
                "passed": t <= limit,
                "verdict": f"{s['verdict']}/{s['ir_verdict']}",
                "profiles": s.get("profiles_by_kind"),
            }
        )
        print(
            f"10 x 20 {label:34s} {law:22s} audit {t:6.2f} s (target {limit:g} s; "
            f"{t / ref:.0f}x a 1000-seller round of {ref:.3f} s) {s['verdict']}/"
            f"{s['ir_verdict']}{'' if t <= limit else '  OVER'}"
        )
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--m", type=int, default=10_000)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--json", default=None)
    ap.add_argument("--defaults-only", action="store_true", help="only the 10 x 20 audits")
    args = ap.parse_args(argv)
    audit("offline", DIST, 50, 1, np.random.default_rng(0))  # compile the kernels first
    rows, ok = [], True
    for mech, limit in () if args.defaults_only else (("offline", 15.0), ("online", None)):
        br = br_round(args.m, mech, args.reps)
        t, res = audit_time(args.m, mech, args.reps)
        ratio = t / br
        passed = limit is None or ratio <= limit
        ok &= passed
        rows.append(
            {
                "case": f"audit / best-response round, {mech}, m = {args.m}",
                "audit_s": t,
                "br_round_s": br,
                "ratio": ratio,
                "target": f"<= {limit}" if limit else "(reported)",
                "n_candidates": res.summary["n_candidates"],
                "verdict": res.summary["verdict"],
            }
        )
        print(
            f"{mech:8s} m={args.m}: audit {t:.2f} s, best-response round {br:.3f} s, "
            f"ratio {ratio:.1f}x (target {limit or '-'}) verdict {res.summary['verdict']}"
            f"{'' if passed else '  FAILED'}"
        )
    rows += default_sizes(args.reps)
    ok &= all(r["passed"] for r in rows[-len(DEFAULT_CASES) :])
    if args.json:
        write_json(args.json, rows)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
