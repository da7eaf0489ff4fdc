"""Run a study's grid with reproducible seeds, resumably, into a results folder.

A study is a module (or any object) defining ``REPLICATIONS`` (optionally
``QUICK_REPLICATIONS`` and ``NAME``), ``grid(quick) -> list of params`` and
``run(params, rng) -> list of row dicts``.  ``market-sim run STUDY`` finds it as

* a built-in name (a module of ``market_sim.scenarios``, the repository's
  ``scenarios/`` folder), a name of the entry-point group
  ``market_sim.scenarios``, or one registered with ``SCENARIOS.register``;
* a dotted module ``pkg.study`` or ``module:attribute``;
* a file ``path/to/study.py`` (anywhere; imported under a private name).

A study may also define ``PARAMS`` (see ``market_sim.parameters``): what ``--set``
accepts for each parameter, checked before any task starts.

Seeds.  Task (params, r) gets the generator
``default_rng(SeedSequence([seed, digest(params), r]))``: a task's numbers do not
depend on the order, the executor or the number of workers, and any task can be
re-run alone with ``task_rng``.  ``run`` may also accept the keywords
``replication`` (the index r) and ``crn`` (detected with ``inspect``; ``**kwargs``
receives both): ``crn`` is a generator for common random numbers, seeded from
(root seed, study name, r) only (``crn_rng``), so every grid point of one
replication sees the same draws -- two arms of a comparison face the same
markets -- while replications differ.

Layout of ``OUT``::

    OUT/manifest.json              version, study and how to find it ("source"),
                                   root seed, the full grid
    OUT/results/done-<id>.parquet    the rows of one finished task (atomic write)
    OUT/results/failed-<id>.parquet  one row: status "failed" and the traceback

Each task is written as soon as it returns, so an interrupted sweep resumes
where it stopped: finished tasks are skipped, failed ones are retried, and
the sweep goes on past a task that raises.  ``done-`` files sort first, so
``pandas.read_parquet(OUT / "results")`` takes its columns from a finished task.

Execution (``market_sim.execution``, the layer every heavy analysis shares).  One
worker runs the tasks in this process.  More workers run them in a process pool
(``--executor local``; the workers write their tasks' files) or on Dask (the client
writes each result and releases it at once, so a lost worker costs only its
unfinished tasks).  The pool's start method (forkserver, preloading the runner),
the one BLAS thread per worker and the chunks (small tasks batched up to about
``CHUNK_SECONDS`` each, long ones one by one) are described there.  As with
``spawn``, a script that runs a sweep on several local workers must guard its
entry point with ``if __name__ == "__main__":``.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import json
import os
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from . import execution
from .errors import MarketSimError
from .execution import CHUNK_SECONDS
from .execution import Chunker as _Chunker  # noqa: F401 (its old name here)
from .execution import code_version as _code_version
from .files import atomic_write, check_writable_folder
from .parameters import check_value

__all__ = [
    "load_scenario",
    "find_study",
    "list_scenarios",
    "task_rng",
    "crn_rng",
    "plan",
    "Task",
    "run_scenario",
    "read_results",
    "RunSummary",
    "ParameterInfo",
    "describe_parameters",
    "folder_kind",
    "failure_reason",
    "parse_overrides",
    "mp_context",
    "CHUNK_SECONDS",
]

_PRELOAD = ("market_sim.runner",)  # what the pool's server imports besides the libraries


def _is_file_ref(ref: str) -> bool:
    return ref.endswith(".py") or "/" in ref or os.sep in ref


@dataclass(frozen=True)
class Study:
    """A loaded study: its ``name`` (the ``scenario`` column), the ``source`` that
    finds it again in any process (built-in name, module reference or absolute
    file path), and the module or object itself."""

    name: str
    source: str
    obj: Any  # the study module or object: grid, run, REPLICATIONS, ...


def find_study(ref: str) -> Study:
    """Resolve ``ref`` (see the module docstring); a MarketSimError names what is wrong."""
    from .registry import SCENARIOS, _check_scenario, load_object

    if not isinstance(ref, str) or not ref.strip():
        raise MarketSimError("expected a study name, module or file")
    ref = ref.strip()
    if _is_file_ref(ref):
        path = Path(ref).expanduser()
        if not path.is_file():
            raise MarketSimError(f"study file {ref!r} does not exist")
        source = str(path.resolve())
        obj = _check_scenario(load_object(source), ref)
        name = getattr(obj, "NAME", None)
        return Study(name if isinstance(name, str) and name else path.stem, source, obj)
    entries = {e.name: e for e in SCENARIOS.entries()}
    if ref in entries:
        target = entries[ref].target
        if isinstance(target, str):
            source = target
        else:  # registered at run time: workers find it by its module, when it has one
            source = (
                getattr(target, "__name__", None) if inspect.ismodule(target) else None
            ) or ref
        return Study(ref, source, SCENARIOS.load(ref))
    if ":" in ref or "." in ref:
        return Study(ref, ref, _check_scenario(load_object(ref), ref))
    raise SCENARIOS._unknown(ref)


def load_scenario(ref: str):
    """The study module (or object) named by ``ref``."""
    return find_study(ref).obj


def _load_source(source: str):
    """The study behind a ``Study.source``, in any process (no entry-point scan)."""
    from .registry import SCENARIOS, _check_scenario, load_object

    if _is_file_ref(source) or ":" in source or "." in source:
        return _check_scenario(load_object(source), source)
    if source in SCENARIOS.names():
        return SCENARIOS.load(source)
    return _check_scenario(load_object(source), source)  # an entry point's bare module name


def _docstring(path) -> str:
    """First line of a Python file's module docstring, read with ``ast`` (no import)."""
    import ast

    try:
        doc = ast.get_docstring(ast.parse(Path(path).read_text(encoding="utf-8")))
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return ""
    first = (doc or "").strip().split("\n\n")[0]  # the first paragraph, on one line
    return " ".join(first.split())


