"""Fixtures for the smoke tests: stand-in engines on 127.0.0.1:0 and a fast SmokeConfig."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from lwsflow.sim.engine import EngineHandle, start_engine
from tests.smoke.smoke_helpers import MODEL


@pytest.fixture
def engine() -> Iterator[Callable[..., EngineHandle]]:
    """Factory: ``engine(role=..., modes=..., ...)`` starts a stand-in engine stopped after the test."""
    handles: list[EngineHandle] = []

    def start(role: str = "aggregated", **kw: Any) -> EngineHandle:
        kw.setdefault("model", MODEL)
        h = start_engine(role=role, **kw)
        handles.append(h)
        return h

    yield start
    for h in handles:
        h.stop()
