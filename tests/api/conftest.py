"""Fixtures for the typed API tests: the upstream LWS/DS example manifests (tests/api/api_examples.py)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.api.api_examples import DS_SAMPLE, LWS_SAMPLE, example


@pytest.fixture
def lws() -> dict[str, Any]:
    """A valid upstream LWS (replicas 3, size 4, no rolloutStrategy)."""
    return example(LWS_SAMPLE)


@pytest.fixture
def ds() -> dict[str, Any]:
    """A valid upstream DS (3 roles with maxSurge 1, maxUnavailable 0, rolloutStrategy.type omitted)."""
    return example(DS_SAMPLE)


@pytest.fixture
def tmp_yaml(tmp_path: Path) -> Callable[[str, str | bytes], Path]:
    """Write a file under tmp_path (parents created) and return its path."""

    def write(name: str, text: str | bytes) -> Path:
        p = tmp_path / name
        p.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(text, bytes):
            p.write_bytes(text)
        else:
            p.write_text(text)
        return p

    return write
