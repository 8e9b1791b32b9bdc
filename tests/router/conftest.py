"""Fixtures for the stand-in llm-d router tests."""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest

from lwsflow.sim.store import Store
from tests.router.router_helpers import Pods


@pytest.fixture
def pods() -> Iterator[Pods]:
    p = Pods(Store(), base=random.randint(0, 60_000))
    yield p
    p.close()
