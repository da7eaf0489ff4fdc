"""The execution layer (`market_sim.execution`) and the analyses on it: the same rows for
one worker and two, resume after a kill, refusal of another command, and a real Dask
cluster (a scheduler and a worker started as separate processes)."""

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from market_sim.cli import main
from market_sim.comparison import compare
from market_sim.errors import MarketSimError
from market_sim.execution import Job, Shared, job_rng, open_store, run_jobs
from market_sim.games.egta import egta

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
EGTA = dict(n_sellers=5, strategies=["truthful", "shade:factor=1.3"], samples=2, rounds=2)
EGTA_ARGV = ["egta", "--mechanism", "pay-as-bid", "--dist", "uniform:1:5", "--sellers", "5",
             "--strategy", "truthful", "--strategy", "shade:factor=1.3", "--samples", "2",
             "--rounds", "2", "--boot", "50", "--quiet"]  # fmt: skip
COMPARE_ARGV = ["compare", "--mechanism", "pay-as-bid", "--mechanism", "online", "--dist",
                "uniform:0:1", "--sellers", "8", "--markets", "6", "--grid", "9", "--random",
                "4", "--quiet"]  # fmt: skip


def _draw(identity, seed):
    """A job: three numbers of its own stream, and the pid that drew them."""
    return job_rng(seed, identity).random(3).tolist(), os.getpid()


_KEPT = []  # the arguments jobs received: alive, so that no two copies share an id


def _identity(shared, i):
    """A job: which copy of the shared argument it got, in which process."""
    _KEPT.append(shared)
    return os.getpid(), id(shared)


def _fail(x):
    raise MarketSimError(f"job {x} refuses")


