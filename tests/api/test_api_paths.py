"""shared_dir(): $LWSFLOW_SHARED wins, else <repo root>/../shared."""

from __future__ import annotations

from pathlib import Path

import pytest

from lwsflow.controller.api import shared_dir
from lwsflow.controller.api.paths import ENV_SHARED, lws_reference_dir, repo_root


def test_default_is_next_to_the_repository(monkeypatch: pytest.MonkeyPatch) -> None:
    # where this run reads the reference (beside the repository, or $LWSFLOW_SHARED for a clone
    # elsewhere, e.g. under mktemp) holds the CRDs
    assert (lws_reference_dir() / "crds").is_dir()
    monkeypatch.delenv(ENV_SHARED, raising=False)
    assert shared_dir() == (repo_root().parent / "shared").resolve()
    assert (repo_root() / "controller" / "api" / "paths.py").is_file()


def test_environment_override(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(ENV_SHARED, str(tmp_path))
    assert shared_dir() == tmp_path.resolve()
    assert lws_reference_dir() == tmp_path.resolve() / "reference" / "lws"
