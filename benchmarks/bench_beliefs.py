"""The beliefs stage's observation (``bne(..., beliefs_rounds=R)``, issue #48): one
seeded chunk of 1,024 markets of pay-as-bid, 30 sellers, Beta(2, 5) on [0, 2], playing
the committed stage table, timed back to back in this run.

    python benchmarks/bench_beliefs.py [--repeat 2]

Rows (best of ``--repeat``; ratios in this run):

* **now**: the stage's reports (``report_set`` from half the table's lowest bid) and
  Beta's closed-form virtual cost (``distributions._beta_cdf_over_pdf``);
* **scipy psi**: the same reports, the virtual cost by scipy's cdf / pdf (the former
  generic path, patched in for the row);
* **former**: scipy's virtual cost and the former reports (a geometric grid from 10^-3 of
  the range: 449 reports).

Each row's Ē and T̄ are checked equal at the reports the rows share (the same seed, the
same markets): the speed-ups change no number beyond rounding (the largest relative
difference is printed).  A round of the stage is 16 such chunks (``beliefs_markets``
16,384) spread over the cores.
"""

from __future__ import annotations

import argparse
import math
import platform
import time
from pathlib import Path

import numpy as np

from market_sim import distributions
from market_sim.games import equilibrium_beliefs as stage
from market_sim.games.equilibrium_setup import _setup

TABLE = Path(__file__).resolve().parent / "data" / "pab30_beta25_beliefs_stage.npz"


def scipy_ratio(c, frozen):
    """F / f by scipy's frozen cdf and pdf (the generic path)."""
    return frozen.cdf(c) / frozen.pdf(c)


def timed(game, costs, bids, reports, seed: int, closed_form: bool):
    closed = distributions._beta_cdf_over_pdf
    if not closed_form:
        distributions._beta_cdf_over_pdf = scipy_ratio
    try:
        t0 = time.perf_counter()
        out = stage.observe_chunk(game, [costs], [bids], [reports], seed, 30, False)
        return time.perf_counter() - t0, out
    finally:
        distributions._beta_cdf_over_pdf = closed


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args(argv)
    setup = _setup("pay-as-bid", [("beta:2:5:0:2", 30)], None, np.random.default_rng(0), {}, None)
    table = np.load(TABLE)
    costs, bids = table["costs"], table["bids"]
    z_top = 0.7  # the top of the live reports in the measured run's stage
    game = (setup.mech, setup.classes)
    now = stage.report_set(setup.z_range, z_top, float(bids[0]))
    # the former reports: geometric from REPORT_FLOOR of the range (a lowest bid at z_lo)
    former = stage.report_set(setup.z_range, z_top, setup.z_range[0])
    rows = {"now": (now, True), "scipy psi": (now, False), "former": (former, False)}
    print(f"# beliefs stage, one chunk of {stage.CHUNK} markets; {platform.machine()}, "
          f"{time.strftime('%Y-%m-%d')}")  # fmt: skip
    best = dict.fromkeys(rows, math.inf)
    seen = {}
    for _ in range(args.repeat):  # interleaved: the machine's noise hits every row
        for name, (reports, closed) in rows.items():
            t, out = timed(game, costs, bids, reports, 7, closed)
            best[name] = min(best[name], t)
            seen[name] = out
    print("| row | reports | seconds | / now |")
    print("|---|---|---|---|")
    for name, (reports, _) in rows.items():
        print(f"| {name} | {reports.size} | {best[name]:.2f} | {best[name] / best['now']:.2f}x |")
    ref_E = seen["former"][1][0][0] / seen["former"][0]
    for name in ("now", "scipy psi"):
        E = seen[name][1][0][0] / seen[name][0]
        at = np.isin(former, now)
        shared = np.isin(now, former)
        diff = np.max(np.abs(E[shared] - ref_E[at]) / np.maximum(np.abs(ref_E[at]), 1e-300))
        print(f"{name}: largest relative difference of E-bar from 'former' at "
              f"{int(shared.sum())} shared reports: {diff:.1e}")  # fmt: skip


if __name__ == "__main__":
    main()
