"""Fixtures for the stand-in llm-d router tests."""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest
from router_helpers import Pods

from lwsflow.sim.store import Store


@pytest.fixture
def pods() -> Iterator[Pods]:
    p = Pods(Store(), base=random.randint(0, 60_000))
    yield p
    p.close()
