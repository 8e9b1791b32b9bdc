"""Fixtures for the pipeline tests: a real local registry and a small build context."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from lwsflow.components.images import LocalRegistry


@pytest.fixture(scope="session")
def registry() -> Iterator[LocalRegistry]:
    """One ``docker-registry`` on 127.0.0.1 for the whole session (starting one takes ~0.3 s)."""
    with LocalRegistry() as reg:
        yield reg


@pytest.fixture
def build_context(tmp_path: Path) -> Path:
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    (ctx / "Containerfile").write_text("FROM scratch\nCOPY model.txt /model.txt\nLABEL org.lwsflow.test=1\n")
    (ctx / "model.txt").write_text(f"weights for {tmp_path.name}\n")  # unique content: a fresh digest
    return ctx


@pytest.fixture
def buildah_storage(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.getbasetemp() / "buildah"


EXAMPLE_CATALOG = Path(__file__).resolve().parents[2] / "examples" / "catalog.yaml"


@pytest.fixture
def example_catalog() -> Path:
    return EXAMPLE_CATALOG


@pytest.fixture
def gitops_repo(tmp_path: Path):  # -> GitopsRepo
    """A bare GitOps repo seeded with the example catalog, an engine build context and rendered overlays."""
    from lwsflow.rehearsal.local_run import init_gitops_repo

    return init_gitops_repo(tmp_path / "git", EXAMPLE_CATALOG)
