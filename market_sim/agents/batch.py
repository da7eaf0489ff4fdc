"""``batch_run`` with Mesa's signature and output, giving seller rows on every supported Mesa.

Mesa 3.3's ``mesa.batch_run`` reads only ``agent_reporters`` (so a model that, like
:class:`~market_sim.agents.MarketModel`, reports its sellers through
``agenttype_reporters`` gets no seller rows) and stops one collection short of the last
step.  Mesa >= 3.4 reads both and reports every collected step.  This function gives the
newer behaviour on both:

* one dict per collected step and agent (``RunId``, ``iteration``, ``Step``, the run's
  parameters, the model reporters at that step, ``AgentID`` and the agent's reporters),
  or one per step when the model reports no agents;
* ``Step`` runs over the steps the DataCollector recorded: ``data_collection_period=1``
  gives all of them (0 .. rounds for ``MarketModel``), ``-1`` only the last, ``p`` every
  p-th;
* ``rng``: a seed or a list of seeds, one run per seed and parameter combination (passed
  as ``seed=`` when the model takes it, else ``rng=``, as Mesa 3.5 does); ``iterations=k``
  means ``rng=[None] * k``.  Unlike Mesa 3.5, a ``None`` entry does not override a ``seed``
  or ``rng`` given in ``parameters``, so a sweep with its seeds in ``parameters`` stays
  reproducible.

Processes (``number_processes`` > 1 or ``None`` for all cores) use the ``spawn`` start
method; rows come back in run order whatever the number of processes.
"""

from __future__ import annotations

import inspect
import itertools
import multiprocessing
from collections.abc import Iterable, Mapping
from functools import partial
from typing import Any

from ..errors import MarketSimError

__all__ = ["batch_run"]


def _combinations(parameters: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every combination of the parameters' values (a string or a non-iterable is one value)."""
    axes = []
    for name, values in parameters.items():
        if isinstance(values, str) or not isinstance(values, Iterable):
            axes.append([(name, values)])
            continue
        values = list(values)
        if not values:
            raise MarketSimError(f"batch_run: parameter {name!r} has no values")
        axes.append([(name, v) for v in values])
    return [dict(combo) for combo in itertools.product(*axes)]


def _collected_steps(model) -> list[int]:
    """The steps at which the model's DataCollector recorded (Mesa >= 3.4 keeps them;
    on Mesa 3.3 they are read off the records)."""
    dc = model.datacollector
    steps = getattr(dc, "_collection_steps", None)
    if steps is not None:
        return list(steps)
    seen = set(dc._agent_records) | set(getattr(dc, "_agenttype_records", {}))
    n = len(next(iter(dc.model_vars.values()), []))
    if seen:
        return sorted(seen)[:n] if n else sorted(seen)
    return list(range(n))


def _agent_rows(dc, step: int) -> list[dict[str, Any]]:
    rows = []
    for rec in dc._agent_records.get(step, []):
        rows.append({"AgentID": rec[1], **dict(zip(dc.agent_reporters, rec[2:], strict=False))})
    for kind, records in getattr(dc, "_agenttype_records", {}).get(step, {}).items():
        names = dc.agenttype_reporters[kind]
        for rec in records:
            rows.append({"AgentID": rec[1], **dict(zip(names, rec[2:], strict=False))})
    return rows


def _run_one(
    model_cls, run: tuple[int, int, dict[str, Any]], max_steps: int, period: int
) -> list[dict[str, Any]]:
    run_id, iteration, kwargs = run
    model = model_cls(**kwargs)
    while model.running and model.steps < max_steps:
        model.step()
    dc = model.datacollector
    steps = _collected_steps(model)
    if period == -1:
        chosen = steps[-1:]
    else:
        chosen = steps[::period]
    index = {s: k for k, s in enumerate(steps)}
    out: list[dict[str, Any]] = []
    for step in chosen:
        k = index[step]
        head = {"RunId": run_id, "iteration": iteration, "Step": step, **kwargs}
        head.update({name: values[k] for name, values in dc.model_vars.items()})
        agents = _agent_rows(dc, step)
        out.extend([{**head, **a} for a in agents] if agents else [head])
    return out


def batch_run(
    model_cls,
    parameters: Mapping[str, Any],
    number_processes: int | None = 1,
    iterations: int | None = None,
    data_collection_period: int = -1,
    max_steps: int = 1000,
    display_progress: bool = True,
    rng: Any = None,
) -> list[dict[str, Any]]:
    """Run ``model_cls`` over every combination of ``parameters`` (see the module doc);
    Mesa's signature and row format, with the agent-type rows Mesa 3.3 leaves out."""
    from tqdm.auto import tqdm

    if iterations is not None and rng is not None:
        raise MarketSimError("batch_run: give iterations or rng, not both")
    if not (
        isinstance(data_collection_period, int)
        and (data_collection_period == -1 or data_collection_period >= 1)
    ):
        raise MarketSimError(
            f"batch_run: data_collection_period must be -1 or >= 1 (got {data_collection_period!r})"
        )
    seeds = [None] * int(iterations) if iterations is not None else rng
    if isinstance(seeds, str) or not isinstance(seeds, Iterable):
        seeds = [seeds]
    takes = inspect.signature(model_cls).parameters
    seed_name = "seed" if "seed" in takes else "rng"
    runs: list[tuple[int, int, dict[str, Any]]] = []
    for i, seed in enumerate(seeds):
        for kwargs in _combinations(parameters):
            if seed is not None:
                kwargs.pop("rng" if seed_name == "seed" else "seed", None)
                kwargs[seed_name] = seed
            runs.append((len(runs), i, kwargs))
    work = partial(
        _run_one, model_cls, max_steps=int(max_steps), period=int(data_collection_period)
    )
    rows: list[dict[str, Any]] = []
    with tqdm(total=len(runs), disable=not display_progress) as bar:
        if number_processes == 1:
            for run in runs:
                rows.extend(work(run))
                bar.update()
        else:
            with multiprocessing.get_context("spawn").Pool(number_processes) as pool:
                for part in pool.imap(work, runs):
                    rows.extend(part)
                    bar.update()
    return rows
