"""The informer core (``incluster/core.py``, ``kube/informer.py``) against the embedded cluster.

Requests are counted on the server side (the embedded API's ``request_hook``), by the User-Agent of
the controller under test: what the controller sends, not what it believes it sends. A window in
which nothing may be sent is measured in cluster time (the embedded cluster's virtual clock), and
starts once the controller is quiet: every change seen and every reconcile done.
"""

from __future__ import annotations

import threading
import time

import pytest

from lwsflow.cli import kubectl_plugin
from lwsflow.controller.errors import NotFound
from lwsflow.controller.incluster.manager import Controller
from lwsflow.controller.kube.client import Kube
from lwsflow.controller.kube.informer import Informer
from lwsflow.controller.kube.resources import LWS, ROLLOUT_POLICY
from lwsflow.controller.rollout import gate
from reliability.incluster_env import RequestLog, policy, running, sync, wait_policy
from reliability.rollout_env import NS, Env, lws_manifest


def _controller(env: Env, agent: str, **kw: object) -> Controller:
    kube = Kube.connect(str(env.kubeconfig))
    kube.api.user_agent = agent
    return Controller(kube, env.clock(), namespace=NS, **kw)  # type: ignore[arg-type]


def _quiet(env: Env, ctl: Controller, timeout: float = 30.0) -> None:
    """Block until the controller has seen every object as the server has it (its own writes
    included) and has no reconcile queued or running, with no key added since the last look."""
    def cached(inf: Informer) -> bool:
        items, _ = env.kube.list(inf.res, NS)
        return all((inf.get(NS, o["metadata"]["name"]) or {}).get("metadata", {}).get("resourceVersion")
                   == o["metadata"]["resourceVersion"] for o in items)
    end, adds = time.monotonic() + timeout, -1
    while time.monotonic() < end:
        loop = ctl.loop
        if loop is not None and loop.caches.synced():
            q = loop.queue
            idle = len(q) == 0 and not q._processing and q.adds == adds
            if idle and all(cached(i) for i in loop.caches.all if i.served):
                return
            adds = q.adds
        time.sleep(0.05)
    raise AssertionError("the controller did not become quiet")


def _cluster_passes(env: Env, seconds: float) -> None:
    """Block until ``seconds`` of cluster time have passed (the embedded cluster's virtual clock)."""
    cluster = env.sim.cluster
    end = cluster.now() + seconds
    while cluster.now() < end:
        time.sleep(0.01)


def test_an_idle_controller_sends_nothing_but_its_watches(env: Env) -> None:
    """Adopted and nothing changing: the informer core sends no request at all (its watches stay
    open) over 600 cluster seconds."""
    agent = "lwsflow-controller/informer"
    seen = RequestLog(env, agent)
    for i in range(3):
        env.create_ready(lws_manifest(f"i{i}", replicas=2, partition=2))
        env.kube.create(ROLLOUT_POLICY, NS, policy(f"pi{i}", f"i{i}", [{"groups": 1}, {"groups": "100%"}]))
    with running(_controller(env, agent, resync_s=300)) as ctl:
        for i in range(3):
            wait_policy(env, f"pi{i}", lambda s: bool(s.get("stableRevision")) and s.get("phase") == "Idle")
        _quiet(env, ctl)  # the adoption's own status writes and their events
        t0 = time.monotonic()
        _cluster_passes(env, 600.0)
        idle = seen.since(t0)
    assert idle == [], idle


def test_a_gate_waits_on_cache_events_not_on_requests(env: Env) -> None:
    """A rollout held at a manual gate sends no request while it waits (the old driver sent a GET
    and opened a watch every second); the promotion reaches it through the LWS informer at once."""
    agent = "lwsflow-controller/gate"
    seen = RequestLog(env, agent)
    env.create_ready(lws_manifest("g", replicas=4, partition=4))
    env.kube.create(ROLLOUT_POLICY, NS, policy("pg", "g", [{"groups": 1}, {"groups": "100%", "pause": {}}]))
    with running(_controller(env, agent)) as ctl:
        wait_policy(env, "pg", lambda s: bool(s.get("stableRevision")))
        sync(env, "g", "vllm:2")
        wait_policy(env, "pg", lambda s: s.get("phase") == "WaitingForPromotion")
        _quiet(env, ctl)
        t0 = time.monotonic()
        _cluster_passes(env, 500.0)
        waiting = seen.since(t0, watches=True)
        assert waiting == [], waiting
        assert gate.partition(env.kube.get(LWS, NS, "g")) == 3
        assert kubectl_plugin.main(["promote", "pg", "-n", NS, "--kubeconfig", str(env.kubeconfig)]) == 0
        wait_policy(env, "pg", lambda s: s.get("phase") == "Succeeded")
    assert env.rec.partitions["g"] == [4, 3, 0, 4]