def _target_docstring(target: str) -> str:
    """Docstring line of ``module`` / ``module:attribute`` without importing the module
    (its parent packages are imported to locate it)."""
    import importlib.util

    try:
        spec = importlib.util.find_spec(target.partition(":")[0])
    except Exception:  # a parent package that fails to import: still list the name
        return "(cannot be found)"
    if spec is None:
        return "(cannot be found)"
    return _docstring(spec.origin) if spec.origin and spec.origin.endswith(".py") else ""


def list_scenarios() -> list[tuple[str, str, str]]:
    """(name, first docstring line, origin) of every registered study, without
    importing any study module."""
    from .registry import SCENARIOS

    rows = []
    for e in SCENARIOS.entries():
        if isinstance(e.target, str):
            doc = _target_docstring(e.target)
        else:
            lines = (getattr(e.target, "__doc__", None) or "").strip().splitlines()
            doc = lines[0] if lines else ""
        rows.append((e.name, doc, e.origin))
    return rows


def _canonical(params: object) -> str:
    return json.dumps(params, sort_keys=True, default=str)


def _digest(params) -> int:
    return int.from_bytes(hashlib.sha256(_canonical(params).encode()).digest()[:8], "little")


def task_rng(seed: int, params: dict, rep: int) -> np.random.Generator:
    """The generator of task (params, rep) of a sweep with root seed ``seed``."""
    return np.random.default_rng(np.random.SeedSequence([int(seed), _digest(params), int(rep)]))


def crn_rng(seed: int, study: str, rep: int) -> np.random.Generator:
    """Common random numbers of replication ``rep``: the same for every grid point."""
    return np.random.default_rng(
        np.random.SeedSequence([int(seed), _digest({"crn": study}), int(rep), 1])
    )


@dataclass(frozen=True)
class Task:
    scenario: str
    seed: int
    params: dict
    replication: int
    source: str = ""  # how a worker finds the study (default: the scenario name)

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


