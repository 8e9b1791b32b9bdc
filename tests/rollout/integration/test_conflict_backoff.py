"""409 Conflict on a write: jittered exponential backoff on the injected clock, bounded by the stage
deadline (issue 14; it used to be 50 immediate retries). Against the embedded cluster's fault
injection (sim/apiserver/faults.py), which answers a share of writes 409."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from lwsflow.controller.errors import Conflict
from lwsflow.controller.kube.resources import LWS
from lwsflow.controller.rollout import gate, state
from lwsflow.controller.rollout.engine import LwsRollout, RolloutOptions
from lwsflow.controller.rollout.retry import ConflictBackoff
from lwsflow.sim.apiserver import ApiFaults
from reliability.rollout_env import NS, lws_manifest, make_env, new_release


class FakeClock:
    def __init__(self) -> None:
        self.t = 1000.0

    def now(self) -> float:
        return self.t

    def sleep(self, seconds: float) -> None:
        self.t += seconds

    def wall(self, seconds: float) -> float:
        return seconds


def test_backoff_grows_with_jitter_and_stops_at_the_deadline() -> None:
    clock = FakeClock()
    b = ConflictBackoff(clock, deadline_s=60.0, base_s=0.5, cap_s=8.0, rng=random.Random(1))
    err = Conflict("409")
    with pytest.raises(Conflict) as exc:
        while True:
            b.wait(err)
    assert exc.value is err  # the last 409 surfaces, unchanged
    assert clock.t == pytest.approx(1060.0)  # exactly the deadline, in the clock's time
    for n, d in enumerate(b.slept[:-1]):  # the last wait is cut to the deadline
        nominal = min(8.0, 0.5 * 2 ** n)
        assert nominal * 0.5 <= d < nominal
    assert len(set(b.slept)) == len(b.slept)  # jittered: no two waits alike
    assert 8 < b.total < 20  # a handful of paced tries, not 50 at once
    b.reset()
    clock.t += 1
    b.wait(err)  # a new streak starts with a fresh deadline and the base delay
    assert b.slept[-1] < 0.5


def test_rollout_rides_out_frequent_conflicts(tmp_path: Path) -> None:
    """Most writes (80%) answered 409: the rollout still passes every stage exactly once."""
    faults = ApiFaults(seed=5, conflict_rate=0.0)
    env = make_env(tmp_path, faults=faults)
    try:
        base = lws_manifest("c", replicas=3)
        env.create_ready(base)
        faults.conflict_rate = 0.8
        out = LwsRollout(env.kube, NS, "c", RolloutOptions(stages="1,100%", deadline_s=900), env.clock(),
                         manifest=new_release(base)).run()
        faults.conflict_rate = 0.0
        assert out.result == "succeeded", out.message
        assert faults.injected.get(409, 0) > 0 and out.report.api_conflicts > 0
        assert env.rec.partitions["c"] == [0, 3, 2, 0]  # no stage applied twice or skipped
        final = env.kube.get(LWS, NS, "c")
        assert gate.lws_fully_rolled(final).passed
        assert state.RolloutState.from_object(final).phase == state.SUCCEEDED
    finally:
        env.close()


def test_endless_conflicts_give_up_at_the_stage_deadline(tmp_path: Path) -> None:
    """Every write answered 409: the controller backs off on the cluster clock and gives up once the
    stage deadline has passed, with far fewer tries than 50 immediate ones."""
    faults = ApiFaults(seed=9, conflict_rate=0.0)
    env = make_env(tmp_path, faults=faults)
    try:
        base = lws_manifest("w", replicas=2)
        env.create_ready(base)
        clock = env.clock()
        faults.conflict_rate = 1.0
        eng = LwsRollout(env.kube, NS, "w", RolloutOptions(stages="100%", deadline_s=120), clock,
                         manifest=new_release(base))
        t0 = clock.now()
        with pytest.raises(Conflict):
            eng.run()
        faults.conflict_rate = 0.0
        assert clock.now() - t0 >= 120 - 1  # waited out the deadline in cluster time
        assert 5 <= eng.conflicts.total <= 30
        assert 60 <= sum(eng.conflicts.slept) <= 120  # mostly spent waiting, the rest in requests
        assert state.RolloutState.from_object(env.kube.get(LWS, NS, "w")).id == ""  # nothing written
    finally:
        env.close()
