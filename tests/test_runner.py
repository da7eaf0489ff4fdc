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


# ---- --set values checked against the study's declarations -----------------------------
def test_a_set_value_outside_the_declared_choices_is_refused_before_any_task(
    tmp_path, capsys, monkeypatch
):
    import market_sim.runner as runner

    monkeypatch.setattr(runner, "execute", lambda *a, **k: pytest.fail("a task ran"))
    out = tmp_path / "ir"
    for setting, needles in (
        ("dist=normal:0:1", ["dist must be a cost distribution", "uniform:LOW:HIGH", "'normal'"]),
        ("mechanism=ofline", ["mechanism must be a registered mechanism", "'offline'?"]),
        ("sellers=0", ["sellers must be an integer >= 1"]),
        ("gamma=-0.3", ["gamma must be a number > 0"]),
    ):
        assert main(["run", "ir", "--set", setting, "--out", str(out)]) == 2
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and err.startswith("market-sim: error: --set ")
        assert all(n in err for n in needles), err
    assert not out.exists()
    assert main(["run", "wisconsin", "--set", "mapping=sortd", "--out", str(out)]) == 2
    assert "one of independent, sorted; did you mean 'sorted'?" in capsys.readouterr().err


def test_declarations_accept_what_they_say_and_refuse_the_rest():
    from market_sim.parameters import Choice, Distribution, Number, Registered, check_value

    cases = [
        (Choice("a", "b"), ["a", "b"], ["c", 1, True]),
        (Number(int, low=1), [1, 10**6], [0, 1.5, True, "2", float("inf")]),
        (Number(float, low=0, high=1, low_open=True), [0.5, 1, 1.0], [0, 1.01, -1, float("nan")]),
        (Distribution(), ["uniform:0:1", "beta:2:5:0:1", "uniform:0:1+iron"], ["normal:0:1", 3]),
        (Registered("mechanism"), ["offline", "pay-as-bid", "offline:k=5"], ["ofline", "x.y:Z"]),
        (Registered("strategy"), ["shade:factor=1.3", "best-response"], ["shadee"]),
        (("x", "y"), ["x"], ["z"]),  # a tuple is a Choice
    ]
    for decl, good, bad in cases:
        for v in good:
            check_value("p", v, decl)
        for v in bad:
            with pytest.raises(MarketSimError, match=r"^--set p=.*: p must be ") as info:
                check_value("p", v, decl)
            assert "\n" not in str(info.value)

    def even(v):
        """an even integer"""
        if v % 2:
            raise ValueError("odd")

    check_value("n", 4, even)
    with pytest.raises(MarketSimError, match=r"n must be an even integer; odd"):
        check_value("n", 3, even)


STUDIES = [
    "asymptotic",
    "collaborative",
    "collaborative_tradeoff",
    "correlation",
    "dynamics",
    "ic_scaling",
    "ic_stress",
    "ir",
    "learned",
    "multidim",
    "online_vs_offline",
    "private_mechanisms",
    "repeated",
    "wisconsin",
]


@pytest.mark.parametrize("name", STUDIES)
def test_every_built_in_study_declares_its_parameters_and_its_grid_obeys_them(name):
    from market_sim.parameters import check_value
    from market_sim.runner import find_study

    study = find_study(name).obj
    declared = study.PARAMS
    for quick in (True, False):
        grid = study.grid(quick)
        assert set(declared) == set().union(*(p.keys() for p in grid)), name
        for point in grid:
            for key, value in point.items():
                check_value(key, value, declared[key])


def test_a_study_file_can_declare_its_own_checks(tmp_path, capsys):
    (tmp_path / "mine.py").write_text(
        '"""A study with declared parameters."""\n'
        "from market_sim.parameters import Choice, Number\n"
        "REPLICATIONS = 1\n"
        'PARAMS = {"arm": Choice("a", "b"), "n": Number(int, low=2)}\n'
        "def grid(quick=False):\n"
        '    return [dict(arm="a", n=2)]\n'
        "def run(params, rng):\n"
        "    return [dict(x=1.0)]\n"
    )
    study = str(tmp_path / "mine.py")
    assert plan(study, overrides={"arm": "b", "n": 5})[0].params == {"arm": "b", "n": 5}
    with pytest.raises(MarketSimError, match="arm must be one of a, b"):
        plan(study, overrides={"arm": "c"})
    with pytest.raises(MarketSimError, match="n must be an integer >= 2"):
        plan(study, overrides={"n": 1})


