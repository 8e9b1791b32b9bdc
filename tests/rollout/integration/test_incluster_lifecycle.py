"""The whole life of a policy (docs/controller.md "Lifecycle"): deleted mid-rollout, edited
mid-rollout, two policies naming one target, orphaned and invalid policies. Writes are counted on
the server side (the embedded API's ``request_hook``)."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from lwsflow.controller.clock import Clock
from lwsflow.controller.incluster.manager import Controller
from lwsflow.controller.incluster.metrics import Metrics
from lwsflow.controller.kube.client import Kube
from lwsflow.controller.kube.resources import EVENT, LWS, ROLLOUT_POLICY
from lwsflow.controller.rollout import gate, state
from lwsflow.dashboard import serve
from lwsflow.sim.apiserver.faults import RequestInfo
from lwsflow.sim.kubelet import LOAD_SECONDS
from lwsflow.sim.lws_controller import LWS as LWS_KEY
from reliability.incluster_env import policy, running, sync, wait_passes, wait_policy
from reliability.rollout_env import NS, Env, lws_manifest, make_env
from reliability.skip_clock import SkipClock

AGENT = "lwsflow-controller/lifecycle"
WRITES = {"create", "patch", "update", "delete"}


class Writes:
    """The controller's writes as the server saw them: (time, resource, name)."""

    def __init__(self, env: Env) -> None:
        self.log: list[tuple[float, str, str]] = []
        self.lock = threading.Lock()
        env.sim.api.faults.request_hook = self.hook

    def hook(self, req: RequestInfo) -> None:
        if req.user_agent == AGENT and req.verb in WRITES:
            with self.lock:
                self.log.append((time.monotonic(), req.resource, req.name))

    def to(self, resource: str, name: str, since: float = 0.0) -> int:
        with self.lock:
            return sum(1 for t, r, n in self.log if r == resource and n == name and t >= since)


def _controller(env: Env, clock: Clock | None = None, **kw: object) -> Controller:
    kube = Kube.connect(str(env.kubeconfig))
    kube.api.user_agent = AGENT
    return Controller(kube, clock or env.clock(), namespace=NS, **kw)  # type: ignore[arg-type]


