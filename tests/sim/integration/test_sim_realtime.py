"""Wall-clock mode: the loop runs in a thread, virtual time = wall time x speed, writes from other
threads (as the HTTP API server makes them) wake it up."""

from __future__ import annotations

import threading
import time

from lwsflow.sim.cluster import DEFAULT_SPEED, Cluster
from lwsflow.sim.lws_controller import LWS
from tests.sim.sim_helpers import available, make_lws, small_config


def test_realtime_loop_follows_wall_clock_and_reacts_to_writes():
    c = Cluster(small_config(nodes=2, domains=1))
    hook_threads: list[str] = []

    class Hook:
        def on_running(self, pod: dict) -> None:
            # hooks run outside the store lock: another thread can take it meanwhile
            got: list[bool] = []

            def probe() -> None:
                ok = c.store.lock.acquire(timeout=2)
                got.append(ok)
                if ok:
                    c.store.lock.release()
            t = threading.Thread(target=probe)
            t.start()
            t.join(5)
            hook_threads.append("free" if got == [True] else "locked")

        def on_stopped(self, pod: dict) -> None:
            pass
    c.pod_hooks.append(Hook())
    c.start_realtime(speed=600)
    try:
        v0, w0 = c.now(), time.monotonic()
        c.store.create(LWS, make_lws("demo", replicas=1, size=1))  # from this thread, like the API server
        deadline = time.monotonic() + 20
        while True:
            with c.store.lock:
                if available()(c):
                    break
            assert time.monotonic() < deadline, "LWS not Available within 20 s of wall time"
            time.sleep(0.01)
        wall, virtual = time.monotonic() - w0, c.now() - v0
        assert virtual >= 165  # pull 60 + start 5 + load 100
        assert wall < virtual / 600 + 5  # about 0.3 s of wall time at speed 600
        assert hook_threads == ["free"]
    finally:
        c.stop()
    frozen = c.now()
    time.sleep(0.05)
    assert c.now() == frozen  # stopped: time no longer moves


def test_default_speed_makes_ten_minutes_about_a_second():
    assert 400 <= DEFAULT_SPEED <= 900


def test_a_skip_from_another_thread_moves_time_on_and_the_loop_carries_on_from_there():
    """A test skips virtual time (``advance``) while the loop runs: time jumps at once, what was due
    on the way has run, and the loop keeps time at its speed from the new point (it does not stall
    until wall time catches up with the skip)."""
    c = Cluster(small_config(nodes=2, domains=1))
    c.start_realtime(speed=100)
    try:
        c.store.create(LWS, make_lws("skip", replicas=1, size=1))
        t0 = c.now()
        c.advance(3600)  # far past the group's start-up
        assert c.now() >= t0 + 3600
        assert available("skip")(c)  # everything due within the hour ran during the skip
        t1, w1 = c.now(), time.monotonic()
        end = w1 + 5
        while c.now() < t1 + 10 and time.monotonic() < end:  # 10 virtual s: 0.1 wall s at x100
            time.sleep(0.01)
        assert c.now() >= t1 + 10, "the loop stalled after the skip"
    finally:
        c.stop()
