"""Gang placement: all pods of a group or none, no partial holds, progress when two gangs compete."""

from __future__ import annotations

import random

import pytest

from lwsflow.sim.evaluator import generators
from lwsflow.sim.evaluator.engine import PENDING, RUNNING, Engine
from lwsflow.sim.evaluator.events import Event, JobCreate, LwsCreate, NodeCreate
from tests.evaluator.eval_helpers import HOUR, by_name, run


def _contention() -> list[Event]:
    return list(generators.gang_contention(random.Random(0)))


def test_one_by_one_placement_deadlocks_two_competing_gangs():
    """The failure mode gang scheduling exists for: each gang holds one of the two nodes, forever."""
    r = run(_contention(), "default")
    jobs = by_name(r)
    assert [(j.state, len(j.nodes)) for j in jobs.values()] == [(PENDING, 1), (PENDING, 1)]
    assert r.timeline[-1][1] == 16  # all 16 GPUs held, no job running


@pytest.mark.parametrize("policy", ["gang", "binpack-fragmentation", "least-slack-time"])
def test_competing_gangs_both_finish_one_after_the_other(policy: str):
    r = run(_contention(), policy)
    a, b = sorted(r.jobs, key=lambda j: j.first_start or 0)
    assert a.finished is not None and b.finished is not None
    assert a.first_start == 0 and b.first_start == a.finished  # the second starts when the first ends
    assert set(a.ran_on) == set(b.ran_on) == {"node-0", "node-1"}


def _no_partial_holds(engine: Engine) -> None:
    for j in engine.jobs.values():
        if j.state != RUNNING:
            assert not j.nodes, f"{j.name} holds {len(j.nodes)} of {j.pods} pods while {j.state}"
        else:
            assert len(j.nodes) == j.pods
    assert engine.pool.used_gpus == sum(j.pods * j.gpus for j in engine.jobs.values() if j.state == RUNNING)


@pytest.mark.parametrize("policy", ["gang", "binpack-fragmentation", "least-slack-time"])
def test_random_gangs_never_hold_a_partial_placement_and_all_finish(policy: str):
    rng = random.Random(42)
    events: list[Event] = [NodeCreate(0, f"n{i}", 8) for i in range(6)]
    t = 0.0
    for i in range(150):
        t += rng.expovariate(1 / 600)
        pods = rng.choice([1, 2, 3, 5])
        gpus = rng.choice([2, 4, 8]) if pods > 1 else rng.choice([1, 2, 4, 8])
        duration = rng.uniform(0.2, 3) * HOUR
        events.append(JobCreate(t, f"j{i}", duration, pods, gpus, None, duration * rng.uniform(1.5, 5)))
    events.append(LwsCreate(HOUR, "serve", replicas=1, size=1, gpus=8))  # leaves 5 nodes for batch
    r = run(events, policy, on_instant=_no_partial_holds)
    jobs = [j for j in r.jobs if j.kind == "job"]
    assert all(j.finished is not None for j in jobs)  # progress: nothing stuck
    assert all(g.state == RUNNING for g in r.jobs if g.kind == "lws")
    checked = {len(j.ran_on) for j in jobs}
    assert checked == {1, 2, 3, 5}


def test_lws_groups_are_gangs_too():
    """A 2-group LWS of 2 x 8 GPUs on 3 nodes: one group runs, the other holds nothing while it waits."""
    events: list[Event] = [NodeCreate(0, f"n{i}", 8) for i in range(3)]
    events.append(LwsCreate(0, "llama", replicas=2, size=2, gpus=8))
    r = run(events, "gang", on_instant=_no_partial_holds)
    groups = by_name(r)
    assert groups["llama/0"].state == RUNNING and len(groups["llama/0"].nodes) == 2
    assert groups["llama/1"].state == PENDING and groups["llama/1"].nodes == []
