"""Fixtures for the GitOps tests: the small catalog, its rendered tree, and real git repositories
(a bare remote seeded with the tree, and clones of it)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from lwsflow.components.catalog import Catalog, parse_catalog
from lwsflow.components.overlays import render_to
from tests.gitops.gitops_helpers import CATALOG, clone, git, identity, stand_in_render


@pytest.fixture
def catalog() -> Catalog:
    return parse_catalog(CATALOG)


@pytest.fixture
def tree(tmp_path: Path, catalog: Catalog) -> Path:
    out = tmp_path / "overlays"
    render_to(catalog, out, render=stand_in_render)
    return out


@pytest.fixture
def remote(tmp_path: Path, catalog: Catalog) -> Path:
    """A bare repository whose main branch holds the rendered tree."""
    seed = tmp_path / "seed"
    seed.mkdir()
    git(seed, "init", "-q", "-b", "main")
    identity(seed)
    render_to(catalog, seed / "overlays", render=stand_in_render)
    git(seed, "add", "-A")
    git(seed, "commit", "-q", "-m", "render")
    bare = tmp_path / "remote.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(seed), str(bare)], check=True, timeout=30)
    return bare


@pytest.fixture
def repo(remote: Path, tmp_path: Path) -> Path:
    return clone(remote, tmp_path / "work")