def _declared(study: Study) -> dict:
    """The study's ``PARAMS`` (see ``market_sim.parameters``), or {}."""
    declared = getattr(study.obj, "PARAMS", None)
    if declared is None:
        return {}
    if not isinstance(declared, dict):
        raise MarketSimError(f"scenario {study.name!r}: PARAMS must be a dict name -> declaration")
    return declared


@dataclass(frozen=True)
class ParameterInfo:
    """One parameter of a study: its name, its value(s) in the study's full grid (the
    default), what ``--set`` allows, and what it means (one line)."""

    name: str
    default: str
    allowed: str
    meaning: str


def _grid_values(grid: list[dict], key: str) -> str:
    """The values ``key`` takes over the grid, in words: one value, or the distinct ones."""
    seen: list = []
    for point in grid:
        if key in point and point[key] not in seen:
            seen.append(point[key])
    if len(seen) <= 4:
        return ", ".join(map(str, seen))
    return f"{seen[0]}, {seen[1]}, ..., {seen[-1]} ({len(seen)} values)"


def describe_parameters(ref: str) -> list[ParameterInfo]:
    """Every parameter of study ``ref`` that ``--set`` accepts (its grid's keys), with
    its default, allowed values and meaning (``market-sim scenarios STUDY``)."""
    from .parameters import as_declaration, meaning

    study = find_study(ref)
    declared = _declared(study)
    grid = _grid(study, False)
    keys = list(dict.fromkeys(k for point in grid for k in point))
    rows = []
    for key in keys:
        decl = as_declaration(declared[key]) if key in declared else None
        allowed = decl.allowed if decl is not None else "a value of the grid's type"
        rows.append(ParameterInfo(key, _grid_values(grid, key), allowed, meaning(key, decl)))
    return rows


def _grid(study: Study, quick: bool) -> list[dict]:
    try:
        grid = list(study.obj.grid(quick))
    except Exception as exc:
        raise MarketSimError(
            f"scenario {study.name!r}: grid({quick}) failed: {type(exc).__name__}: {exc}"
        ) from None
    if not all(isinstance(p, dict) for p in grid):
        raise MarketSimError(f"scenario {study.name!r}: grid() must return a list of dicts")
    return grid


def plan(
    name: str,
    *,
    seed: int = 0,
    quick: bool = False,
    reps: int | None = None,
    overrides: dict | None = None,
    study: Study | None = None,
) -> list[Task]:
    """Every task of a sweep, in grid order."""
    study = study or find_study(name)
    mod = study.obj
    grid = _grid(study, quick)
    overrides = dict(overrides or {})
    known = set().union(*(p.keys() for p in grid)) if grid else set()
    unknown = sorted(set(overrides) - known)
    if unknown:
        raise MarketSimError(
            f"--set: {study.name} has no parameter {unknown[0]!r} "
            f"(known: {', '.join(sorted(known))}; `market-sim scenarios {name}` says what "
            f"each means)"
        )
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
    declared = _declared(study)
    for key, value in overrides.items():  # the study's own declaration (market_sim.parameters)
        if key in declared:
            check_value(key, value, declared[key])
    if overrides:  # one point per distinct parameter set after the override
        seen, merged = set(), []
        for p in grid:
            q = {**p, **overrides}
            if _canonical(q) not in seen:
                seen.add(_canonical(q))
                merged.append(q)
        grid = merged
    if not grid:
        raise MarketSimError(f"scenario {study.name!r}: grid({quick}) is empty")
    if reps is None:
        reps = getattr(mod, "QUICK_REPLICATIONS", mod.REPLICATIONS) if quick else mod.REPLICATIONS
    if reps < 1:
        raise MarketSimError("--reps must be >= 1")
    return [
        Task(study.name, int(seed), dict(p), r, study.source) for p in grid for r in range(reps)
    ]


def _task_columns(task: Task) -> dict:
    """The columns every row of a task carries: who it is, and its parameters."""
    return {
        "scenario": task.scenario,
        "task": task.id,
        "replication": task.replication,
        "seed": task.seed,
        **task.params,
    }


