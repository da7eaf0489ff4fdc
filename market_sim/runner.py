"""Run a scenario's grid with reproducible seeds, resumably, into a results folder.

A scenario module defines ``NAME``, ``REPLICATIONS`` (optionally
``QUICK_REPLICATIONS``), ``grid(quick) -> list of params`` and
``run(params, rng) -> list of row dicts``.  Task (params, r) gets the generator
``default_rng(SeedSequence([seed, digest(params), r]))``: a task's numbers do
not depend on the order, the executor or the number of workers, and any task
can be re-run alone with ``task_rng``.

Layout of ``OUT``::

    OUT/manifest.json              version, scenario, root seed, the full grid
    OUT/results/done-<id>.parquet    the rows of one finished task (atomic write)
    OUT/results/failed-<id>.parquet  one row: status "failed" and the traceback

Each task is written as soon as it returns, so an interrupted sweep resumes
where it stopped: finished tasks are skipped, failed ones are retried, and
the sweep goes on past a task that raises.  ``done-`` files sort first, so
``pandas.read_parquet(OUT / "results")`` takes its columns from a finished task.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import json
import subprocess
import time
import traceback
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from . import __version__
from .errors import MarketSimError
from .files import atomic_write

__all__ = ["load_scenario", "task_rng", "plan", "Task", "run_scenario", "read_results",
           "RunSummary", "parse_overrides"]


def load_scenario(name: str):
    """``scenarios.NAME``, or any importable module path containing a dot."""
    module = name if "." in name else f"scenarios.{name}"
    try:
        mod = importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name and module.startswith(exc.name):
            raise MarketSimError(f"unknown scenario {name!r} (see `market-sim scenarios`)") from None
        raise
    for attr in ("REPLICATIONS", "grid", "run"):
        if not hasattr(mod, attr):
            raise MarketSimError(f"scenario {name!r} does not define {attr}")
    return mod


def list_scenarios() -> list[tuple[str, str]]:
    """(name, first docstring line) of every module in the ``scenarios`` package."""
    import pkgutil

    import scenarios

    out = []
    for info in sorted(pkgutil.iter_modules(scenarios.__path__), key=lambda i: i.name):
        mod = importlib.import_module(f"scenarios.{info.name}")
        out.append((info.name, (mod.__doc__ or "").strip().splitlines()[0]))
    return out


def _canonical(params: dict) -> str:
    return json.dumps(params, sort_keys=True, default=str)


def _digest(params: dict) -> int:
    return int.from_bytes(hashlib.sha256(_canonical(params).encode()).digest()[:8], "little")


def task_rng(seed: int, params: dict, rep: int) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence([int(seed), _digest(params), int(rep)]))


@dataclass(frozen=True)
class Task:
    scenario: str
    seed: int
    params: dict
    replication: int

    @property
    def id(self) -> str:
        key = _canonical([self.scenario, self.seed, self.params, self.replication])
        return hashlib.sha256(key.encode()).hexdigest()[:16]


def parse_overrides(items) -> dict:
    """``["m=1000", "dist=uniform:0:1"]`` -> dict; values parsed as JSON when they can be."""
    out = {}
    for item in items or []:
        key, sep, text = item.partition("=")
        if not sep or not key:
            raise MarketSimError(f"--set needs key=value (got {item!r})")
        try:
            out[key] = json.loads(text)
        except json.JSONDecodeError:
            out[key] = text
    return out


def plan(name: str, *, seed: int = 0, quick: bool = False, reps: int | None = None,
         overrides: dict | None = None) -> list[Task]:
    """Every task of a sweep, in grid order."""
    mod = load_scenario(name)
    grid = mod.grid(quick)
    overrides = dict(overrides or {})
    known = set().union(*(p.keys() for p in grid)) if grid else set()
    unknown = sorted(set(overrides) - known)
    if unknown:
        raise MarketSimError(f"--set: {name} has no parameter {unknown[0]!r} "
                             f"(known: {', '.join(sorted(known))})")
    for key, value in overrides.items():  # a value must have the type the grid uses
        kinds = {type(p[key]) for p in grid if key in p}
        numeric = kinds <= {int, float} and kinds
        if numeric and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise MarketSimError(f"--set {key}={value!r}: {key} must be a number")
        if kinds == {int} and isinstance(value, float):
            raise MarketSimError(f"--set {key}={value!r}: {key} must be an integer")
        if kinds == {str} and not isinstance(value, str):
            overrides[key] = json.dumps(value)  # e.g. --set dist=1 -> the string "1"
        if kinds == {bool} and not isinstance(value, bool):
            raise MarketSimError(f"--set {key}={value!r}: {key} must be true or false")
    if overrides:  # one point per distinct parameter set after the override
        seen, merged = set(), []
        for p in grid:
            q = {**p, **overrides}
            if _canonical(q) not in seen:
                seen.add(_canonical(q))
                merged.append(q)
        grid = merged
    if reps is None:
        reps = getattr(mod, "QUICK_REPLICATIONS", mod.REPLICATIONS) if quick else mod.REPLICATIONS
    if reps < 1:
        raise MarketSimError("--reps must be >= 1")
    return [Task(name, int(seed), dict(p), r) for p in grid for r in range(reps)]


def _task_columns(task: Task) -> dict:
    """The columns every row of a task carries: who it is, and its parameters."""
    return {"scenario": task.scenario, "task": task.id, "replication": task.replication,
            "seed": task.seed, **task.params}


def execute(task: Task) -> list[dict]:
    """Run one task; never raises (a failure becomes one row with its traceback)."""
    start = time.perf_counter()
    base = _task_columns(task)
    try:
        from threadpoolctl import threadpool_limits

        with threadpool_limits(limits=1):  # one core per task; workers give the parallelism
            rows = load_scenario(task.scenario).run(
                dict(task.params), task_rng(task.seed, task.params, task.replication))
        elapsed = time.perf_counter() - start
        return [{**base, **row, "status": "ok", "error": "", "elapsed": elapsed} for row in rows]
    except Exception:  # recorded, and the sweep goes on
        return [{**base, "status": "failed", "error": traceback.format_exc(),
                 "elapsed": time.perf_counter() - start}]


@functools.cache
def _code_version() -> str:
    """The package version, plus the git commit and a digest of uncommitted changes
    when the code runs from a git checkout: resuming under other code is refused."""
    here = Path(__file__).parent

    def git(*args):
        return subprocess.run(["git", *args], capture_output=True, text=True, cwd=here,
                              timeout=10)
    try:
        rev = git("rev-parse", "--short", "HEAD")
        if rev.returncode != 0:
            return __version__
        diff = git("diff", "HEAD", "--", ".", "../scenarios").stdout
        dirty = f".dirty-{hashlib.sha256(diff.encode()).hexdigest()[:8]}" if diff else ""
        return f"{__version__}+{rev.stdout.strip()}{dirty}"
    except (OSError, subprocess.SubprocessError):
        return __version__


def _write_manifest(out: Path, tasks: list[Task], *, quick: bool) -> None:
    grid = [t.params for t in tasks if t.replication == 0]
    manifest = {"scenario": tasks[0].scenario, "seed": tasks[0].seed, "quick": quick,
                "replications": max(t.replication for t in tasks) + 1, "grid": grid,
                "version": _code_version()}
    path = out / "manifest.json"
    if path.exists():
        old = json.loads(path.read_text())
        same = {k: old.get(k) for k in ("scenario", "seed", "grid")} == \
            {k: manifest[k] for k in ("scenario", "seed", "grid")}
        if not same:
            raise MarketSimError(f"{out} holds results of a different sweep (scenario, seed or "
                                 f"grid differ); choose another --out")
        if old.get("version") != manifest["version"]:
            raise MarketSimError(f"{out} holds results of code {old.get('version')}, this is "
                                 f"{manifest['version']}; resuming would mix them: choose "
                                 f"another --out")
    atomic_write(path, lambda fh: fh.write(json.dumps(manifest, indent=1, default=str).encode()))


def _task_file(out: Path, task: Task, status: str = "done") -> Path:
    return out / "results" / f"{status}-{task.id}.parquet"


def _store(out: Path, task: Task, rows: list[dict]) -> None:
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

    failed = rows[0]["status"] == "failed"
    table = pa.Table.from_pandas(pd.DataFrame(rows), preserve_index=False)
    provenance = {"version": _code_version(), "scenario": task.scenario, "seed": task.seed,
                  "params": task.params, "replication": task.replication}
    table = table.replace_schema_metadata(
        {b"market_sim": json.dumps(provenance, sort_keys=True, default=str).encode()})
    atomic_write(_task_file(out, task, "failed" if failed else "done"),
                 lambda fh: pq.write_table(table, fh))
    if not failed:
        _task_file(out, task, "failed").unlink(missing_ok=True)


@dataclass(frozen=True)
class RunSummary:
    total: int
    skipped: int
    ran: int
    failed: int
    out: Path


def _executor(kind: str, workers: int, address: str | None):
    """(executor, closer) for 'local' (process pool) or 'dask' (distributed)."""
    if kind == "local":
        pool = ProcessPoolExecutor(max_workers=workers)  # no wait: Ctrl-C must not hang
        return pool, lambda: pool.shutdown(wait=False, cancel_futures=True)
    if kind == "dask":
        try:
            from distributed import Client, LocalCluster
        except ImportError:
            raise MarketSimError("--executor dask needs dask[distributed]: "
                                 "pip install 'market-sim[cluster]'") from None
        cluster = None if address else LocalCluster(n_workers=workers, threads_per_worker=1,
                                                     processes=True, dashboard_address=None)
        client = Client(address or cluster)

        def close():
            client.close()
            if cluster is not None:
                cluster.close()
        return client.get_executor(), close
    raise MarketSimError(f"unknown executor {kind!r} (local or dask)")


def _finished(out: Path, task: Task) -> bool:
    """A done file that Parquet can read; a corrupt one is removed and re-run."""
    import pyarrow.parquet as pq

    path = _task_file(out, task)
    if not path.exists():
        return False
    try:
        pq.read_metadata(path)
        return True
    except Exception:  # a truncated or garbled file, e.g. from a copy cut short
        path.unlink()
        return False


def _worker_died(task: Task, exc: BaseException) -> list[dict]:
    return [{**_task_columns(task), "status": "failed", "elapsed": np.nan,
             "error": f"the worker process died while running this task ({exc!r}); "
                      f"killed by the OS, e.g. out of memory?"}]


def _run_pool(todo, executor, workers, address, record):
    """Run ``todo`` through an executor.  If a worker process dies the pool breaks
    and every pending task with it; those are re-run one per fresh process, so the
    task that kills its worker is recorded as failed and the others complete."""
    from concurrent.futures.process import BrokenProcessPool

    pool, close = _executor(executor, workers, address)
    broken = []
    try:
        futures = {pool.submit(execute, t): t for t in todo}
        for fut in as_completed(futures):
            try:
                record(futures[fut], fut.result())
            except BrokenProcessPool:
                broken.append(futures[fut])
    finally:
        close()
    for t in broken:
        single, close = _executor("local", 1, None)
        try:
            record(t, single.submit(execute, t).result())
        except BrokenProcessPool as exc:
            record(t, _worker_died(t, exc))
        finally:
            close()


def run_scenario(name: str, out: str | Path, *, seed: int = 0, quick: bool = False,
                 reps: int | None = None, workers: int = 1, executor: str = "local",
                 address: str | None = None, overrides: dict | None = None,
                 progress: bool = False) -> RunSummary:
    """Run the tasks of ``name`` not yet finished in ``out``; see the module docstring."""
    tasks = plan(name, seed=seed, quick=quick, reps=reps, overrides=overrides)
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise MarketSimError(f"--out {str(out)!r} exists and is not a folder")
    (out / "results").mkdir(parents=True, exist_ok=True)
    _write_manifest(out, tasks, quick=quick)
    todo = [t for t in tasks if not _finished(out, t)]
    failed = 0
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=len(tasks), initial=len(tasks) - len(todo), unit="task", desc=name)

    def record(task, rows):
        nonlocal failed
        try:
            _store(out, task, rows)
        except OSError as exc:  # e.g. a full disk: stop, keep what is stored, say so
            raise MarketSimError(f"could not write the results of a task to {out}/results "
                                 f"({exc.strerror or exc}); free space and run the same "
                                 f"command to resume") from None
        failed += rows[0]["status"] == "failed"
        if bar is not None:
            bar.update()

    try:
        if workers == 1 and executor == "local":
            for t in todo:
                record(t, execute(t))
        else:
            _run_pool(todo, executor, workers, address, record)
    finally:
        if bar is not None:
            bar.close()
    return RunSummary(total=len(tasks), skipped=len(tasks) - len(todo), ran=len(todo),
                      failed=failed, out=out)


def read_results(out: str | Path):
    """(DataFrame of every row in ``out/results``, manifest dict)."""
    import pandas as pd

    out = Path(out)
    done = sorted((out / "results").glob("done-*.parquet"))
    finished = {f.name[len("done-"):] for f in done}
    failed = [f for f in sorted((out / "results").glob("failed-*.parquet"))
              if f.name[len("failed-"):] not in finished]  # a retry that succeeded wins
    if not done and not failed:
        raise MarketSimError(f"no results in {out / 'results'}")
    manifest_path = out / "manifest.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    df = pd.concat([pd.read_parquet(f) for f in done + failed], ignore_index=True)
    return df, manifest
