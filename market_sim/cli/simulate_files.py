"""The output folder of ``market-sim simulate``: checked before any work, and its
manifest (what ran) written after it."""

from __future__ import annotations

import json
from pathlib import Path

from ..errors import MarketSimError
from ..files import atomic_write, check_writable_folder

__all__ = ["check_simulate_out", "write_simulate_manifest"]


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
