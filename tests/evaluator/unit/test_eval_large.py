"""The benchmark-sized scenario (1,000 nodes x 8 GPUs, 5,000 jobs of 1 h to 1 week) runs to the end.

Only completion and sanity are asserted here, under a generous timeout; the speed figure belongs to
``bench/scheduler_bench.py``.
"""

from __future__ import annotations

import random

import pytest

from lwsflow.sim.evaluator import generators, metrics, scenario
from lwsflow.sim.evaluator.engine import Engine
from lwsflow.sim.policies import get_policy


@pytest.fixture(scope="module")
def large() -> scenario.Scenario:
    return scenario.load("large", seed=1)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("policy", ["default", "least-slack-time"])
def test_large_pool_runs_every_job_to_completion(large: scenario.Scenario, policy: str):
    r = Engine(large, get_policy(policy)).run()
    s = metrics.summarize(r)
    assert s["jobs"] == 5000 and s["finished"] == 5000 and s["unfinished"] == 0
    assert r.end > 7 * 86400  # arrivals span about a week; the week-long tail runs past it
    assert s["evictions"] >= 1  # some of the 10 node failures hit running work
    assert 0.3 < s["gpu_utilization_mean"] <= 1.0
    assert r.timeline[-1][1] == 0  # every GPU released at the end: the accounting balances


def test_same_seed_same_outcome():
    def outcome(seed: int) -> dict:
        events = list(generators.large_pool(random.Random(seed), nodes=50, jobs=300))
        s = metrics.summarize(Engine(scenario.Scenario("s", events), get_policy("least-slack-time")).run())
        return {k: v for k, v in s.items() if k != "wall_s"}

    assert outcome(5) == outcome(5) != outcome(6)
