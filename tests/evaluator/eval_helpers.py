"""Helpers for the evaluator's tests (tests/evaluator): run events under a policy, look jobs up."""

from __future__ import annotations

from collections.abc import Callable

from lwsflow.sim.evaluator.engine import Engine, Job, Result
from lwsflow.sim.evaluator.events import Event
from lwsflow.sim.evaluator.scenario import Scenario
from lwsflow.sim.policies import get_policy

MIN, HOUR = 60.0, 3600.0


def run(events: list[Event], policy: str, on_instant: Callable[[Engine], None] | None = None,
        until: float | None = None) -> Result:
    """Run ``events`` under the named policy to the end (or ``until``)."""
    return Engine(Scenario("test", list(events), until), get_policy(policy), on_instant).run()


def by_name(result: Result) -> dict[str, Job]:
    return {j.name: j for j in result.jobs}
