"""Suite-wide checks: the tests read upstream reference material from ``../shared`` (or
``$LWSFLOW_SHARED``); without it they would pass vacuously, so the run stops with a clear message."""

from __future__ import annotations

import pytest

from lwsflow.controller.api.paths import lws_reference_dir


def pytest_sessionstart(session: pytest.Session) -> None:
    examples = lws_reference_dir() / "examples"
    if not any(examples.glob("*.yaml")):
        raise pytest.UsageError(
            f"reference material not found at {examples}: put the team's shared/ folder beside the "
            "repository or set LWSFLOW_SHARED")
