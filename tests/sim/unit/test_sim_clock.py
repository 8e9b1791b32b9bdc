"""Virtual time: the clock jumps to due timers; store timestamps are virtual; step/advance/run_until."""

from __future__ import annotations

import pytest

from lwsflow.sim.clock import FIXED_EPOCH, VirtualClock
from lwsflow.sim.cluster import Cluster, SimTimeout
from lwsflow.sim.lws_controller import LWS
from tests.sim.sim_helpers import available, make_lws, small_config


def test_clock_runs_timers_in_due_order_and_cancels():
    clock = VirtualClock(100.0)
    fired: list[str] = []
    clock.call_later(5, lambda: fired.append("b"))
    t = clock.call_later(1, lambda: fired.append("x"))
    clock.call_at(103, lambda: fired.append("a"))
    clock.cancel(t)
    assert clock.next_due() == 103
    clock.set(110)
    for fn in clock.pop_due():
        fn()
    assert fired == ["a", "b"] and clock.next_due() is None
    clock.set(50)
    assert clock.now() == 110  # never backwards


def test_cluster_time_is_virtual_and_deterministic():
    c = Cluster(small_config(nodes=2, domains=1))
    assert c.now() == FIXED_EPOCH
    c.store.create(LWS, make_lws("demo", replicas=1, size=1))
    assert c.store.get(LWS, "default", "demo")["metadata"]["creationTimestamp"] == "2026-01-01T00:00:00Z"
    steps = 0
    while c.step():
        steps += 1
    # the StatefulSet's next sync (INFORMER_LAG_S), started at 65 s, Ready at 165 s
    assert steps == 3 and c.now() - FIXED_EPOCH == 165
    assert available()(c)
    c.advance(35)
    assert c.now() - FIXED_EPOCH == 200


def test_run_until_times_out_in_virtual_time():
    c = Cluster(small_config(nodes=1, domains=1))
    c.store.create(LWS, make_lws("demo", replicas=2, size=1))  # the second group never fits
    with pytest.raises(SimTimeout):
        c.run_until(lambda cl: bool(cl.store.get_raw(LWS, "default", "demo")["status"].get("readyReplicas", 0)
                                    == 2), 3600)
    assert c.now() - FIXED_EPOCH == 3600
