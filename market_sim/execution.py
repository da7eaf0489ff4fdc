"""One execution layer: seeded jobs on one core, a process pool or a Dask cluster.

A :class:`Job` is a module-level function and its (picklable) arguments under a
stable ``key``, unique within one run.  :func:`run_jobs` maps a list of jobs over

* ``executor="local"``, ``workers=1``: this process, one job after the other;
* ``executor="local"``, ``workers=W``: a pool of W processes (``mp_context``);
* ``executor="dask"``: a ``LocalCluster`` of W single-threaded workers, or the
  scheduler at ``address`` (``tcp://HOST:PORT``; its workers must import
  ``market_sim``, e.g. by ``PYTHONPATH``),

and returns the results in job order.  A job's numbers must not depend on where it
runs: its random stream comes from the root seed and its identity
(:func:`job_rng`, or seeds drawn before the jobs are made), never from a generator
shared between jobs; every worker, and this process while it runs jobs, limits
BLAS/OpenMP to one thread.  So the results are identical for every executor and
worker count.

Resume.  With ``store=DIR`` each job's result is written to ``DIR/done-<digest of key>.pkl``
(atomically, as it returns); a job whose file exists is not run again but read.
:func:`open_store` writes ``DIR/manifest.json`` (what was asked and the code version)
and refuses, in one line, a folder holding the jobs of anything else.  The files are
pickles: read a store only from a folder you wrote.

Workers.  The pool uses an explicit multiprocessing context: ``forkserver`` on POSIX
-- not ``fork``, which is unsafe in a process with threads (Dask, BLAS, progress
bars), and not the global start method, which ``import mesa`` sets to ``spawn`` --
and ``spawn`` where forkserver does not exist.  The server preloads this module, the
caller's modules and the heavy libraries already imported, so a worker starts in
milliseconds; each worker gets this process's ``sys.path`` and limits BLAS/OpenMP to
one thread once, when it starts.  A script that maps jobs on several local workers
must guard its entry point with ``if __name__ == "__main__":``.

Chunks (:class:`Chunker`).  Jobs go to workers in chunks, ``2 x workers`` chunks in
flight.  Chunks hold one job until a chunk other than the first of each worker (which
carries the worker's imports) has come back; then as many jobs as take about
``CHUNK_SECONDS`` by the mean time in the worker of the jobs counted so far, at most
twice the previous chunk and at most a ``1 / (2 workers)`` share of what remains.
Jobs far smaller than the cost of a dispatch are thus batched; long jobs go one by one.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import pickle
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from . import __version__
from .errors import MarketSimError
from .files import atomic_write, check_writable_folder

__all__ = [
    "Job",
    "Shared",
    "run_jobs",
    "job_rng",
    "open_store",
    "check_executor",
    "Chunker",
    "mp_context",
    "local_pool",
    "dask_client",
    "probe_scheduler",
    "pool_pass",
    "dask_pass",
    "code_version",
    "CHUNK_SECONDS",
    "EXECUTORS",
]

CHUNK_SECONDS = 0.05
EXECUTORS = ("local", "dask")
DASK_CONNECT_TIMEOUT = 5.0  # seconds to reach a scheduler given by --address


# ---- jobs -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Job:
    """``fn(*args)`` under the identity ``key`` (unique within a run; a file name part)."""

    key: str
    fn: Callable[..., Any]
    args: tuple = field(default=())

    def run(self) -> Any:
        return self.fn(*(a.value if isinstance(a, Shared) else a for a in self.args))


class Shared:
    """A job argument many jobs share (a mechanism, a cost law, strategies): pickled once
    here, and unpickled once per worker process, which keeps it and hands the same object
    to every later job (its caches stay warm, as in one process; unpickling, e.g. of a
    scipy distribution, is not paid per chunk).  ``Job.run`` passes ``value``."""

    def __init__(self, value: Any, token: str | None = None):
        import uuid

        self.value = value
        self.token = token or uuid.uuid4().hex
        self._payload: bytes | None = None

    def __reduce__(self):
        if self._payload is None:
            self._payload = pickle.dumps(self.value, protocol=pickle.HIGHEST_PROTOCOL)
        return (_shared, (self.token, self._payload))


_SHARED: dict[str, Shared] = {}
_SHARED_KEEP = 64  # the shared objects a worker keeps (the oldest go first)


def _shared(token: str, payload: bytes) -> Shared:
    """Unpickling a Shared: the copy this process already has, else the payload's."""
    if token not in _SHARED:
        if len(_SHARED) >= _SHARED_KEEP:
            del _SHARED[next(iter(_SHARED))]
        _SHARED[token] = Shared(pickle.loads(payload), token)
    return _SHARED[token]


