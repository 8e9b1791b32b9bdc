"""Rollout tests: pure table tests, and integration tests over HTTP (real ``kubernetes`` client)
against the embedded cluster running in virtual time (``SPEED`` virtual seconds per wall second)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # rollout_builders, shared by the modules

from reliability.rollout_env import Env, make_env


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Env]:
    e = make_env(tmp_path)
    try:
        yield e
    finally:
        e.close()
