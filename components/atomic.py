"""Atomic file writes: a reader sees the old file or the new one, never half of either.

Data goes to a synced temporary file in the target's folder (same filesystem, so the rename is
atomic) with mode 0644 (mkstemp's 0600 would hide reports and manifests from their readers), then
is renamed over the target. ``stage_file`` is the first half on its own, for callers that stage
many files before renaming any (``lwsflow.components.overlays.write_tree``).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path


def stage_file(path: Path, data: bytes) -> str:
    """Write ``data`` to a synced temporary file next to ``path``; returns its name."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o644)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    return tmp


def write_file_atomic(path: Path, data: bytes) -> None:
    """Write through a temporary file in the same folder and rename it over the target."""
    os.replace(stage_file(path, data), path)