def _digest(identity: object) -> int:
    text = json.dumps(identity, sort_keys=True, default=str)
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")


def job_rng(seed: int, identity: object) -> np.random.Generator:
    """The generator of the job ``identity`` (any JSON-able value) under root ``seed``:
    ``default_rng(SeedSequence([seed, digest(identity)]))``, as the runner's task_rng."""
    return np.random.default_rng(np.random.SeedSequence([int(seed), _digest(identity)]))


def check_executor(workers: int, executor: str, address: str | None) -> None:
    """One line for a bad ``workers`` / ``executor`` / ``address``."""
    if isinstance(workers, bool) or not isinstance(workers, int | np.integer) or workers < 1:
        raise MarketSimError(f"workers must be an integer >= 1 (got {workers!r})")
    if executor not in EXECUTORS:
        raise MarketSimError(f"unknown executor {executor!r} (local or dask)")
    if address is not None and executor != "dask":
        raise MarketSimError("an address needs executor='dask' (--executor dask)")


def run_jobs(
    jobs: Sequence[Job],
    *,
    workers: int = 1,
    executor: str = "local",
    address: str | None = None,
    store: str | Path | None = None,
    progress: bool | str = False,
    preload: Sequence[str] = (),
    seconds: list | None = None,
    on_done: Callable[[int], None] | None = None,
) -> list:
    """The results of ``jobs`` in their order (see the module doc).  ``store``: a folder
    made by :func:`open_store`; ``preload``: modules the pool's server imports first;
    ``seconds``: a list that receives each job's time in its worker (stored with it);
    ``on_done(k)``: called with the number of jobs finished, first before any runs."""
    check_executor(workers, executor, address)
    keys = [j.key for j in jobs]
    if len(set(keys)) != len(keys):
        raise MarketSimError("run_jobs: two jobs share a key")
    folder = None if store is None else Path(store)
    results: dict[int, tuple[Any, float]] = {}
    if folder is not None:
        results = _read_stored(folder, jobs)
    todo = [i for i in range(len(jobs)) if i not in results]
    bar = _bar(progress, len(jobs), len(results))
    if todo and executor == "dask" and address:
        probe_scheduler(address)

    def deliver(items, values):
        for i, value in zip(items, values, strict=True):
            if folder is not None:
                _write_stored(folder, jobs[i].key, value)
            results[i] = value
            if bar is not None:
                bar.update()
        if on_done is not None:
            on_done(len(results))

    if on_done is not None and todo:
        on_done(len(results))
    try:
        if not todo:
            pass
        elif executor == "local" and workers == 1:
            from threadpoolctl import threadpool_limits

            with threadpool_limits(limits=1):
                for i in todo:
                    deliver([i], _run_jobs_chunk([jobs[i]]))
        elif executor == "local":
            _on_pool(todo, jobs, workers, deliver, preload)
        else:
            _on_dask(todo, jobs, workers, address, deliver)
    finally:
        if bar is not None:
            bar.close()
    if seconds is not None:
        seconds[:] = [results[i][1] for i in range(len(jobs))]
    return [results[i][0] for i in range(len(jobs))]


def _bar(progress, total: int, initial: int):
    if not progress:
        return None
    from tqdm import tqdm

    desc = progress if isinstance(progress, str) else "jobs"
    return tqdm(total=total, initial=initial, unit="task", desc=desc, file=sys.stderr)


def _run_jobs_chunk(chunk: list[Job]) -> list[tuple[Any, float]]:
    """(result, seconds) of each job."""
    out = []
    for job in chunk:
        start = time.perf_counter()
        value = job.run()
        out.append((value, time.perf_counter() - start))
    return out


