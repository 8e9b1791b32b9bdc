"""Atomic file writes: a reader sees the old file or the new one, never half of either.

Data goes to a synced temporary file in the target's folder (same filesystem, so the rename is
atomic) with mode 0644 (mkstemp's 0600 would hide reports and manifests from their readers), then
is renamed over the target. ``stage_file`` is the first half on its own, and ``stage_files`` the
same for many files at once, for callers that stage many files before renaming any
(``lwsflow.components.overlays.write_tree``).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

# fsync waits on the disk, not the CPU, and a journaling filesystem (ext4, xfs) commits concurrent
# fsyncs together: 968 small files sync in ~0.3 s on 16 threads against ~3 s one after another.
SYNC_THREADS = 16


def _write_temp(path: Path, data: bytes) -> str:
    """``data`` in a new 0644 temporary file next to ``path`` (not yet synced); returns its name."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.chmod(tmp, 0o644)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    return tmp


def _fsync(name: str) -> None:
    fd = os.open(name, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def stage_file(path: Path, data: bytes) -> str:
    """Write ``data`` to a synced temporary file next to ``path``; returns its name."""
    return stage_files([(path, data)])[0]


def stage_files(items: list[tuple[Path, bytes]]) -> list[str]:
    """``stage_file`` for each ``(path, data)``: all written, then all synced concurrently.

    Returns the temporary names in order. On any failure none is left behind.
    """
    staged: list[str] = []
    try:
        for path, data in items:
            staged.append(_write_temp(path, data))
        if len(staged) == 1:
            _fsync(staged[0])
        elif staged:
            with ThreadPoolExecutor(max_workers=min(SYNC_THREADS, len(staged))) as pool:
                list(pool.map(_fsync, staged))
    except BaseException:
        for tmp in staged:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
        raise
    return staged


def write_file_atomic(path: Path, data: bytes) -> None:
    """Write through a temporary file in the same folder and rename it over the target."""
    os.replace(stage_file(path, data), path)
