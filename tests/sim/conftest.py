"""Fixtures for the embedded cluster's tests: a small GPU cluster in virtual time."""

from __future__ import annotations

import pytest

from lwsflow.sim.cluster import Cluster
from tests.sim.sim_helpers import small_config


@pytest.fixture
def cluster() -> Cluster:
    return Cluster(small_config())