def _sendable(chunk: list[Job]) -> None:
    """A job that cannot be pickled is a one-line error naming it (e.g. a class loaded
    from a file, or a lambda): run it with workers=1."""
    for job in chunk:
        try:
            pickle.dumps(job)
        except Exception as exc:
            raise MarketSimError(
                f"task {job.key} cannot be sent to another process ({type(exc).__name__}: "
                f"{exc}); use one local worker"
            ) from None


def _on_pool(todo, jobs, workers, deliver, preload) -> None:
    """The process pool; a worker process that dies ends the run in one line (the jobs
    finished so far are stored)."""
    from concurrent.futures.process import BrokenProcessPool

    _sendable([jobs[i] for i in todo[:1]])

    def chunk_fn(items):
        return [jobs[i] for i in items]

    try:
        _, broken = pool_pass(
            todo,
            min(workers, len(todo)),
            _run_jobs_chunk,
            deliver,
            prepare=chunk_fn,
            preload=preload,
        )
    except BrokenProcessPool:  # pragma: no cover - the pool breaks at submission
        broken = todo
    if broken:
        raise MarketSimError(
            f"a worker process died ({len(broken)} tasks lost; killed by the OS, e.g. out of "
            "memory?); the finished tasks are kept: run the same command to resume"
        )


def _on_dask(todo, jobs, workers, address, deliver) -> None:
    def lost(items, exc):
        raise MarketSimError(
            f"a Dask task failed ({type(exc).__name__}: {' '.join(str(exc).split())[:200]}); "
            "the finished tasks are kept: run the same command to resume"
        )

    _sendable([jobs[i] for i in todo[:1]])
    dask_pass(
        todo,
        workers,
        address,
        _run_jobs_chunk,
        deliver,
        lost,
        prepare=lambda items: [jobs[i] for i in items],
        reraise=(MarketSimError,),
    )


# ---- the store ----------------------------------------------------------------------------
def open_store(folder: str | Path, kind: str, request: dict) -> Path:
    """Create (or reopen) the store ``folder`` for the jobs of ``kind`` asked by
    ``request`` (JSON-able: whatever decides the jobs and their results).  A folder
    holding another request, or the results of other code, is refused in one line."""
    folder = Path(folder)
    check_writable_folder(folder)
    manifest = {
        "kind": kind,
        "request": json.loads(json.dumps(request, sort_keys=True, default=str)),
        "version": code_version(),
    }
    path = folder / "manifest.json"
    if path.exists():
        try:
            old = json.loads(path.read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError) as exc:
            raise MarketSimError(f"{path}: not a valid manifest ({exc})") from None
        if not isinstance(old, dict) or old.get("kind") != kind:
            raise MarketSimError(
                f"{folder} holds the tasks of something else; choose another --out"
            )
        if old.get("request") != manifest["request"]:
            raise MarketSimError(
                f"{folder} holds the tasks of a different {kind} command; choose another --out"
            )
        if old.get("version") != manifest["version"]:
            raise MarketSimError(
                f"{folder} holds results of code {old.get('version')}, this is "
                f"{manifest['version']}; resuming would mix them: choose another --out"
            )
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    data = json.dumps(manifest, indent=1).encode()
    atomic_write(path, lambda fh: fh.write(data))
    return folder


def _job_file(folder: Path, key: str) -> Path:
    """``done-<digest of the key>.pkl`` (any key makes a valid file name)."""
    return folder / f"done-{hashlib.sha256(key.encode()).hexdigest()[:20]}.pkl"


def _write_stored(folder: Path, key: str, value) -> None:
    try:
        data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
        atomic_write(_job_file(folder, key), lambda fh: fh.write(data))
    except OSError as exc:
        raise MarketSimError(
            f"could not write a finished task to {folder} ({exc.strerror or exc}); "
            "free space and run the same command to resume"
        ) from None


