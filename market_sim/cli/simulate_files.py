"""The output folder of ``market-sim simulate``: checked before any work, and its files
(the rows, the figures, the ledger) and manifest (what ran) written after it."""

from __future__ import annotations

import json
from pathlib import Path

from ..errors import MarketSimError
from ..files import atomic_write, check_writable_folder

__all__ = ["check_simulate_out", "ledger_line", "write_outputs", "write_simulate_manifest"]


def check_simulate_out(out: Path) -> None:
    """Before any work: a writable folder that is not a sweep of ``market-sim run``."""
    from ..runner import folder_kind

    check_writable_folder(out)
    if folder_kind(out) == "run":
        raise MarketSimError(
            f"{out} holds a sweep of `market-sim run` (its manifest or results); "
            f"choose another --out for a simulation"
        )


def write_simulate_manifest(out: Path, args, model, files) -> None:
    """OUT/manifest.json: what ran (parameters, seed, version, command, time)."""
    import shlex
    from datetime import UTC, datetime

    from ..runner import _code_version

    params = {k: v for k, v in vars(args).items() if k not in ("func", "argv", "command")}
    manifest = {
        "kind": "simulate",
        "command": "market-sim " + shlex.join(getattr(args, "argv", [])),
        "parameters": params,
        "seed": args.seed,
        "mechanism": model.mechanism_name,
        "strategies": list(model.strategy_names),
        "version": _code_version(),
        "time": datetime.now(UTC).isoformat(timespec="seconds"),
        "files": files,
    }
    atomic_write(
        str(out / "manifest.json"),
        lambda fh: fh.write(json.dumps(manifest, indent=1, default=str).encode()),
    )


def _write_csv(path: Path, frame) -> None:
    atomic_write(str(path), lambda fh: fh.write(frame.to_csv(index=False).encode()))


def write_outputs(out: Path, args, model, budget):
    """agents.csv, model.csv, the figure (and animation), the ledger with a budget, and the
    manifest; (the files written, the ledger frame or None)."""
    from market_sim.analysis.simulation import animate_simulation, plot_simulation

    model_df, agent_df = model.model_frame(), model.agent_frame()
    out.mkdir(parents=True, exist_ok=True)
    _write_csv(out / "agents.csv", agent_df)
    _write_csv(out / "model.csv", model_df)
    label = args.mechanism if len(args.mechanism) < 40 else model.mechanism_name
    plot_simulation(
        agent_df,
        model_df,
        out / "simulation.png",
        f"{label}, {', '.join(model.strategy_names)}, {model.n_sellers} sellers",
        data=model.platform.test_data is not None,
    )
    files = ["agents.csv", "model.csv", "simulation.png"]
    if args.animate:
        animate_simulation(agent_df, out / "simulation.gif")
        files.append("simulation.gif")
    ledger = None
    if budget is not None:
        ledger = model.ledger_frame()
        _write_csv(out / "ledger.csv", ledger)
        files.append("ledger.csv")
    write_simulate_manifest(out, args, model, files)
    return files, ledger


def ledger_line(ledger, accountant: str, budget) -> str:
    """One line: who sold, how often, and what each accountant says was spent."""
    spent = ", ".join(
        f"{c[len('spent_') :]} {ledger[c].mean():.4g}" for c in ledger if c.startswith("spent_")
    )
    return (
        f"ledger ({accountant}, budget {budget.eps:g}"
        + (f" at delta {budget.delta:g}" if budget.delta else ", pure DP")
        + f"): {int((ledger.sales > 0).sum())} of {len(ledger)} sellers sold, "
        f"{ledger.sales.mean():.3g} sales a seller; mean loss per seller: {spent}"
    )