def _cli(argv):
    """The command in a process of its own (to be killed)."""
    return subprocess.Popen(
        [sys.executable, "-m", "market_sim.cli", *argv],
        env=ENV,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _compare_rows(res):
    """The leaderboard (without the timing column), the paired table and the markets."""
    return res.leaderboard.drop(columns="seconds"), res.paired, res.markets


# ---- the layer ------------------------------------------------------------------------
def test_jobs_give_the_same_results_in_order_on_any_worker_count_and_resume(tmp_path):
    jobs = [Job(f"j{i}", _draw, ((i, "x"), 7)) for i in range(9)]
    one = run_jobs(jobs)
    two = run_jobs(jobs, workers=2)
    assert [r[0] for r in one] == [r[0] for r in two]
    assert {r[1] for r in one} == {os.getpid()} and os.getpid() not in {r[1] for r in two}
    assert one[4][0] == job_rng(7, [4, "x"]).random(3).tolist()  # its own stream, by identity
    store = open_store(tmp_path / "s", "toy", {"n": 9})
    part = run_jobs(jobs[:4], store=store)  # an interrupted run: 4 of 9 stored
    rest = run_jobs(jobs, store=store, workers=2)  # the 4 are read, not run again
    assert [r[1] for r in rest[:4]] == [r[1] for r in part]
    assert [r[0] for r in rest] == [r[0] for r in one]
    assert len(list(store.glob("done-*.pkl"))) == 9
    with pytest.raises(MarketSimError, match="holds the tasks of a different toy command"):
        open_store(tmp_path / "s", "toy", {"n": 10})
    # a Shared argument is unpickled once per worker process, then the same object
    big = Shared(np.arange(1000))
    seen = run_jobs([Job(f"s{i}", _identity, (big, i)) for i in range(12)], workers=2)
    copies = {pid: set() for pid, _ in seen}
    for pid, ident in seen:
        copies[pid].add(ident)
    assert all(len(ids) == 1 for ids in copies.values())
    with pytest.raises(MarketSimError, match="job [34] refuses"):  # a task's error, as it is
        run_jobs([Job(f"f{i}", _fail, (i,)) for i in range(3, 5)], workers=2)
    with pytest.raises(MarketSimError, match="two jobs share a key"):
        run_jobs([Job("a", _fail, (1,)), Job("a", _fail, (2,))])
    with pytest.raises(MarketSimError, match="cannot be sent to another process"):
        run_jobs([Job(f"l{i}", lambda: 1) for i in range(2)], workers=2)


# ---- compare and egta on one worker and two ------------------------------------------
def test_compare_and_egta_give_the_same_rows_on_one_and_two_workers():
    kw = dict(n_grid=5, n_random=4, refine=False)
    one = compare(["pay-as-bid", "online"], "uniform:0:1", [5, 7], 2, 5, **kw)
    two = compare(["pay-as-bid", "online"], "uniform:0:1", [5, 7], 2, 5, workers=2, **kw)
    for a, b in zip(_compare_rows(one), _compare_rows(two), strict=True):
        pd.testing.assert_frame_equal(a, b)
    assert set(one.leaderboard["ic"]) == {"ic", "not_ic"}  # the audits ran
    e1 = egta("pay-as-bid", "uniform:1:5", seed=3, n_boot=50, **EGTA)
    e2 = egta("pay-as-bid", "uniform:1:5", seed=3, n_boot=50, workers=2, **EGTA)
    np.testing.assert_array_equal(e1.sample_payoffs, e2.sample_payoffs)
    pd.testing.assert_frame_equal(e1.table(), e2.table())
    assert np.unique(e1.sample_payoffs).size > 1  # not a constant table


# ---- resume ------------------------------------------------------------------------------
def _kill_after(argv, out: Path, stored: int, sig) -> int:
    """Start the command, send ``sig`` once ``stored`` tasks are in out/tasks; the number
    stored when it ended."""
    proc = _cli(argv + ["--out", str(out)])
    tasks = out / "tasks"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        if tasks.is_dir() and len(list(tasks.glob("done-*.pkl"))) >= stored:
            proc.send_signal(sig)
            break
        time.sleep(0.02)
    proc.communicate(timeout=60)
    return len(list(tasks.glob("done-*.pkl")))


def test_a_killed_compare_and_egta_resume_to_the_uninterrupted_result(tmp_path, capsys):
    whole = tmp_path / "whole"
    assert main(COMPARE_ARGV + ["--out", str(whole)]) == 0
    n_tasks = len(list((whole / "tasks").glob("done-*.pkl")))
    assert n_tasks == 2 * 6 + 2  # every market's audit of each mechanism, then the scores
    cut = tmp_path / "cut"
    kept = _kill_after(COMPARE_ARGV, cut, 3, signal.SIGKILL)
    assert 3 <= kept < n_tasks  # killed half way
    before = {p.name: p.stat().st_mtime_ns for p in (cut / "tasks").glob("done-*.pkl")}
    assert main(COMPARE_ARGV + ["--out", str(cut)]) == 0
    after = {p.name: p.stat().st_mtime_ns for p in (cut / "tasks").glob("done-*.pkl")}
    assert len(after) == n_tasks and all(after[k] == v for k, v in before.items())  # not re-run
    for name in ("markets.csv", "paired.csv"):
        assert (cut / name).read_text() == (whole / name).read_text()
    lb = [pd.read_csv(d / "leaderboard.csv").drop(columns="seconds") for d in (whole, cut)]
    pd.testing.assert_frame_equal(*lb)
    # Ctrl-C on egta: one line, exit 130, and the same payoffs after resuming
    e = tmp_path / "egta"
    proc = _cli(EGTA_ARGV + ["--out", str(e)])
    deadline = time.monotonic() + 60
    while proc.poll() is None and time.monotonic() < deadline:
        if len(list((e / "tasks").glob("done-*.pkl"))) >= 2:
            proc.send_signal(signal.SIGINT)
            break
        time.sleep(0.02)
    _, err = proc.communicate(timeout=60)
    if proc.returncode == 130:  # caught before it finished (else it had just ended)
        assert err.strip().splitlines() == [
            f"market-sim: interrupted; finished tasks are in {e / 'tasks'}; run the same "
            "command to resume"
        ]
    assert main(EGTA_ARGV + ["--out", str(e)]) == 0
    assert main(EGTA_ARGV + ["--out", str(tmp_path / "e1")]) == 0
    assert (e / "payoffs.csv").read_text() == (tmp_path / "e1" / "payoffs.csv").read_text()
    capsys.readouterr()
    # another command into the same folder: one line, exit 2
    assert main(COMPARE_ARGV + ["--seed", "1", "--out", str(cut)]) == 2
    assert capsys.readouterr().err == (
        f"market-sim: error: {cut / 'tasks'} holds the tasks of a different compare command; "
        "choose another --out\n"
    )


# ---- a real cluster -------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_compare_and_egta_on_a_dask_scheduler_and_worker_give_the_local_rows(tmp_path):
    """`dask scheduler` and `dask worker` as processes of their own (not a LocalCluster in
    this process); the worker imports this checkout's market_sim through PYTHONPATH."""
    dask = Path(sys.executable).with_name("dask")
    port = _free_port()
    address = f"tcp://127.0.0.1:{port}"
    quiet = dict(env=ENV, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    scheduler = subprocess.Popen([str(dask), "scheduler", "--host", "127.0.0.1", "--port",
                                  str(port), "--no-dashboard"], **quiet)  # fmt: skip
    worker = subprocess.Popen([str(dask), "worker", address, "--nthreads", "1", "--nworkers",
                               "1", "--no-dashboard", "--no-nanny"], **quiet)  # fmt: skip
    try:
        from distributed import Client

        with Client(address, timeout=20) as client:
            client.wait_for_workers(1, timeout=20)
        kw = dict(n_grid=5, n_random=4, refine=False)
        args = (["pay-as-bid", "online"], "uniform:0:1", 6, 2, 2)
        local = compare(*args, **kw)
        remote = compare(*args, executor="dask", address=address, **kw)
        for a, b in zip(_compare_rows(local), _compare_rows(remote), strict=True):
            pd.testing.assert_frame_equal(a, b)
        e_local = egta("pay-as-bid", "uniform:1:5", seed=1, n_boot=50, **EGTA)
        out = tmp_path / "egta"
        assert main(EGTA_ARGV + ["--seed", "1", "--address", address, "--out", str(out)]) == 0
        assert (out / "payoffs.csv").read_text() == e_local.table().to_csv(index=False)
    finally:
        for proc in (worker, scheduler):
            proc.terminate()
        for proc in (worker, scheduler):
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def test_an_audit_with_coalitions_and_psro_are_the_same_on_one_and_two_workers():
    from market_sim.auditing import audit
    from market_sim.games.psro import psro

    kw = dict(n_grid=5, n_random=4, refine=False, coalition_size=2)
    a1 = audit("pay-as-bid", "uniform:0:1", 4, 3, np.random.default_rng(2), **kw)
    a2 = audit("pay-as-bid", "uniform:0:1", 4, 3, np.random.default_rng(2), workers=2, **kw)
    pd.testing.assert_frame_equal(a1.table, a2.table)
    assert a1.summary["coalition_witness"] == a2.summary["coalition_witness"] is not None
    assert a1.summary["verdict"] == "not_ic"  # pay-as-bid: a found gain, not an empty table
    args = ("pay-as-bid", "uniform:0:1", 3, ["truthful", "shade:factor=1.5"])
    kw = dict(iterations=2, markets=16, grid=9, bid_grid=17, tol=0.0)
    p1 = psro(*args, rng=np.random.default_rng(5), **kw)
    p2 = psro(*args, rng=np.random.default_rng(5), workers=2, **kw)
    assert p1.regret == p2.regret and p1.mixtures == p2.mixtures and p1.regret[0] > 0


def test_a_bne_sweep_is_the_same_on_one_and_two_workers_and_each_setting_alone():
    from market_sim.games.equilibrium import bne_sweep

    sweep = [{"population": "uniform:1:5", "n_sellers": 3}, {"population": "uniform:0:1"}]
    kw = dict(n_sellers=4, samples=64, max_iter=3, grid=9)
    one = bne_sweep("pay-as-bid", sweep, 7, **kw)
    two = bne_sweep("pay-as-bid", sweep, 7, workers=2, **kw)
    alone = bne_sweep("pay-as-bid", sweep[1:], 7, **kw)  # its stream is its setting's own
    for a, b in zip(one, two, strict=True):
        np.testing.assert_array_equal(a.bids, b.bids)
        assert a.epsilon == b.epsilon
    np.testing.assert_array_equal(one[1].bids, alone[0].bids)
    assert [r.n_sellers for r in one] == [3, 4] and not np.array_equal(one[0].bids, one[1].bids)
    with pytest.raises(MarketSimError, match=r"settings\[0\]: no population"):
        bne_sweep("pay-as-bid", [{"n_sellers": 3}], 7)