def test_informer_resumes_from_its_resource_version_and_relists_on_410(env: Env) -> None:
    """Watch streams cut every ~0.3 s; the first resumed watch answered 410 Gone: the informer relists,
    its cache ends up with every object, and a deletion made meanwhile is reported as DELETED."""
    faults = env.sim.api.faults
    faults.watch_cut_mean_s, faults.gone_on_first_resumes = 0.3, 1
    events: list[tuple[str, str]] = []
    stop = threading.Event()
    inf = Informer(env.kube, LWS, NS, lambda t, o, _old: events.append((t, o["metadata"]["name"])),
                   stop=stop, watch_s=30)
    env.kube.create(LWS, NS, lws_manifest("a", replicas=1))
    threading.Thread(target=inf.run, daemon=True).start()
    try:
        assert inf.synced.wait(10)
        for name in ("b", "c"):  # each seen by the informer (across the cut streams) before the next
            env.kube.create(LWS, NS, lws_manifest(name, replicas=1))
            end = time.monotonic() + 10
            while inf.get(NS, name) is None and time.monotonic() < end:
                time.sleep(0.02)
        env.kube.delete(LWS, NS, "a")
        end = time.monotonic() + 20
        while time.monotonic() < end and not (inf.get(NS, "a") is None and inf.get(NS, "c") is not None
                                              and inf.relists >= 2):
            time.sleep(0.05)
    finally:
        stop.set()
    assert inf.get(NS, "a") is None and {"b", "c"} <= {o["metadata"]["name"] for o in inf.items()}
    assert inf.relists >= 2  # the first list, then the relist after 410
    assert ("DELETED", "a") in events and ("ADDED", "c") in events
    assert faults.injected.get(410, 0) >= 1


def test_a_rollout_follows_its_gates_on_the_cache_without_a_watch_of_its_own(env: Env) -> None:
    """From the template change to Succeeded, the controller opens no watch: every stage's readiness
    gate is judged on the LWS informer's events (the CLI's engine opens a watch per wait instead)."""
    agent = "lwsflow-controller/follow"
    seen = RequestLog(env, agent)
    env.create_ready(lws_manifest("f", replicas=4, partition=4))
    env.kube.create(ROLLOUT_POLICY, NS, policy("pf", "f", [{"groups": 1}, {"groups": 2}, {"groups": "100%"}]))
    with running(_controller(env, agent)) as ctl:
        wait_policy(env, "pf", lambda s: bool(s.get("stableRevision")))
        _quiet(env, ctl)
        t0 = time.monotonic()
        sync(env, "f", "vllm:2")
        wait_policy(env, "pf", lambda s: s.get("phase") == "Succeeded")
        sent = seen.since(t0, watches=True)
    assert [r for r in sent if r[1] == "watch"] == []
    assert any(r[1] == "patch" and r[3] == "f" for r in sent)  # it did drive the rollout
    assert env.rec.partitions["f"] == [4, 3, 2, 0, 4]


def test_following_from_the_cache_never_yields_a_copy_older_than_our_write(env: Env) -> None:
    """The informer has listed but its watch is not running (a cache behind): a follower that wrote
    the object gets nothing until the cache holds that write, then exactly it; a deleted object
    ends the follow with NotFound, as a watch does."""
    env.kube.create(LWS, NS, lws_manifest("w", replicas=1))
    stop = threading.Event()
    inf = Informer(env.kube, LWS, NS, lambda *_a: None, stop=stop)
    inf._relist()  # the list only: no watch delivers later changes
    assert [o["metadata"]["name"] for o in inf.follow(NS, "w", wall_budget=0.2)] == ["w"]
    ours = env.kube.merge_patch(LWS, NS, "w", {"metadata": {"labels": {"touched": "yes"}}})
    assert inf.follows(ours)
    t0 = time.monotonic()
    assert list(inf.follow(NS, "w", wall_budget=0.5, after=ours)) == []  # the stale copy is skipped
    assert time.monotonic() - t0 >= 0.5
    got: list[dict] = []
    follower = threading.Thread(target=lambda: got.extend(inf.follow(NS, "w", wall_budget=5.0, after=ours)))
    follower.start()
    end = time.monotonic() + 5
    while (NS, "w") not in inf._waiting and time.monotonic() < end:  # it waits on the stale copy
        time.sleep(0.01)
    inf.store(ours)  # the cache catches up: the waiting follower is woken at once
    woken = time.monotonic() + 0.2
    while not got and time.monotonic() < woken:
        time.sleep(0.01)
    assert [o["metadata"]["labels"]["touched"] for o in got] == ["yes"]
    stop.set()  # the follow ends with the informer
    follower.join(3)
    assert not follower.is_alive()
    env.kube.delete(LWS, NS, "w")
    inf._relist()
    with pytest.raises(NotFound):
        list(inf.follow(NS, "w", wall_budget=1.0))
    assert not inf.follows({"metadata": {"resourceVersion": "opaque-v1"}})  # cannot tell older: watch


def test_an_objects_waiters_leave_no_entry_behind(env: Env) -> None:
    """A wait on an object registers a wake-up for that object only while someone waits: the last waiter
    to leave removes it, so a controller that follows many objects over its life does not keep one
    per object it ever waited on."""
    for name in ("x", "y"):
        env.kube.create(LWS, NS, lws_manifest(name, replicas=1))
    stop = threading.Event()
    inf = Informer(env.kube, LWS, NS, lambda *_a: None, stop=stop)
    inf._relist()  # the list only: nothing changes the cache under the waiters

    def never(_obj: dict) -> bool:
        return False

    long = threading.Thread(target=inf.wait_until, args=(NS, "x", never, stop), kwargs={"timeout_s": 30.0})
    long.start()
    end = time.monotonic() + 5
    while (NS, "x") not in inf._waiting and time.monotonic() < end:
        time.sleep(0.01)
    for name in ("x", "y"):  # a second waiter on x, one on y, one follower of y: each leaves
        assert inf.wait_until(NS, name, never, stop, timeout_s=0.05) is not None
    assert [o["metadata"]["name"] for o in inf.follow(NS, "y", wall_budget=0.05)] == ["y"]
    assert list(inf._waiting) == [(NS, "x")]  # only the waiter still there is registered
    stop.set()  # the long wait ends (it looks at stop at least once a second)
    long.join(5)
    assert not long.is_alive() and inf._waiting == {}