# ---- failures, the scheduler, progress --------------------------------------------------
def test_each_distinct_failure_reason_is_printed_in_one_line(tmp_path, capsys):
    (tmp_path / "flaky.py").write_text(
        '"""Fails in two ways."""\n'
        "REPLICATIONS = 2\n"
        "def grid(quick=False):\n"
        "    return [dict(m=m) for m in range(5)]\n"
        "def run(params, rng):\n"
        '    if params["m"] in (1, 3):\n'
        "        raise ValueError(f\"bad m {params['m'] % 2}\")\n"
        '    if params["m"] == 4:\n'
        '        {}["missing"]\n'
        "    return [dict(x=1.0)]\n"
    )
    out = tmp_path / "out"
    assert main(["run", str(tmp_path / "flaky.py"), "--quiet", "--out", str(out)]) == 1
    captured = capsys.readouterr()
    assert captured.out.strip().endswith(f"6 failed; results in {out}/results")
    lines = captured.err.strip().splitlines()
    assert len(lines) == 2, lines
    assert lines[0].startswith("4 tasks failed: ValueError: bad m 1 (first: task ")
    assert "m=1; replication 0)" in lines[0]
    assert lines[1].startswith("2 tasks failed: KeyError: 'missing' (first: task ")
    res = run_scenario(str(tmp_path / "flaky.py"), out)  # only the failures are re-run
    assert (res.ran, res.failed) == (6, 6) and [f[1] for f in res.failures] == [4, 2]


def test_an_unreachable_scheduler_is_one_line_fast_and_writes_nothing(toy, tmp_path, capsys):
    name = toy()
    out = tmp_path / "out"
    argv = ["run", name, "--executor", "dask", "--address", "tcp://127.0.0.1:1", "--out", str(out)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    want = "cannot reach the Dask scheduler at tcp://127.0.0.1:1: Connection refused"
    assert err == f"market-sim: error: {want}\n"
    assert not out.exists()
    assert main(argv[:-4] + ["--address", "tcp://localhost:port", "--out", str(out)]) == 2
    assert "expected tcp://HOST:PORT" in capsys.readouterr().err


def test_a_scheduler_that_never_answers_times_out_in_one_line(toy, tmp_path, capsys, monkeypatch):
    import socket

    import market_sim.runner as runner

    monkeypatch.setattr(runner, "DASK_CONNECT_TIMEOUT", 0.5)
    name = toy()
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(1)  # accepts connections, never speaks Dask
    try:
        port = silent.getsockname()[1]
        out = tmp_path / "out"
        argv = ["run", name, "--executor", "dask", "--address", f"tcp://127.0.0.1:{port}"]
        assert main(argv + ["--quiet", "--out", str(out)]) == 2
    finally:
        silent.close()
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert err.startswith(
        f"market-sim: error: cannot connect to the Dask scheduler at tcp://127.0.0.1:{port}"
    )
    assert "no Dask handshake within 0.5 s" in err
    assert not out.exists()
    # a real scheduler passes the probe (it speaks first)
    from distributed import LocalCluster

    with LocalCluster(n_workers=0, processes=False, dashboard_address=None) as cluster:
        runner._probe_scheduler(cluster.scheduler_address)


def test_progress_goes_to_stderr_and_quiet_silences_it(toy, tmp_path, capsys):
    name = toy()
    assert main(["run", name, "--quick", "--out", str(tmp_path / "a")]) == 0
    loud = capsys.readouterr()
    assert "3/3" in loud.err and loud.out.count("\n") == 1 and loud.out.startswith("3 tasks:")
    assert main(["run", name, "--quick", "--quiet", "--out", str(tmp_path / "b")]) == 0
    quiet = capsys.readouterr()
    assert quiet.err == "" and quiet.out.startswith("3 tasks:")


def test_listing_the_studies_imports_none_of_them():
    code = (
        "import sys; from market_sim.runner import list_scenarios; rows = list_scenarios(); "
        "print(len(rows), sorted(m for m in sys.modules if m.startswith('market_sim.scenarios.')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split(" ", 1) == [str(len(STUDIES)), "[]\n"]


def test_folder_kinds(tmp_path):
    from market_sim.runner import folder_kind

    assert folder_kind(tmp_path / "none") is None and folder_kind(tmp_path) is None
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "manifest.json").write_text('{"scenario": "ir"}')  # an older run manifest
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "model.csv").write_text("round\n")
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "manifest.json").write_text('{"kind": "simulate"}')
    assert [folder_kind(tmp_path / k) for k in "rsm"] == ["run", "simulate", "simulate"]


def test_damaged_results_and_manifests_are_one_line(toy, tmp_path, capsys):
    name = toy()
    out = tmp_path / "out"
    run_scenario(name, out)
    first = sorted((out / "results").glob("done-*.parquet"))[0]
    first.write_bytes(b"PAR1 garbage PAR1")  # looks whole, is not
    assert main(["report", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{first}: not a readable result file" in err
    (out / "manifest.json").write_text("{not json")
    for argv in (["report", str(out)], ["run", name, "--quiet", "--out", str(out)]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "manifest.json: not a valid manifest" in err