def _read_stored(folder: Path, jobs: Sequence[Job]) -> dict[int, tuple[Any, float]]:
    """{job index: its stored result}; an unreadable file is removed (its job re-runs)."""
    names = {e.name for e in os.scandir(folder)} if folder.is_dir() else set()
    out: dict[int, Any] = {}
    for i, job in enumerate(jobs):
        path = _job_file(folder, job.key)
        if path.name not in names:
            continue
        try:
            out[i] = pickle.loads(path.read_bytes())
        except Exception:  # truncated or garbled: run the job again
            path.unlink(missing_ok=True)
    return out


@functools.cache
def code_version() -> str:
    """The package version, plus the git commit and a digest of uncommitted changes
    when the code runs from a git checkout: resuming under other code is refused."""
    here = Path(__file__).parent

    def git(*args):
        return subprocess.run(["git", *args], capture_output=True, text=True, cwd=here, timeout=10)

    try:
        rev = git("rev-parse", "--short", "HEAD")
        if rev.returncode != 0:
            return __version__
        diff = git("diff", "HEAD", "--", ".", "../scenarios").stdout
        dirty = f".dirty-{hashlib.sha256(diff.encode()).hexdigest()[:8]}" if diff else ""
        return f"{__version__}+{rev.stdout.strip()}{dirty}"
    except (OSError, subprocess.SubprocessError):
        return __version__


