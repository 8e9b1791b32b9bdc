"""A 429's Retry-After is honoured in full (never cut to a cap) as often as the server asks, while it
fits the caller's deadline: a rollout's current stage deadline, anything else the client's window
(60 s from a request's first attempt). A wait past it is not shortened: the request gives up at
once, its error saying how long the server asked for and how long was left."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from lwsflow.controller.api.wire import Obj
from lwsflow.controller.errors import Conflict, TooManyRequests
from lwsflow.controller.kube.client import Kube
from lwsflow.controller.kube.resources import LWS
from lwsflow.controller.rollout import state
from lwsflow.controller.rollout.engine import LwsRollout, RolloutOptions
from lwsflow.controller.rollout.session import clock_for
from lwsflow.sim.apiserver import ApiFaults
from lwsflow.sim.apiserver.faults import RequestInfo
from lwsflow.sim.lws_controller import LWS as LWS_KEY
from reliability.fault_helpers import NS, FaultEnv, lws_manifest, release, served

AFTER = 45.0  # over the 20 s the client used to cap a wait at


class Throttle:
    """A server shedding load: ``burst`` consecutive attempts of each matching request are answered
    429 with ``Retry-After: AFTER``, the next one goes through."""

    def __init__(self, burst: int, match: Callable[[RequestInfo], bool]) -> None:
        self.burst, self.match = burst, match
        self.seen = self.injected = 0
        self.lock = threading.Lock()

    def __call__(self, req: RequestInfo) -> None:
        if not self.match(req):
            return
        with self.lock:
            self.seen += 1
            if self.seen % (self.burst + 1) == 0:
                return
            self.injected += 1
        raise TooManyRequests("the server has received too many requests and has asked us to try again "
                              "later", retry_after=AFTER)


def lws_get(name: str) -> Callable[[RequestInfo], bool]:
    return lambda r: r.verb == "get" and r.resource == "leaderworkersets" and r.name == name


def test_a_wait_the_server_asks_for_is_taken_in_full_within_the_deadline(tmp_path: Path) -> None:
    faults = ApiFaults()
    with served(tmp_path, faults=faults) as env:
        env.create_ready(lws_manifest("t"))
        faults.request_hook = throttle = Throttle(2, lws_get("t"))
        sleeps: list[float] = []
        # attempts=1: a server-directed wait does not use up the attempts meant for unasked retries
        kube = Kube(env.kube.api, sleep=sleeps.append, attempts=1)
        assert kube.with_deadline(lambda: 600.0).get(LWS, NS, "t")["metadata"]["name"] == "t"
        assert sleeps == [AFTER, AFTER] and throttle.injected == 2

        # no deadline given: the client's window (60 s) takes one 45 s wait, not a second one
        faults.request_hook = Throttle(2, lws_get("t"))
        sleeps.clear()
        with pytest.raises(TooManyRequests) as exc:
            kube.get(LWS, NS, "t")
        assert sleeps == [AFTER]  # never a shortened wait
        assert "asked to retry after 45s; 15s left before the deadline" in str(exc.value)

        # a deadline already passed: no wait at all, the 429 surfaces at once
        faults.request_hook = Throttle(2, lws_get("t"))
        sleeps.clear()
        with pytest.raises(TooManyRequests):
            kube.with_deadline(lambda: 0.0).get(LWS, NS, "t")
        assert sleeps == []


class ConflictCounting(Kube):
    """A client that counts the 409s its patches met (each is re-read after a short back-off), its
    views included: they are shallow copies sharing the list."""

    conflicts: list[str]

    def merge_patch(self, *args: Any, **kwargs: Any) -> Obj:
        try:
            return super().merge_patch(*args, **kwargs)
        except Conflict:
            self.conflicts.append("409")
            raise


def _throttle_while_running(env: FaultEnv, name: str) -> Throttle:
    """429 twice for every GET of ``name`` while its rollout is inside a stage (phase Running)."""
    def running(req: RequestInfo) -> bool:
        if not lws_get(name)(req):
            return False
        with env.sim.store.lock:
            obj = next((o for o in env.sim.store.iter_raw(LWS_KEY) if o["metadata"]["name"] == name), None)
        return obj is not None and state.RolloutState.from_object(obj).phase == state.RUNNING
    return Throttle(2, running)


@pytest.mark.parametrize(("deadline_s", "succeeds"), [(36000.0, True), (13000.0, False)])
def test_a_rollout_waits_for_retry_after_until_its_stage_deadline(tmp_path: Path, deadline_s: float,
                                                                  succeeds: bool) -> None:
    """Each read inside a stage needs two 45 s waits (90 s): more than the client's own 60 s window,
    within a stage deadline of 180 wall seconds (36,000 cluster seconds at 200x), not within 65 s."""
    faults = ApiFaults()
    with served(tmp_path, faults=faults) as env:
        base = env.create_ready(lws_manifest("r"))
        faults.request_hook = throttle = _throttle_while_running(env, "r")
        sleeps: list[float] = []
        kube = ConflictCounting(env.kube.api, sleep=sleeps.append)  # the waits are recorded, not taken
        kube.conflicts = []
        roll = LwsRollout(kube, NS, "r", RolloutOptions(stages="1,100%", deadline_s=deadline_s),
                          clock_for(kube), manifest=release(base))
        if succeeds:
            out = roll.run()
            assert out.result == "succeeded", out.message
            # every 429 waited out in full; the only other waits are the re-reads after a 409 (the
            # embedded LWS controller wrote the status between the rollout's read and its patch)
            assert throttle.injected >= 4 and [s for s in sleeps if s >= 1.0] == [AFTER] * throttle.injected
            assert len([s for s in sleeps if s < 1.0]) == len(kube.conflicts)
        else:
            with pytest.raises(TooManyRequests, match=r"retry after 45s; \d+s left before the deadline"):
                roll.run()
            # the first wait fitted, the second not; any other wait is a re-read after a 409
            assert [s for s in sleeps if s >= 1.0] == [AFTER] and throttle.injected == 2
            assert len([s for s in sleeps if s < 1.0]) == len(kube.conflicts)
