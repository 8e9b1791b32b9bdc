"""Where ``scripts/build-refcluster`` puts the reference cluster's binaries, and checking they are there.

The folder is ``${LWSFLOW_CACHE:-~/.cache/lwsflow}/refcluster/<version>/bin``, outside the repository,
so CI's fresh clone on the same machine reuses a build. ``<version>`` is ``scripts/refcluster/VERSION``.
Kueue's manager (``refcluster up --kueue``) sits beside them as ``kueue-<version>``, its version the one
``scripts/refcluster/kueue/go.mod`` requires.
"""

from __future__ import annotations

import os
from pathlib import Path

from lwsflow.controller.api.paths import cache_dir as lwsflow_cache
from lwsflow.controller.api.paths import repo_root
from lwsflow.controller.errors import OperationFailed

PROGRAMS = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "lws-controller", "kwok")


def kueue_version() -> str:
    """The Kueue release ``scripts/refcluster/kueue/go.mod`` requires (e.g. ``v0.17.0``)."""
    path = repo_root() / "scripts" / "refcluster" / "kueue" / "go.mod"
    try:
        for line in path.read_text().splitlines():
            words = line.split()
            if words[:2] == ["require", "sigs.k8s.io/kueue"] and len(words) > 2:
                return words[2]
    except OSError:
        pass
    raise OperationFailed(f"{path}: no `require sigs.k8s.io/kueue vX` line; the reference cluster needs a "
                          "source checkout")


def kueue_program() -> str:
    return f"kueue-{kueue_version()}"


def kueue_share() -> Path:
    """Kueue's CRDs (``crd/bases``), RBAC (``rbac``) and webhook configurations (``webhook``)."""
    return cache_dir() / "share" / kueue_program()


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


def missing(*, kueue: bool = False) -> list[str]:
    """Programs (and the LWS, with ``kueue`` also Kueue, config copies) that the build has not
    produced yet."""
    programs = (*PROGRAMS, kueue_program()) if kueue else PROGRAMS
    out = [p for p in programs if not os.access(bin_dir() / p, os.X_OK)]
    if not (cache_dir() / "share" / "lws" / "rbac-role.yaml").is_file():
        out.append("share/lws")
    if kueue and not (kueue_share() / "rbac" / "role.yaml").is_file():
        out.append(f"share/{kueue_program()}")
    return out


def require(*, kueue: bool = False) -> Path:
    """The bin folder, or one clear error naming what is missing and how to build it."""
    gone = missing(kueue=kueue)
    if gone:
        raise OperationFailed(f"reference cluster not built ({', '.join(gone)} missing in {cache_dir()}); "
                              "run scripts/build-refcluster")
    return bin_dir()