# ---- chunks ---------------------------------------------------------------------------------
class Chunker:
    """Chunk sizes by the rule of the module docstring."""

    def __init__(self, todo: list, workers: int):
        self.todo, self.workers, self.pos = todo, workers, 0
        self.started = 0  # chunks handed out
        self.returned = 0  # chunks back
        self.spent = 0.0  # seconds of the finished items that are counted
        self.finished = 0
        self.last = 1  # size of the previous chunk

    def done(self, seconds: float, n: int) -> None:
        """A chunk of ``n`` items took ``seconds`` in its worker.  The first chunk of
        each worker is not counted: it carries the worker's imports."""
        self.returned += 1
        if self.returned > self.workers:
            self.spent += seconds
            self.finished += n

    def next(self) -> list:
        left = len(self.todo) - self.pos
        if left <= 0:
            return []
        if self.started < self.workers or self.finished == 0:
            size = 1
        else:
            mean = max(self.spent / self.finished, 1e-6)
            size = min(int(CHUNK_SECONDS / mean), 2 * self.last, -(-left // (2 * self.workers)))
            size = max(1, size)
        self.last = size
        chunk = self.todo[self.pos : self.pos + size]
        self.pos += len(chunk)
        self.started += 1
        return chunk


# ---- workers --------------------------------------------------------------------------------
_HEAVY = (
    "numpy",
    "scipy.stats",
    "scipy.optimize",
    "pandas",
    "pyarrow.parquet",
    "sklearn",
    "mesa",
    "matplotlib",
)
_ONE_THREAD = (
    "OMP_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "MKL_NUM_THREADS",
    "BLIS_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
    "NUMEXPR_NUM_THREADS",
)
_worker_ready = False
PARENT_POLL_SECONDS = 0.5  # how soon a worker notices that its command is gone


def process_alive(pid: int) -> bool:
    """Whether process ``pid`` still runs (a zombie, dead but not yet reaped, does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, under another user
        return True
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:  # Linux: "pid (name) STATE ..."
            return f.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except (OSError, IndexError):
        return True


def exit_with(pid: int, every: float = PARENT_POLL_SECONDS) -> None:
    """End this process (``os._exit``) as soon as process ``pid`` is gone: a worker must
    not outlive the command that started it, however that command ended (SIGKILL
    included, which leaves it no chance to stop its pool).  A daemon thread polls."""
    import threading

    def watch():
        while process_alive(pid):
            time.sleep(every)
        os._exit(1)

    threading.Thread(target=watch, name="market_sim-exit-with-parent", daemon=True).start()


def worker_init(path: list[str] | None = None, parent: int | None = None) -> None:
    """Once per worker process: this process's sys.path, one BLAS/OpenMP thread
    (libraries loaded now are limited by threadpoolctl, later ones by the environment),
    and an end when the ``parent`` process (the command) is gone (:func:`exit_with`)."""
    global _worker_ready
    if parent is not None:
        exit_with(parent)
    if path:
        sys.path[:] = list(dict.fromkeys(path + sys.path))
    for var in _ONE_THREAD:
        os.environ[var] = "1"
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=1)
    _worker_ready = True


def in_worker() -> bool:
    """Whether this process is one of the runner's pool workers (``worker_init`` ran): a
    task that could start its own pool (``bne``'s beliefs stage) runs in-process there."""
    return _worker_ready


def _timed(fn, path, chunk, args):
    """``fn(chunk, *args)`` in a worker: (its result, seconds spent here)."""
    if not _worker_ready:  # Dask workers have no initializer
        worker_init(path)
    start = time.perf_counter()
    return fn(chunk, *args), time.perf_counter() - start


def mp_context(preload: Sequence[str] = ()):
    """The multiprocessing context of the local pool (see the module docstring)."""
    import multiprocessing as mp

    if "forkserver" in mp.get_all_start_methods():
        ctx = mp.get_context("forkserver")
        modules = ["market_sim.execution", *preload]
        modules += [m for m in _HEAVY if m in sys.modules and m != "mesa"]
        if preload:  # an analysis: what its jobs need is imported here already
            modules += [m for m in sys.modules if _preloadable(m)]
        ctx.set_forkserver_preload(list(dict.fromkeys(modules)))
        return ctx
    return mp.get_context("spawn")


def _preloadable(module: str) -> bool:
    """A market_sim module the pool's server may import first (not the command line nor
    the studies: they are not what jobs run)."""
    skip = ("market_sim.cli", "market_sim.scenarios", "market_sim.analysis", "market_sim.viz")
    return module.startswith("market_sim.") and not module.startswith(skip)


def local_pool(workers: int, preload: Sequence[str] = ()):
    """(a process pool of ``workers``, close(finished=False)): close stops the workers
    at once unless the run finished."""
    from concurrent.futures import ProcessPoolExecutor

    pool = ProcessPoolExecutor(
        max_workers=workers,
        mp_context=mp_context(preload),
        initializer=worker_init,
        initargs=(list(sys.path), os.getpid()),
    )

    def close(finished: bool = False):  # after Ctrl-C or an error: do not wait
        if not finished:
            # Stop the workers now: a worker still busy (or hit by the same Ctrl-C) could
            # keep the pool's manager thread, which the interpreter joins at exit, alive,
            # and the command would hang after saying it was interrupted.  Finished tasks
            # are already stored.  (terminate_workers is public from Python 3.14.)
            stop = getattr(pool, "terminate_workers", None)
            if stop is not None:
                stop()
            else:
                for proc in list((getattr(pool, "_processes", None) or {}).values()):
                    proc.terminate()
        pool.shutdown(wait=finished, cancel_futures=not finished)

    return pool, close


def pool_pass(todo, workers, chunk_fn, deliver, *, args=(), prepare=None, preload=()):
    """Run ``chunk_fn(prepare(chunk), *args)`` over chunks of ``todo`` on a fresh pool
    until done or until a worker process dies (the pool breaks, and every chunk in
    flight with it); ``deliver(chunk, result)`` per chunk back.  Returns (items not
    handed out, items of the broken chunks)."""
    from concurrent.futures import FIRST_COMPLETED, wait
    from concurrent.futures.process import BrokenProcessPool

    pool, close = local_pool(workers, preload)
    chunks, broken = Chunker(todo, workers), []
    inflight: dict = {}
    finished = False
    try:

        def submit():
            while len(inflight) < 2 * workers:
                chunk = chunks.next()
                if not chunk:
                    return
                work = prepare(chunk) if prepare else chunk
                inflight[pool.submit(_timed, chunk_fn, None, work, args)] = chunk

        submit()
        while inflight:
            done, _ = wait(inflight, return_when=FIRST_COMPLETED)
            for fut in done:
                chunk = inflight.pop(fut)
                try:
                    result, seconds = fut.result()
                except BrokenProcessPool:
                    broken += chunk
                    continue
                chunks.done(seconds, len(chunk))
                deliver(chunk, result)
            if not broken:
                submit()
        finished = True
    finally:
        close(finished)
    return chunks.todo[chunks.pos :], broken


def dask_client(workers: int, address: str | None):
    """(a Dask client, close()): of the scheduler at ``address``, else of a new
    LocalCluster of ``workers`` single-threaded processes without a dashboard."""
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise MarketSimError(
            "--executor dask needs dask[distributed]: pip install 'market-sim[cluster]'"
        ) from None
    cluster = (
        None
        if address
        else LocalCluster(
            n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None
        )
    )
    try:
        client = Client(address, timeout=2 * DASK_CONNECT_TIMEOUT) if address else Client(cluster)
    except Exception as exc:  # refused, timed out, or not a Dask scheduler at all
        if cluster is not None:
            cluster.close()
        text = " ".join(str(exc).split())[:200]
        raise MarketSimError(
            f"cannot connect to the Dask scheduler at {address or 'the local cluster'}: "
            f"{type(exc).__name__}: {text}"
        ) from None

    def close():
        client.close()
        if cluster is not None:
            cluster.close()

    return client, close


def dask_pass(todo, workers, address, chunk_fn, deliver, lost, *, args=(), prepare=None,
              reraise=()):  # fmt: skip
    """Run ``chunk_fn(prepare(chunk), *args)`` over chunks of ``todo`` on Dask; the
    client gets each result, ``deliver(chunk, result)``, and releases it at once (a
    lost worker costs only its unfinished chunks).  A chunk that fails (e.g. its
    workers died: KilledWorker) goes to ``lost(chunk, exception)``, except the
    exceptions of ``reraise``, raised as they are."""
    from distributed import wait

    client, close = dask_client(workers, address)
    path = None if address else list(sys.path)  # our LocalCluster: import what we import
    n = max(workers, len(client.scheduler_info().get("workers", {})) or workers)
    chunks = Chunker(todo, n)
    inflight: dict = {}
    try:

        def submit():
            while len(inflight) < 2 * n:
                chunk = chunks.next()
                if not chunk:
                    return
                work = prepare(chunk) if prepare else chunk
                fut = client.submit(_timed, chunk_fn, path, work, args, pure=False)
                inflight[fut] = chunk

        submit()
        while inflight:
            done = wait(list(inflight), return_when="FIRST_COMPLETED").done
            for fut in done:
                chunk = inflight.pop(fut)
                try:
                    result, seconds = fut.result()
                except reraise:
                    raise
                except Exception as exc:
                    fut.release()
                    lost(chunk, exc)
                    chunks.done(0.0, len(chunk))
                    continue
                fut.release()  # free the result on the cluster
                del fut
                chunks.done(seconds, len(chunk))
                deliver(chunk, result)
            submit()
    finally:
        close()


def probe_scheduler(address: str, timeout: float | None = None) -> None:
    """Refuse at once a tcp:// scheduler address nobody answers on (refused, unreachable,
    or no handshake within ``timeout`` s, default DASK_CONNECT_TIMEOUT: a Dask scheduler
    speaks first, and Dask's own client would wait for it forever); other protocols
    are left to Dask."""
    import socket
    from urllib.parse import urlsplit

    timeout = DASK_CONNECT_TIMEOUT if timeout is None else timeout
    text = address if "://" in address else f"tcp://{address}"
    parts = urlsplit(text)
    if parts.scheme != "tcp":
        return
    try:
        host, port = parts.hostname, parts.port
    except ValueError:
        host = port = None
    if not host or port is None:
        raise MarketSimError(f"--address {address!r}: expected tcp://HOST:PORT")
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            try:
                greeting = sock.recv(1)
            except TimeoutError:
                raise MarketSimError(
                    f"cannot connect to the Dask scheduler at {address}: something answers "
                    f"there but sends no Dask handshake within {timeout:g} s"
                ) from None
    except OSError as exc:
        reason = "timed out" if isinstance(exc, TimeoutError) else (exc.strerror or str(exc))
        raise MarketSimError(f"cannot reach the Dask scheduler at {address}: {reason}") from None
    if not greeting:
        raise MarketSimError(
            f"cannot connect to the Dask scheduler at {address}: the connection was closed "
            f"without a Dask handshake"
        )