def _until(cond: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    end = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < end, f"not reached in {timeout}s: {what}"
        time.sleep(0.02)


def _skip(env: Env, clock: Clock, seconds: float) -> None:
    """Skip ``seconds`` of cluster time at once; return once the controller's clock has seen it."""
    target = env.cluster.now() + seconds
    env.cluster.advance(seconds)
    _until(lambda: clock.now() >= target, "the controller's clock caught up with the skip")


def test_deleting_a_policy_mid_rollout_stops_it_and_holds_the_target(env: Env) -> None:
    """The driver stops (its writes fenced), the LWS stays where it is (partition and the rollout's
    annotations untouched), and the policy's metric series goes with it."""
    writes = Writes(env)
    env.create_ready(lws_manifest("d", replicas=4, partition=4))
    env.kube.create(ROLLOUT_POLICY, NS, policy("pd", "d", [{"groups": 1, "bake": "1m"}, {"groups": "100%"}],
                                               progressDeadline="60m"))
    metrics = Metrics()
    clock = env.clock()
    with running(_controller(env, clock, metrics=metrics)):
        wait_policy(env, "pd", lambda s: bool(s.get("stableRevision")))
        # the new group loads for 30 virtual minutes (9 s here): stage 1 cannot pass before the deletion
        sync(env, "d", "vllm:2", **{LOAD_SECONDS: "1800"})
        wait_policy(env, "pd", lambda s: s.get("phase") == "Progressing" and s.get("currentStage") == 1)
        assert 'policy="pd"' in metrics.render().decode()
        env.wait(lambda o: gate.partition(o) == 3, name="d")
        env.kube.delete(ROLLOUT_POLICY, NS, "pd")
        _until(lambda: 'policy="pd"' not in metrics.render().decode(), "the deleted policy's series gone")
        held = env.kube.get(LWS, NS, "d")
        t0 = time.monotonic()
        # past the load and the 1m bake at once: a live driver, woken by the group turning Ready, would
        # move on (partition 0) within the bake's cluster minute, which runs once more after the skip
        _skip(env, clock, 1800 + 60)
        end = clock.now() + 120
        _until(lambda: clock.now() >= end, "two more cluster minutes")
        after = env.kube.get(LWS, NS, "d")
        assert writes.to("leaderworkersets", "d", since=t0) == 0
        assert 'policy="pd"' not in metrics.render().decode()
    assert gate.partition(after) == 3
    assert gate.counters(after)["readyReplicas"] == 4  # the skip did bring the group up: a gate would pass
    # every version since: only the embedded cluster's status writes (the skip's), the rest as it was held
    held_rv = int(held["metadata"]["resourceVersion"])
    since = [r.object for r in env.rec.store.entries(LWS_KEY, "d") if r.rv > held_rv]
    assert since and all(_but_status(o) == _but_status(held) for o in since)
    st = state.RolloutState.from_object(after)
    assert st.active and st.passed == 0  # held where it was: stage 1 in progress, nothing rolled back


def _but_status(obj: dict) -> dict:
    meta = obj["metadata"]
    return {"spec": obj["spec"], "generation": meta.get("generation"), "labels": meta.get("labels"),
            "annotations": meta.get("annotations")}


def test_a_spec_edited_mid_rollout_applies_from_the_next_rollout(env: Env) -> None:
    """A gate added while a rollout runs does not hold that rollout (it keeps the spec it started
    with; SpecApplied False says so); the next rollout waits at the new gate."""
    env.create_ready(lws_manifest("e", replicas=4, partition=4))
    env.kube.create(ROLLOUT_POLICY, NS, policy("pe", "e", [{"groups": 1, "bake": "10m"}, {"groups": "100%"}],
                                               progressDeadline="60m"))  # a skipped bake never runs it out
    with running(_controller(env, SkipClock(env.cluster, env.sim.speed))):
        wait_policy(env, "pe", lambda s: bool(s.get("stableRevision")))
        sync(env, "e", "vllm:2")
        first = wait_policy(env, "pe", lambda s: s.get("phase") == "Progressing")
        gen = first["metadata"]["generation"]
        env.kube.merge_patch(ROLLOUT_POLICY, NS, "pe", {"spec": {"stages": [
            {"groups": 1, "bake": "10m"}, {"groups": "100%", "pause": {}}]}})
        p = wait_policy(env, "pe", lambda s: any(c["type"] == "SpecApplied"
                                                 for c in s.get("conditions") or []))
        cond = next(c for c in p["status"]["conditions"] if c["type"] == "SpecApplied")
        assert cond["status"] == "False" and cond["reason"] == "RolloutInProgress"
        assert p["status"]["observedGeneration"] == gen
        _skip_bake(env, "e", 10 * 60)
        done = wait_policy(env, "pe", lambda s: s.get("phase") == "Succeeded" and not any(  # no gate held it
            c["type"] == "SpecApplied" for c in s.get("conditions") or []), timeout=90)
        assert done["status"]["observedGeneration"] == gen + 1
        sync(env, "e", "vllm:3")
        env.rec.restart("e", "vllm:3")
        _skip_bake(env, "e", 10 * 60)
        wait_policy(env, "pe", lambda s: s.get("phase") == "WaitingForPromotion", timeout=60)


def _skip_bake(env: Env, name: str, bake_s: float) -> None:
    """Once stage 1's group is Ready on the new template (its gate passes), skip its bake's cluster time.
    Skipped before the driver saw the gate, the bake only starts later: slower, never wrong."""
    env.wait(lambda o: gate.counters(o)["updatedNonSurge"] >= 1 and gate.status_current(o)
             and gate.counters(o)["readyReplicas"] == gate.counters(o)["specReplicas"], name=name)
    env.cluster.advance(bake_s)


def test_a_second_policy_for_an_owned_target_is_told_who_owns_it(env: Env) -> None:
    """The oldest policy owns the target; the second gets TargetOwned naming it, written once, and
    acts on nothing; once the owner is deleted, the second takes the target over."""
    writes = Writes(env)
    env.create_ready(lws_manifest("t", replicas=2, partition=2))
    env.kube.create(ROLLOUT_POLICY, NS, policy("owner", "t", [{"groups": 1}, {"groups": "100%"}]))
    env.cluster.advance(1.0)  # creationTimestamp has second resolution: the owner is strictly older
    env.kube.create(ROLLOUT_POLICY, NS, policy("second", "t", [{"groups": "100%"}]))
    with running(_controller(env)):
        wait_policy(env, "owner", lambda s: bool(s.get("stableRevision")))
        p = wait_policy(env, "second", lambda s: s.get("phase") == "Failed")
        assert "owned by rolloutpolicy default/owner" in p["status"]["message"]
        assert {c["reason"] for c in p["status"]["conditions"]} == {"TargetOwned"}
        sync(env, "t", "vllm:2")
        wait_policy(env, "owner", lambda s: s.get("phase") == "Succeeded")
        assert env.rec.partitions["t"] == [2, 1, 0, 2]  # the owner's stages (1, 100%), not the second's
        assert writes.to("rolloutpolicies/status", "second") == 1  # once, through a whole rollout
        env.kube.delete(ROLLOUT_POLICY, NS, "owner")
        p = wait_policy(env, "second", lambda s: s.get("phase") in ("Idle", "Succeeded"))
        assert "owned" not in p["status"]["message"]


def test_orphaned_and_invalid_policies_write_their_status_once(env: Env) -> None:
    writes = Writes(env)
    env.create_ready(lws_manifest("o", replicas=2, partition=2))
    env.kube.create(ROLLOUT_POLICY, NS, policy("orphan", "missing", [{"groups": 1}, {"groups": "100%"}]))
    # admitted (the CRD's rules check a condition's characters, not its grammar), refused at reconcile
    bad = {"metrics": [{"name": "m", "provider": {"prometheus": {"query": "up"}},
                        "successCondition": "result >"}]}
    env.kube.create(ROLLOUT_POLICY, NS, policy("invalid", "o", [{"groups": 1}, {"groups": "100%"}],
                                               analysis=bad))
    with running(ctl := _controller(env, resync_s=0.2)):  # even a resync every 0.2 s rewrites nothing
        wait_policy(env, "orphan", lambda s: "target" in (s.get("message") or ""))
        wait_policy(env, "invalid", lambda s: s.get("phase") == "Failed")
        for image in ("vllm:2", "vllm:3"):  # events on the namespace's LWS meanwhile
            sync(env, "o", image)
            wait_passes(ctl, 6)  # the event's reconcile and at least two resyncs of both policies
    assert writes.to("rolloutpolicies/status", "orphan") == 1
    assert writes.to("rolloutpolicies/status", "invalid") == 1


def _condition(s: dict, ctype: str) -> dict:
    return next((c for c in s.get("conditions") or [] if c["type"] == ctype), {})


def _warnings(env: Env, name: str, reason: str) -> int:
    items, _ = env.kube.list(EVENT, NS)
    return sum(1 for e in items if e["involvedObject"]["name"] == name and e["reason"] == reason
               and e["type"] == "Warning")


def test_a_missing_target_is_marked_announced_once_and_cleared_when_it_appears(env: Env) -> None:
    """A policy naming a target that does not exist is not a healthy idle one: TargetFound and Ready
    False with the reason, one Warning Event however many passes look at it; once the target is
    created TargetFound turns True and the policy adopts it as any other."""
    env.kube.create(ROLLOUT_POLICY, NS, policy("lost", "later", [{"groups": 1}, {"groups": "100%"}]))
    ctl = _controller(env, resync_s=0.2)
    with running(ctl):
        p = wait_policy(env, "lost", lambda s: _condition(s, "TargetFound").get("status") == "False")
        found, ready = _condition(p["status"], "TargetFound"), _condition(p["status"], "Ready")
        assert (found["reason"], ready["status"], ready["reason"]) == (
            "TargetNotFound", "False", "TargetNotFound")
        assert "LeaderWorkerSet/later not found in namespace default" in found["message"]
        assert p["status"]["phase"] == "Idle" and "spec.targetRef" in p["status"]["message"]
        assert ctl.loop is not None
        seen = ctl.loop.reconciles
        wait_for = time.monotonic() + 30
        while ctl.loop.reconciles < seen + 5 and time.monotonic() < wait_for:  # resyncs look at it again
            ctl.stop.wait(0.02)
        assert ctl.loop.reconciles >= seen + 5
        assert _warnings(env, "lost", "TargetNotFound") == 1
        dash = serve(str(env.kubeconfig), NS)  # the dashboard's overview marks it
        try:
            page = httpx.get(dash.url, timeout=30).text
            row = re.search(r'<tr class="([^"]*)" data-policy="default/lost"([^>]*)>', page)
            assert row and "broken" in row[1] and 'data-problem="target missing"' in row[2]
        finally:
            dash.stop()
        env.create_ready(lws_manifest("later", replicas=2, partition=2))
        p = wait_policy(env, "lost", lambda s: _condition(s, "TargetFound").get("status") == "True"
                        and bool(s.get("stableRevision")))
        assert _condition(p["status"], "Ready")["status"] == "True"
        assert "not found" not in p["status"]["message"]
    assert _warnings(env, "lost", "TargetNotFound") == 1


def test_a_surge_that_cannot_fit_is_refused_up_front(tmp_path: Path) -> None:
    """`lwsflow rollout`'s capacity check on the in-cluster path: a release whose maxSurge group has no
    free GPUs is refused before anything is written to the LWS (phase Failed, reason Refused, with the
    numbers), not left to stall until the progress deadline."""
    env = make_env(tmp_path, gpu_nodes=1)  # one node of 8 GPUs
    try:
        writes = Writes(env)
        env.create_ready(lws_manifest("c", replicas=2, size=1, gpus=4, surge=1, unavailable=0, partition=2))
        env.kube.create(ROLLOUT_POLICY, NS, policy("pc", "c", [{"groups": 1}, {"groups": "100%"}]))
        with running(ctl := _controller(env, resync_s=0.2)):
            wait_policy(env, "pc", lambda s: bool(s.get("stableRevision")))
            t0 = time.monotonic()
            sync(env, "c", "vllm:2")
            p = wait_policy(env, "pc", lambda s: s.get("phase") == "Failed")
            wait_passes(ctl, 3)  # later passes over the refused release write nothing either
            assert writes.to("leaderworkersets", "c", since=t0) == 0
        assert "refused" in p["status"]["message"] and "maxSurge" in p["status"]["message"]
        assert {c["reason"] for c in p["status"]["conditions"] if c["type"] != "TargetFound"} == {"Refused"}
        lws = env.kube.get(LWS, NS, "c")
        assert gate.partition(lws) == 2 and not state.RolloutState.from_object(lws).id
    finally:
        env.close()
