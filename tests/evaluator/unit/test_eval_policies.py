"""The policy objects themselves: node order over free-GPU levels, queue keys, configuration rules."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pytest

from lwsflow.sim.evaluator.engine import RUNNING
from lwsflow.sim.evaluator.events import JobCreate, NodeCreate
from lwsflow.sim.policies import POLICIES, BasePolicy, get_policy, slack
from tests.evaluator.eval_helpers import HOUR, by_name, run


@dataclass
class _W:
    seq: int
    submitted: float
    expected: float
    deadline: float | None


def test_node_order_over_free_gpu_levels():
    levels = [8, 2, 0, 5]
    assert get_policy("default").order_levels(levels, 1) == [8, 5, 2, 0]
    assert get_policy("binpack-fragmentation").order_levels(levels, 1) == [0, 2, 5, 8]
    # CPU-only pods fill nodes without free GPUs before GPU nodes
    assert get_policy("binpack-fragmentation").order_levels([8, 2, 0], 0) == [0, 2, 8]


def test_queue_keys_fifo_and_least_slack():
    early = _W(0, 0.0, 3600.0, 7200.0)  # slack 3600 at t=0
    late_tight = _W(1, 600.0, 3000.0, 4200.0)  # slack 1200 at t=0
    no_deadline = _W(2, 0.0, 60.0, None)
    fifo, lst = get_policy("default"), get_policy("least-slack-time")
    assert sorted([late_tight, early], key=fifo.queue_key) == [early, late_tight]
    assert sorted([no_deadline, early, late_tight], key=lst.queue_key) == [late_tight, early, no_deadline]
    # the key is slack(now) + now: ordering by it is ordering by slack at ANY time
    for now in (0.0, 1000.0, 5000.0):
        assert lst.queue_key(early)[0] - lst.queue_key(late_tight)[0] == pytest.approx(
            slack(early, now) - slack(late_tight, now))
    assert slack(no_deadline, 0.0) == math.inf


def test_preemption_requires_gang_placement():
    with pytest.raises(ValueError, match="needs all-or-nothing"):
        BasePolicy("broken", queue="least-slack", preemptive=True)
    assert [p.name for p in POLICIES.values() if p.preemptive] == ["least-slack-time"]


def test_until_stops_the_clock_and_counts_unfinished_work_as_missed():
    events = [NodeCreate(0, "n", 8), JobCreate(0, "a", 2 * HOUR, 1, 8, deadline=3 * HOUR),
              JobCreate(0, "b", 2 * HOUR, 1, 8, deadline=3 * HOUR)]
    r = run(events, "default", until=3 * HOUR)
    jobs = by_name(r)
    assert r.end == 3 * HOUR
    assert jobs["a"].met_deadline
    assert jobs["b"].state == RUNNING and not jobs["b"].met_deadline
    assert jobs["b"].segments[-1] == (2 * HOUR, 3 * HOUR, "run")