@functools.lru_cache(maxsize=256)
def _run_keywords(run) -> tuple[str, ...]:
    """Which of the keywords ``replication`` and ``crn`` a study's ``run`` accepts."""
    try:
        params = inspect.signature(run).parameters.values()
    except (TypeError, ValueError):
        return ()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return ("replication", "crn")
    names = {
        p.name
        for p in params
        if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    }
    return tuple(k for k in ("replication", "crn") if k in names)


def execute(task: Task, study=None) -> list[dict]:
    """Run one task; never raises (a failure becomes one row with its traceback)."""
    start = time.perf_counter()
    base = _task_columns(task)
    try:
        if study is None:
            study = _load_source(task.source or task.scenario)
        run = study.run
        extra = {}
        for key in _run_keywords(run):
            extra[key] = (
                task.replication
                if key == "replication"
                else crn_rng(task.seed, task.scenario, task.replication)
            )
        rows = run(dict(task.params), task_rng(task.seed, task.params, task.replication), **extra)
        elapsed = time.perf_counter() - start
        return [{**base, **row, "status": "ok", "error": "", "elapsed": elapsed} for row in rows]
    except Exception:  # recorded, and the sweep goes on
        return [
            {
                **base,
                "status": "failed",
                "error": traceback.format_exc(),
                "elapsed": time.perf_counter() - start,
            }
        ]


def _write_manifest(out: Path, tasks: list[Task], *, quick: bool) -> None:
    grid = [t.params for t in tasks if t.replication == 0]
    manifest = {
        "kind": "run",
        "scenario": tasks[0].scenario,
        "source": tasks[0].source or tasks[0].scenario,
        "seed": tasks[0].seed,
        "quick": quick,
        "replications": max(t.replication for t in tasks) + 1,
        "grid": grid,
        "version": _code_version(),
    }
    path = out / "manifest.json"
    if path.exists():
        old = _read_manifest(path)
        same = {k: old.get(k) for k in ("scenario", "seed", "grid")} == {
            k: manifest[k] for k in ("scenario", "seed", "grid")
        }
        if not same:
            raise MarketSimError(
                f"{out} holds results of a different sweep (scenario, seed or "
                f"grid differ); choose another --out"
            )
        if old.get("version") != manifest["version"]:
            raise MarketSimError(
                f"{out} holds results of code {old.get('version')}, this is "
                f"{manifest['version']}; resuming would mix them: choose "
                f"another --out"
            )
    atomic_write(path, lambda fh: fh.write(json.dumps(manifest, indent=1, default=str).encode()))


def _task_file(out: Path, task: Task, status: str = "done") -> Path:
    return out / "results" / f"{status}-{task.id}.parquet"


def _store(out: Path, task: Task, rows: list[dict]) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    failed = rows[0]["status"] == "failed"
    try:
        keys = list(dict.fromkeys(k for row in rows for k in row))  # every row's columns
        table = pa.Table.from_pydict({k: [row.get(k) for row in rows] for k in keys})
    except (pa.ArrowException, TypeError, ValueError):  # mixed types: let pandas reconcile
        import pandas as pd

        table = pa.Table.from_pandas(pd.DataFrame(rows), preserve_index=False)
    provenance = {
        "version": _code_version(),
        "scenario": task.scenario,
        "seed": task.seed,
        "params": task.params,
        "replication": task.replication,
    }
    table = table.replace_schema_metadata(
        {b"market_sim": json.dumps(provenance, sort_keys=True, default=str).encode()}
    )
    atomic_write(
        _task_file(out, task, "failed" if failed else "done"), lambda fh: pq.write_table(table, fh)
    )
    if not failed:
        _task_file(out, task, "failed").unlink(missing_ok=True)


