"""Where the team's shared reference material lives (``../shared`` next to the repository).

Tests and tools read the upstream CRDs and examples from there; the runtime never needs it (it
reads the packaged copies under ``controller/api/crds/``).
"""

from __future__ import annotations

import os
from pathlib import Path

ENV_SHARED = "LWSFLOW_SHARED"


def repo_root() -> Path:
    """The repository root (the folder holding ``controller/``)."""
    return Path(__file__).resolve().parents[2]


def shared_dir() -> Path:
    """The ``shared/`` folder: ``$LWSFLOW_SHARED`` when set, else ``<repo root>/../shared``."""
    env = os.environ.get(ENV_SHARED)
    return Path(env).resolve() if env else (repo_root().parent / "shared").resolve()


def lws_reference_dir() -> Path:
    """``shared/reference/lws``: upstream CRDs (``crds/``) and example manifests (``examples/``)."""
    return shared_dir() / "reference" / "lws"


def gateway_reference_dir() -> Path:
    """``shared/reference/gateway``: upstream Gateway API and Inference Extension CRDs."""
    return shared_dir() / "reference" / "gateway"
