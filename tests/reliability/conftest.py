"""Fixtures for the bad-input and security campaign: a rendered overlay tree to keep unchanged and a
scratch folder. Hypothesis settings live in ``strategies.CAMPAIGN`` (derandomized: CI sees the same
examples every run)."""

from __future__ import annotations

from pathlib import Path

import pytest

from reliability.cli_harness import run_cli
from reliability.strategies import EXAMPLES


@pytest.fixture(scope="session")
def example_catalog() -> Path:
    return EXAMPLES / "catalog.yaml"


@pytest.fixture(scope="module")
def rendered_tree(tmp_path_factory: pytest.TempPathFactory, example_catalog: Path) -> Path:
    """The example catalog rendered once into ``overlays/``: refused commands must leave it as it is."""
    out = tmp_path_factory.mktemp("tree") / "overlays"
    res = run_cli(["render", example_catalog, "--out", out])
    assert res.code == 0, res.err
    return out


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where generated inputs are written (module-scoped: hypothesis reuses it across examples)."""
    return tmp_path_factory.mktemp("inputs")
