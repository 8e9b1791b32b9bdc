"""Fixtures for the scenario evaluator's tests (virtual time only: every test runs in well under a second,
except the large-pool one)."""

from __future__ import annotations

import pytest

from lwsflow.sim.evaluator import scenario


@pytest.fixture(scope="session")
def deadlines() -> scenario.Scenario:
    """The shipped reference scenario, loaded by name."""
    return scenario.load("deadlines")