@dataclass(frozen=True)
class RunSummary:
    """What a sweep did; ``failures`` holds one (reason, count, first task) per
    distinct reason of the tasks that failed in this run, in grid order."""

    total: int
    skipped: int
    ran: int
    failed: int
    out: Path
    failures: tuple[tuple[str, int, str], ...] = ()


def folder_kind(out: str | Path) -> str | None:
    """``"run"`` for a folder written by ``market-sim run``, ``"simulate"`` for one
    written by ``market-sim simulate``, else None (by the manifest, or the files)."""
    out = Path(out)
    try:
        doc = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        doc = {}
    if isinstance(doc, dict):
        kind = doc.get("kind") or ("run" if "scenario" in doc else None)
        if kind in ("run", "simulate"):
            return kind
    results = out / "results"
    if results.is_dir() and any(
        f.name.startswith(("done-", "failed-")) for f in os.scandir(results)
    ):
        return "run"
    if (out / "agents.csv").exists() or (out / "model.csv").exists():
        return "simulate"
    return None


def failure_reason(error: str) -> str:
    """One line of a failed task's error: the traceback's last line (the exception)."""
    lines = [ln.strip() for ln in str(error).splitlines() if ln.strip()]
    reason = lines[-1] if lines else "unknown error"
    return reason if len(reason) <= 200 else reason[:199] + "…"


def _describe_task(task: Task) -> str:
    params = ", ".join(f"{k}={v}" for k, v in task.params.items())
    if len(params) > 120:
        params = params[:119] + "…"
    return f"task {task.id} ({params}; replication {task.replication})"


def _failures(out: Path, failed: list[Task]) -> tuple[tuple[str, int, str], ...]:
    """(reason, count, first task) per distinct reason, read back from the failed files."""
    import pyarrow.parquet as pq

    groups: dict[str, list] = {}
    for task in failed:
        try:
            error = pq.read_table(_task_file(out, task, "failed"), columns=["error"])
            reason = failure_reason(error.column("error")[0].as_py())
        except (OSError, KeyError, IndexError, ValueError) as exc:
            reason = f"(its failed file cannot be read: {exc})"
        groups.setdefault(reason, []).append(task)
    return tuple((r, len(ts), _describe_task(ts[0])) for r, ts in groups.items())


# ---- workers (market_sim.execution) ------------------------------------------------------
def mp_context():
    """The multiprocessing context of the local pool (see the module docstring)."""
    return execution.mp_context(_PRELOAD)


def _run_chunk(tasks: list[Task], out: str | None) -> list[tuple[Task, Any, str | None]]:
    """Run tasks in a worker.  With ``out`` each task's file is written here and a result
    is (task, "ok" or "failed", error text of a failed write or None); without it,
    (task, rows, None)."""
    results: list[tuple[Task, Any, str | None]] = []
    for task in tasks:
        rows = execute(task)
        if out is None:
            results.append((task, rows, None))
            continue
        try:
            _store(Path(out), task, rows)
            results.append((task, rows[0]["status"], None))
        except OSError as exc:
            results.append((task, None, exc.strerror or str(exc)))
    return results


def _finished(out: Path, task: Task, names: set[str] | None = None) -> bool:
    """A done file that looks like whole Parquet (the magic bytes at both ends); a
    truncated or garbled one, e.g. from a copy cut short, is removed and re-run."""
    path = _task_file(out, task)
    present = path.name in names if names is not None else path.exists()
    if not present:
        return False
    try:
        with open(path, "rb") as fh:
            head = fh.read(4)
            fh.seek(-4, os.SEEK_END)
            whole = head == b"PAR1" and fh.read(4) == b"PAR1"
    except OSError:
        whole = False
    if not whole:
        path.unlink(missing_ok=True)
    return whole


def _worker_died(task: Task, exc: BaseException) -> list[dict]:
    return [
        {
            **_task_columns(task),
            "status": "failed",
            "elapsed": np.nan,
            "error": f"the worker process died while running this task ({exc!r}); "
            f"killed by the OS, e.g. out of memory?",
        }
    ]


