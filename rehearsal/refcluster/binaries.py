"""Where ``scripts/build-refcluster`` puts the reference cluster's binaries, and checking they are there.

The folder is ``${LWSFLOW_CACHE:-~/.cache/lwsflow}/refcluster/<version>/bin``, outside the repository,
so CI's fresh clone on the same machine reuses a build. ``<version>`` is ``scripts/refcluster/VERSION``.
"""

from __future__ import annotations

import os
from pathlib import Path

from lwsflow.controller.api.paths import cache_dir as lwsflow_cache
from lwsflow.controller.api.paths import repo_root
from lwsflow.controller.errors import OperationFailed

PROGRAMS = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "lws-controller", "kwok")


def version() -> str:
    path = repo_root() / "scripts" / "refcluster" / "VERSION"
    try:
        return path.read_text().strip()
    except OSError:
        raise OperationFailed(f"{path}: missing; the reference cluster needs a source checkout") from None


def cache_dir() -> Path:
    """``<cache>/refcluster/<version>``: ``bin/`` plus ``share/lws`` (the LWS RBAC and webhook configs)."""
    return lwsflow_cache() / "refcluster" / version()


def bin_dir() -> Path:
    return cache_dir() / "bin"


def missing() -> list[str]:
    """Programs (and the LWS config copy) that the build has not produced yet."""
    out = [p for p in PROGRAMS if not os.access(bin_dir() / p, os.X_OK)]
    if not (cache_dir() / "share" / "lws" / "rbac-role.yaml").is_file():
        out.append("share/lws")
    return out


def require() -> Path:
    """The bin folder, or one clear error naming what is missing and how to build it."""
    gone = missing()
    if gone:
        raise OperationFailed(f"reference cluster not built ({', '.join(gone)} missing in {cache_dir()}); "
                              "run scripts/build-refcluster")
    return bin_dir()
