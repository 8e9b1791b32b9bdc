"""Fixtures for the catalog, sizing and renderer tests."""

from __future__ import annotations

import pytest

from lwsflow.components.catalog import Catalog, load_catalog
from tests.render.render_helpers import EXAMPLE_CATALOG


@pytest.fixture(scope="session")
def example_catalog() -> Catalog:
    return load_catalog(EXAMPLE_CATALOG)
