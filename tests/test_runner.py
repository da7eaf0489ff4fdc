import importlib
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pandas as pd
import pytest

from market_sim.analysis.online_vs_offline import summarise
from market_sim.cli import main
from market_sim.errors import MarketSimError
from market_sim.runner import plan, read_results, run_scenario, task_rng

TOY = '''
"""A toy study for the runner tests."""
import time
import numpy as np

REPLICATIONS = 2
QUICK_REPLICATIONS = 1
DELAY = {delay}

def grid(quick=False):
    return [dict(m=m) for m in range(1, 4 if quick else 7)]

def run(params, rng):
    time.sleep(DELAY)
    if params["m"] == {fail}:
        raise RuntimeError("this point always fails")
    if params["m"] == {kill}:
        import os, signal
        os.kill(os.getpid(), signal.SIGKILL)  # the OS kills the worker
    x = rng.standard_normal(params["m"])
    return [dict(k=k, value=float(v)) for k, v in enumerate(x)]
'''


@pytest.fixture
def toy(tmp_path, monkeypatch):
    """A scenario package importable here and in child processes."""

    def make(delay=0.0, fail=-1, kill=-1):
        name = f"toy_{tmp_path.name.replace('-', '_')}"
        for mod in [m for m in sys.modules if m.startswith(name)]:
            del sys.modules[mod]  # a rewritten study is imported afresh
        importlib.invalidate_caches()
        pkg = tmp_path / "pkgs" / name
        pkg.mkdir(parents=True, exist_ok=True)
        (pkg / "__init__.py").write_text("")
        (pkg / "study.py").write_text(TOY.format(delay=delay, fail=fail, kill=kill))
        monkeypatch.syspath_prepend(str(tmp_path / "pkgs"))
        path = os.pathsep.join([str(tmp_path / "pkgs"), os.environ.get("PYTHONPATH", "")])
        monkeypatch.setenv("PYTHONPATH", path)
        return f"{name}.study"

    return make


def rows(out):
    df, _ = read_results(out)
    return df.drop(columns=["elapsed"]).sort_values(["task", "k"]).reset_index(drop=True)


def test_task_seeds_depend_on_params_and_replication_only():
    p = {"m": 10, "dist": "uniform:0:1"}
    a = task_rng(0, p, 1).random(3)
    assert np.array_equal(a, task_rng(0, dict(reversed(list(p.items()))), 1).random(3))
    assert not np.array_equal(a, task_rng(0, p, 2).random(3))
    assert not np.array_equal(a, task_rng(1, p, 1).random(3))


def test_results_are_tidy_and_resuming_adds_nothing(toy, tmp_path):
    name = toy()
    out = tmp_path / "out"
    first = run_scenario(name, out, seed=3)
    assert (first.total, first.ran, first.failed) == (12, 12, 0)
    df = pd.read_parquet(out / "results")  # the CLI contract: pandas reads it in full
    assert {"scenario", "replication", "seed", "status", "value", "m", "elapsed"} <= set(df.columns)
    assert len(df) == 2 * sum(range(1, 7)) and (df.status == "ok").all() and (df.seed == 3).all()
    again = run_scenario(name, out, seed=3)
    assert (again.skipped, again.ran) == (12, 0)
    assert len(pd.read_parquet(out / "results")) == len(df)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["seed"] == 3 and len(manifest["grid"]) == 6 and manifest["replications"] == 2
    with pytest.raises(MarketSimError, match="different sweep"):
        run_scenario(name, out, seed=4)


def test_same_seed_same_rows_with_one_or_two_workers_and_with_dask(toy, tmp_path):
    name = toy()
    run_scenario(name, tmp_path / "w1", seed=1, workers=1)
    run_scenario(name, tmp_path / "w2", seed=1, workers=2)
    run_scenario(name, tmp_path / "dask", seed=1, workers=2, executor="dask")
    one = rows(tmp_path / "w1")
    pd.testing.assert_frame_equal(one, rows(tmp_path / "w2"))
    pd.testing.assert_frame_equal(one, rows(tmp_path / "dask"))
    run_scenario(name, tmp_path / "other", seed=2)
    assert not np.allclose(one.value, rows(tmp_path / "other").value)


def test_a_failing_task_is_recorded_and_the_sweep_goes_on(toy, tmp_path, capsys):
    name = toy(fail=2)
    out = tmp_path / "out"
    assert main(["run", name, "--out", str(out), "--no-progress"]) == 1
    df, _ = read_results(out)
    bad = df[df.status == "failed"]
    assert len(bad) == 2 and (bad.m == 2).all()  # both replications of m = 2
    assert "this point always fails" in bad.error.iloc[0]
    assert (df[df.m != 2].status == "ok").all() and len(df[df.m != 2]) == 2 * (1 + 3 + 4 + 5 + 6)
    assert "2 failed" in capsys.readouterr().out
    # a later run retries the failures only
    toy(fail=-1)
    res = run_scenario(name, out)
    assert (res.ran, res.failed) == (2, 0)
    df, _ = read_results(out)
    assert (df.status == "ok").all() and len(df) == 2 * 21


