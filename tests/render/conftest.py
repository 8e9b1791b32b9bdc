"""Fixtures for the catalog, sizing and renderer tests."""

from __future__ import annotations

import pytest
from render_helpers import EXAMPLE_CATALOG

from lwsflow.components.catalog import Catalog, load_catalog


@pytest.fixture(scope="session")
def example_catalog() -> Catalog:
    return load_catalog(EXAMPLE_CATALOG)
