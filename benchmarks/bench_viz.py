"""Server-side cost of one round of the interactive page (``market-sim viz``).

One round = ``model.step()`` plus drawing the three figure panels to PNG, as the
page does after Step.  Wall and CPU seconds per round (CPU time is less
disturbed by other load on the machine).  Needs the viz extra.

    python benchmarks/bench_viz.py [--m 1000] [--rounds 10] [--regret]
"""

import argparse
import time

from market_sim import viz


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--m", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--regret", action="store_true", help="measure regret (on the sample)")
    ap.add_argument("--mechanism", default=viz.DEFAULTS["mechanism"])
    ap.add_argument("--strategy", default=viz.DEFAULTS["strategy"])
    a = ap.parse_args()
    model = viz.PageModel(
        **{
            **viz.DEFAULTS,
            "n_sellers": a.m,
            "measure_regret": a.regret,
            "mechanism": a.mechanism,
            "strategy": a.strategy,
        }
    )
    panels = [viz.ReportsPanel, viz.AllocationPanel, viz.HistoryPanel]
    show, viz._show = viz._show, lambda fig: viz.render_png(fig)
    try:
        model.step()  # warm-up: compiled kernels, caches
        [p(model) for p in panels]
        rows = []
        for _ in range(a.rounds):
            w, c = time.perf_counter(), time.process_time()
            model.step()
            w1, c1 = time.perf_counter(), time.process_time()
            for p in panels:
                p(model)
            rows.append((w1 - w, c1 - c, time.perf_counter() - w1, time.process_time() - c1))
    finally:
        viz._show = show
    n = len(rows)
    sw, sc, rw, rc = (sum(r[i] for r in rows) / n for i in range(4))
    print(f"m={a.m} mechanism={a.mechanism} strategy={a.strategy} regret={a.regret} rounds={n}")
    print(f"  step   {sw:.3f} s wall  {sc:.3f} s CPU")
    print(f"  panels {rw:.3f} s wall  {rc:.3f} s CPU")
    print(f"  round  {sw + rw:.3f} s wall  {sc + rc:.3f} s CPU")


if __name__ == "__main__":
    main()