def test_a_killed_sweep_resumes_to_exactly_the_uninterrupted_rows(toy, tmp_path):
    name = toy(delay=0.25)
    out = tmp_path / "killed"
    cmd = [
        sys.executable,
        "-m",
        "market_sim.cli",
        "run",
        name,
        "--out",
        str(out),
        "--no-progress",
        "--workers",
        "2",
    ]
    proc = subprocess.Popen(
        cmd, start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    deadline = time.time() + 60
    while len(list((out / "results").glob("done-*"))) < 3 and time.time() < deadline:
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "resume" in err
    partial = len(list((out / "results").glob("done-*")))
    assert 3 <= partial < 12
    res = run_scenario(name, out)
    assert res.skipped == partial and res.ran == 12 - partial
    run_scenario(name, tmp_path / "whole")
    pd.testing.assert_frame_equal(rows(out), rows(tmp_path / "whole"))


def test_overrides_reps_and_bad_names(toy, tmp_path):
    name = toy()
    tasks = plan(name, quick=True, reps=3, overrides={"m": 5})
    assert len(tasks) == 3 and all(t.params["m"] == 5 for t in tasks)
    with pytest.raises(MarketSimError, match="no parameter 'n'"):
        plan(name, overrides={"n": 1})
    assert main(["run", "no_such_study", "--out", str(tmp_path / "x")]) == 2
    assert main(["run", name, "--set", "oops", "--out", str(tmp_path / "x")]) == 2


def test_scenarios_are_listed(capsys):
    assert main(["scenarios"]) == 0
    listed = capsys.readouterr().out
    for name in ("asymptotic", "correlation", "ic_stress", "ir", "online_vs_offline", "wisconsin"):
        assert name in listed


def test_online_vs_offline_quick_run_and_report(tmp_path):
    out = tmp_path / "ovo"
    assert (
        main(
            [
                "run",
                "online_vs_offline",
                "--quick",
                "--out",
                str(out),
                "--workers",
                "2",
                "--no-progress",
            ]
        )
        == 0
    )
    df, meta = read_results(out)
    assert meta["scenario"] == "online_vs_offline" and meta["seed"] == 0 and meta["quick"]
    assert (df.ratio >= 1 - 1e-12).all()
    s = summarise(df)
    for _, part in s.groupby("dist"):
        assert part["mean"].iloc[-1] < part["mean"].iloc[0]  # closer to 1 with more sellers
    xi = df[(df.m == df.m.max()) & (df.dist == "uniform:0:1")].groupby("xi").online_loss.mean()
    assert list(xi.sort_index(ascending=False)) == sorted(xi)  # fewer arrivals, more loss
    assert main(["report", str(out)]) == 0
    md = (out / "report" / "report.md").read_text()
    assert "Online vs offline" in md and "online_vs_offline.png" in md
    assert (out / "report" / "online_vs_offline.png").stat().st_size > 10_000
    assert "<img" in (out / "report" / "report.html").read_text()


def test_a_worker_killed_by_the_os_is_reported_and_the_rest_completes(toy, tmp_path):
    name = toy(kill=3)
    out = tmp_path / "out"
    res = run_scenario(name, out, workers=2)
    assert res.failed == 2  # both replications of m = 3
    df, _ = read_results(out)
    dead = df[df.status == "failed"]
    assert set(dead.m) == {3} and dead.error.str.contains("worker process died").all()
    assert len(df[df.status == "ok"]) == 2 * (1 + 2 + 4 + 5 + 6)


def test_corrupt_result_files_are_detected_and_re_run(toy, tmp_path):
    name = toy()
    out = tmp_path / "out"
    run_scenario(name, out)
    files = sorted((out / "results").glob("done-*.parquet"))
    files[0].write_bytes(files[0].read_bytes()[:100])  # a crash mid-copy
    files[1].write_bytes(b"")
    res = run_scenario(name, out)
    assert (res.ran, res.skipped) == (2, 10)
    run_scenario(name, tmp_path / "clean")
    pd.testing.assert_frame_equal(rows(out), rows(tmp_path / "clean"))


def test_a_full_disk_stops_the_sweep_cleanly_and_it_resumes(toy, tmp_path, monkeypatch, capsys):
    import errno

    import market_sim.runner as runner

    name = toy()
    out = tmp_path / "out"
    real, calls = runner.atomic_write, []

    def flaky(path, write):
        calls.append(path)
        if len(calls) > 4 and str(path).endswith(".parquet"):
            raise OSError(errno.ENOSPC, "No space left on device")
        real(path, write)

    monkeypatch.setattr(runner, "atomic_write", flaky)
    assert main(["run", name, "--out", str(out), "--no-progress"]) == 2
    assert "No space left on device" in capsys.readouterr().err
    stored = list((out / "results").iterdir())
    assert len(stored) == 3 and not [p for p in stored if p.name.startswith(".")]  # no temp files
    monkeypatch.setattr(runner, "atomic_write", real)
    assert run_scenario(name, out).ran == 9
    run_scenario(name, tmp_path / "clean")
    pd.testing.assert_frame_equal(rows(out), rows(tmp_path / "clean"))


def test_files_record_provenance_and_repeat_exactly(toy, tmp_path, monkeypatch):
    import pyarrow.parquet as pq

    import market_sim.runner as runner

    name = toy()
    run_scenario(name, tmp_path / "a", seed=5)
    run_scenario(name, tmp_path / "b", seed=5)
    for f in sorted((tmp_path / "a" / "results").glob("*.parquet")):
        meta = json.loads(pq.read_schema(f).metadata[b"market_sim"])
        assert meta["seed"] == 5 and meta["scenario"] == name and "m" in meta["params"]
        assert meta["version"] == runner._code_version()
        a, b = pq.read_table(f), pq.read_table(tmp_path / "b" / "results" / f.name)
        assert a.drop(["elapsed"]).equals(b.drop(["elapsed"]))  # everything but the timing
    # other code must not resume these results
    monkeypatch.setattr(runner, "_code_version", lambda: "9.9.9+other")
    with pytest.raises(MarketSimError, match="holds results of code"):
        run_scenario(name, tmp_path / "a", seed=5)
