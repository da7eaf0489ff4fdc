"""Nothing a command starts outlives it (issue #51, item 2).

A study whose tasks spin for a minute runs with ``market-sim run --workers 2`` (a
forkserver pool: the server, two workers, the resource tracker) or ``--executor dask``
(a LocalCluster: nannies and workers).  The command is killed with SIGTERM or SIGKILL
once its workers are busy; every process it started must be gone (or a zombie, which
runs nothing) a few seconds later.  Before the fix, the pool's workers kept spinning
for the rest of their task after either signal.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

SPIN = '''
"""A study whose every task spins for a minute (for the process-cleanup test)."""
import os
import time
from pathlib import Path

REPLICATIONS = 4
MARKS = Path({marks!r})

def grid(quick=False):
    return [dict(k=0)]

def run(params, rng):
    (MARKS / str(os.getpid())).touch()  # this worker is in a task now
    end = time.time() + 60
    x = 0
    while time.time() < end:
        x += 1
    return [dict(x=x)]
'''

GRACE_SECONDS = 10.0  # the workers poll their command every 0.5 s


def _running(procs: list[psutil.Process]) -> list[psutil.Process]:
    alive = []
    for p in procs:
        try:
            if p.status() != psutil.STATUS_ZOMBIE:
                alive.append(p)
        except psutil.NoSuchProcess:
            pass
    return alive


def _busy_descendants(cmd: psutil.Process, marks: Path, timeout: float) -> list[psutil.Process]:
    """The command's descendants once two of them are inside a task (each task marks its
    process in ``marks``)."""
    end = time.time() + timeout
    while time.time() < end:
        kids = cmd.children(recursive=True)
        pids = {k.pid for k in kids}
        if len({int(f.name) for f in marks.iterdir()} & pids) >= 2:
            return kids
        time.sleep(0.25)
    raise AssertionError("two workers never started a task")


@pytest.mark.parametrize(
    "executor, sig",
    [
        ("local", signal.SIGTERM),
        ("local", signal.SIGKILL),
        ("dask", signal.SIGTERM),
        ("dask", signal.SIGKILL),
    ],
)
def test_no_process_outlives_the_command(tmp_path: Path, executor: str, sig: int):
    marks = tmp_path / "marks"
    marks.mkdir()
    study = tmp_path / "spin.py"
    study.write_text(SPIN.replace("{marks!r}", repr(str(marks))))
    cmd = [
        sys.executable,
        "-m",
        "market_sim.cli",
        "run",
        str(study),
        "--workers",
        "2",
        "--executor",
        executor,
        "--out",
        str(tmp_path / "out"),
        "--quiet",
    ]
    proc = subprocess.Popen(
        cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    command = psutil.Process(proc.pid)
    kids: list[psutil.Process] = []
    try:
        kids = _busy_descendants(command, marks, timeout=120)
        os.kill(proc.pid, sig)
        proc.wait(timeout=60)
        if sig == signal.SIGTERM:  # ended as Ctrl-C ends it, not killed where it stood
            assert proc.returncode == 130
        end = time.time() + GRACE_SECONDS
        while _running(kids) and time.time() < end:
            time.sleep(0.25)
        left = [(p.pid, p.name()) for p in _running(kids)]
        assert not left, f"still running {GRACE_SECONDS:g} s after {sig!r}: {left}"
    finally:  # whatever the verdict, leave nothing running
        if proc.poll() is None:
            kids += command.children(recursive=True)
            proc.kill()
            proc.wait()
        for p in _running(kids):
            p.kill()
