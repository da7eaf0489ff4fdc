"""Writing result files so that a failure never leaves a partial one."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from .errors import MarketSimError

__all__ = ["atomic_write"]


def atomic_write(path, write) -> None:
    """Write through ``write(binary_file)`` to a temporary file, then rename:
    a failure leaves no partial output."""
    target = Path(path)
    if not target.parent.exists():
        raise MarketSimError(f"{path}: folder {str(target.parent)!r} does not exist")
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    umask = os.umask(0)
    os.umask(umask)
    try:
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; give the usual mode
        with os.fdopen(fd, "wb") as fh:
            write(fh)
        os.replace(tmp, target)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
