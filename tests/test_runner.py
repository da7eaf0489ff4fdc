import numpy as np
import pandas as pd

from analysis.online_vs_offline import plot, summarise
from market_sim.cli import main
from market_sim.runner import read_results, run_scenario, task_rng


def test_task_seeds_depend_on_params_and_replication_only():
    p = {"m": 10, "dist": "uniform:0:1"}
    a = task_rng(0, p, 1).random(3)
    assert np.array_equal(a, task_rng(0, dict(reversed(list(p.items()))), 1).random(3))
    assert not np.array_equal(a, task_rng(0, p, 2).random(3))
    assert not np.array_equal(a, task_rng(1, p, 1).random(3))


def test_online_vs_offline_quick_run_is_reproducible_and_plots(tmp_path, capsys):
    out = tmp_path / "r.parquet"
    assert main(["run", "online_vs_offline", "--quick", "--out", str(out), "--workers", "2"]) == 0
    df, meta = read_results(out)
    assert meta["scenario"] == "online_vs_offline" and meta["seed"] == 0 and meta["quick"]
    again = run_scenario("online_vs_offline", quick=True, workers=1)
    pd.testing.assert_frame_equal(df, again)
    assert (df.ratio >= 1 - 1e-12).all()
    s = summarise(df)
    for _, part in s.groupby("dist"):
        assert part["mean"].iloc[-1] < part["mean"].iloc[0]  # closer to 1 with more sellers
    xi = df[(df.m == df.m.max()) & (df.dist == "uniform:0:1")].groupby("xi").online_loss.mean()
    assert list(xi.sort_index(ascending=False)) == sorted(xi)  # fewer arrivals, more loss
    plot(df, str(tmp_path / "fig.png"))
    assert (tmp_path / "fig.png").stat().st_size > 10_000