def _pool_pass(todo, workers, out: Path, stored):
    """Run ``todo`` on a fresh pool until done or until a worker process dies (the
    pool breaks, and every chunk in flight with it).  Returns (tasks not handed out,
    tasks of the broken chunks)."""

    def deliver(chunk, results):
        for task, status, write_error in results:
            if write_error is not None:
                raise OSError(write_error)
            stored(task, status == "failed")

    return execution.pool_pass(
        todo, workers, _run_chunk, deliver, args=(str(out),), preload=_PRELOAD
    )


def _run_local_pool(todo, workers, out: Path, record, stored):
    """The process pool: workers write their tasks' files.  A worker process that
    dies breaks the pool and the chunks in flight with it: the other tasks go on in
    a fresh pool, and the tasks of the broken chunks are re-run one per fresh
    process, so the task that kills its worker is recorded as failed and the others
    complete."""
    from concurrent.futures.process import BrokenProcessPool

    suspects = []
    while todo:
        todo, broken = _pool_pass(todo, workers, out, stored)
        suspects += broken
    for t in suspects:
        if _finished(out, t):  # written before its worker died
            stored(t, False)
            continue
        single, close = execution.local_pool(1, _PRELOAD)
        try:
            rows = single.submit(execute, t).result()
        except BrokenProcessPool as exc:
            rows = _worker_died(t, exc)
        finally:
            close()
        record(t, rows)


def _run_dask(todo, workers, address, record):
    """Dask: the client writes each result and releases it at once."""

    def deliver(chunk, results):
        for task, rows, _ in results:
            record(task, rows)

    def lost(chunk, exc):  # e.g. KilledWorker: the chunk's workers died
        for task in chunk:
            rows = _worker_died(task, exc)
            if type(exc).__name__ != "KilledWorker":
                rows[0]["error"] = f"the Dask task failed: {exc!r}"
            record(task, rows)

    execution.dask_pass(todo, workers, address, _run_chunk, deliver, lost, args=(None,))


def run_scenario(
    name: str,
    out: str | Path,
    *,
    seed: int = 0,
    quick: bool = False,
    reps: int | None = None,
    workers: int = 1,
    executor: str = "local",
    address: str | None = None,
    overrides: dict | None = None,
    progress: bool = False,
) -> RunSummary:
    """Run the tasks of study ``name`` not yet finished in ``out``; see the module docstring."""
    if executor not in ("local", "dask"):
        raise MarketSimError(f"unknown executor {executor!r} (local or dask)")
    study = find_study(name)
    tasks = plan(name, seed=seed, quick=quick, reps=reps, overrides=overrides, study=study)
    out = Path(out)
    created = _prepare_folder(out, tasks, executor=executor, address=address, quick=quick)
    names = {e.name for e in os.scandir(out / "results")}
    todo = [t for t in tasks if not _finished(out, t, names)]
    failed: list[Task] = []
    bar = _progress_bar(study.name, len(tasks), len(tasks) - len(todo)) if progress else None

    def stored(task, task_failed):
        if task_failed:
            failed.append(task)
        if bar is not None:
            bar.update()

    def record(task, rows):
        try:
            _store(out, task, rows)
        except OSError as exc:  # e.g. a full disk: stop, keep what is stored, say so
            raise _write_failed(out, exc) from None
        stored(task, rows[0]["status"] == "failed")

    try:
        if workers == 1 and executor == "local":
            from threadpoolctl import threadpool_limits

            with threadpool_limits(limits=1):  # once for the sweep, not per task
                for t in todo:
                    record(t, execute(t, study.obj))
        elif executor == "local":
            try:
                _run_local_pool(todo, workers, out, record, stored)
            except OSError as exc:
                raise _write_failed(out, exc) from None
        else:
            try:
                _run_dask(todo, workers, address, record)
            except MarketSimError:
                if created and not failed and not any((out / "results").iterdir()):
                    _remove_fresh(out)  # e.g. the scheduler went away: nothing half-written
                raise
    finally:
        if bar is not None:
            bar.close()
    return _summary(tasks, len(todo), failed, out)


def _prepare_folder(
    out: Path, tasks: list[Task], *, executor: str, address: str | None, quick: bool
) -> bool:
    """Refuse everything that can be refused before ``out`` is touched, then create its
    results folder and write the manifest; True if ``out`` did not exist before."""
    check_writable_folder(out)
    if folder_kind(out) == "simulate":
        raise MarketSimError(
            f"{out} holds the output of `market-sim simulate`; choose another --out for a sweep"
        )
    if executor == "dask" and address:
        _probe_scheduler(address)
    created = not out.exists()
    (out / "results").mkdir(parents=True, exist_ok=True)
    try:
        _write_manifest(out, tasks, quick=quick)
    except MarketSimError:
        if created:  # a fresh folder refused: leave nothing behind
            _remove_fresh(out)
        raise
    return created


def _progress_bar(desc: str, total: int, done: int):
    """A tqdm bar on stderr counting the tasks, ``done`` of them finished before."""
    from tqdm import tqdm

    return tqdm(total=total, initial=done, unit="task", desc=desc, file=sys.stderr)


def _write_failed(out: Path, exc: OSError) -> MarketSimError:
    """The error for results that could not be written (e.g. a full disk)."""
    return MarketSimError(
        f"could not write the results of a task to {out}/results "
        f"({exc.strerror or exc}); free space and run the same "
        f"command to resume"
    )


def _summary(tasks: list[Task], ran: int, failed: list[Task], out: Path) -> RunSummary:
    """The run's summary, its failed tasks in the plan's order."""
    order = {t.id: i for i, t in enumerate(tasks)}
    failed.sort(key=lambda t: order.get(t.id, 0))
    return RunSummary(
        total=len(tasks),
        skipped=len(tasks) - ran,
        ran=ran,
        failed=len(failed),
        out=out,
        failures=_failures(out, failed),
    )


def _remove_fresh(out: Path) -> None:
    """Remove a folder this run created and stored nothing in (manifest, empty results)."""
    (out / "manifest.json").unlink(missing_ok=True)
    try:
        (out / "results").rmdir()
        out.rmdir()
    except OSError:
        pass


DASK_CONNECT_TIMEOUT = execution.DASK_CONNECT_TIMEOUT  # seconds to reach a scheduler


def _probe_scheduler(address: str) -> None:
    """Refuse at once a scheduler address nobody answers on (execution.probe_scheduler)."""
    execution.probe_scheduler(address, DASK_CONNECT_TIMEOUT)


def read_results(out: str | Path):
    """(DataFrame of every row in ``out/results``, manifest dict)."""
    import pandas as pd

    out = Path(out)
    done = sorted((out / "results").glob("done-*.parquet"))
    finished = {f.name[len("done-") :] for f in done}
    failed = [
        f
        for f in sorted((out / "results").glob("failed-*.parquet"))
        if f.name[len("failed-") :] not in finished
    ]  # a retry that succeeded wins
    if not done and not failed:
        raise MarketSimError(f"no results in {out / 'results'}")
    manifest_path = out / "manifest.json"
    manifest = _read_manifest(manifest_path) if manifest_path.exists() else {}
    frames = []
    for f in done + failed:
        try:
            frames.append(pd.read_parquet(f))
        except (ValueError, OSError) as exc:  # pyarrow's ArrowInvalid is a ValueError
            raise MarketSimError(
                f"{f}: not a readable result file ({type(exc).__name__}); running the same "
                f"`market-sim run` command again re-runs that task"
            ) from None
    return pd.concat(frames, ignore_index=True), manifest


def _read_manifest(path: Path) -> dict:
    """A folder's manifest.json; a damaged one is a one-line error naming it."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise MarketSimError(f"{path}: not a valid manifest ({exc})") from None
    if not isinstance(doc, dict):
        raise MarketSimError(f"{path}: not a valid manifest (not a JSON object)")
    return doc
