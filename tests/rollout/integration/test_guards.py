"""Guards and hooks: a second template change aborts without overwriting, hooks fail a stage, bake
holds the stage, a controller killed mid-rollback finishes the rollback."""

from __future__ import annotations

import sys
import threading
import time

import pytest

from lwsflow.controller.clock import ClusterClock, WallClock
from lwsflow.controller.kube.resources import LWS, POD
from lwsflow.controller.rollout import gate, state
from lwsflow.controller.rollout.engine import Interrupted, LwsRollout, RolloutOptions, Wiring
from lwsflow.controller.rollout.hooks import HookResult, command_hook, http_probe, run_hook
from reliability.rollout_env import NS, Env, lws_manifest, new_release


def image(obj: dict) -> str:
    return obj["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]["image"]


def test_second_template_change_aborts_and_overwrites_nothing(env: Env) -> None:
    base = lws_manifest("x", replicas=4, load_s=60)
    env.create_ready(base)
    result: dict[str, object] = {}
    t = threading.Thread(target=lambda: result.setdefault("out", LwsRollout(
        env.kube, NS, "x", RolloutOptions(stages="1,2,3,100%", deadline_s=600), env.clock(),
        manifest=new_release(base)).run()))
    t.start()
    end = time.monotonic() + 30
    while ("x", 1) not in env.rec.at_pass and time.monotonic() < end:
        time.sleep(0.01)
    theirs = new_release(base, image="vllm:3")
    theirs["spec"]["rolloutStrategy"]["rollingUpdateConfiguration"]["partition"] = 0
    env.kube.apply(LWS, theirs, field_manager="someone-else")
    t.join(30)
    out = result["out"]
    assert out.result == "aborted" and "someone else" in out.message  # type: ignore[attr-defined]
    env.cluster.advance(60)  # a virtual minute at once: nothing of the aborted rollout comes after it
    final = env.kube.get(LWS, NS, "x")
    assert image(final) == "vllm:3" and gate.partition(final) == 0  # their change stands
    assert state.RolloutState.from_object(final).phase == state.ABORTED


def test_failing_hook_rolls_back(env: Env) -> None:
    base = lws_manifest("h", replicas=4)
    env.create_ready(base)
    fail_at_2 = command_hook([sys.executable, "-c",
                              "import os,sys; sys.exit(3 if os.environ['LWSFLOW_STAGE'] == '2' else 0)"])
    out = LwsRollout(env.kube, NS, "h", RolloutOptions(stages="1,2,100%", hooks=[fail_at_2]),
                     env.clock(), manifest=new_release(base)).run()
    assert out.result == "rolled-back" and "hook failed" in out.message
    # the failed stage's line says its readiness gate had passed, with the gate's figures (issue 23)
    assert "stage 2 hook failed: " in out.message and "(after its readiness gate passed: " in out.message
    assert [s.result for s in out.report.stages] == ["passed", "failed"]
    assert "exit 0" in out.report.stages[0].hooks[0] and "exit 3" in out.report.stages[1].hooks[0]
    final = env.kube.get(LWS, NS, "h")
    assert image(final) == "vllm:1" and gate.lws_fully_rolled(final).passed


def test_bake_keeps_each_stage_for_its_time(env: Env) -> None:
    base = lws_manifest("b", replicas=2)
    env.create_ready(base)
    out = LwsRollout(env.kube, NS, "b", RolloutOptions(stages="1,100%", bake_s=40), env.clock(),
                     manifest=new_release(base)).run()
    assert out.result == "succeeded"
    for s in out.report.stages:
        assert s.ended - s.gate_passed >= 40 - 0.5  # cluster seconds; ClusterClock interpolates


def _killed_during_rollback(env: Env, name: str) -> dict:
    """``name`` (2 groups) given a never-ready release with a 60 s deadline, the controller stopped
    right after it applied the rollback; returns the bad release."""
    base = lws_manifest(name, replicas=2)
    env.create_ready(base)
    bad = new_release(base, **{"sim.lwsflow.io/never-ready": "true"})

    def stop(step: str) -> None:
        if step == "rollback-applied":
            raise Interrupted(step)
    with pytest.raises(Interrupted):
        LwsRollout(env.kube, NS, name, RolloutOptions(stages="1,100%", deadline_s=60), env.clock(),
                   manifest=bad, wiring=Wiring(on_step=stop)).run()
    return bad


def test_killed_during_rollback_finishes_it(env: Env) -> None:
    bad = _killed_during_rollback(env, "rb")
    assert state.RolloutState.from_object(env.kube.get(LWS, NS, "rb")).phase == state.ROLLING_BACK
    out = LwsRollout(env.kube, NS, "rb", RolloutOptions(stages="1,100%"), env.clock(), manifest=bad).run()
    assert out.result == "rolled-back"
    final = env.kube.get(LWS, NS, "rb")
    assert image(final) == "vllm:1" and gate.lws_fully_rolled(final).passed
    assert env.rec.min_ready["rb"] >= 1


def test_restarted_after_the_rollback_budget_ran_out_still_finishes_it(env: Env) -> None:
    """A controller down for longer than the rollback's budget (deadline x stages, counted from the
    rollback's start) must not call it failed on sight: the group stuck unready on the bad revision
    waits for its forced recreate (lws-semantics: a StatefulSet does not replace a stuck pod), which only
    a live controller does. The restarted one gets a deadline of its own and finishes the rollback."""
    # the MaxUnavailableStatefulSet gate on (off by default in Kubernetes 1.35/1.36): only then does a
    # StatefulSet leave a pod of the bad revision stuck, so the controller's forced recreate is needed
    env.cluster.config.max_unavailable_statefulset = True
    bad = _killed_during_rollback(env, "rb2")
    st = state.RolloutState.from_object(env.kube.get(LWS, NS, "rb2"))
    assert st.phase == state.ROLLING_BACK
    clock, spent = env.clock(), state.epoch(st.stage_started) + 60 * 2 + 10  # the whole budget, and more
    env.cluster.advance(max(0.0, spent - env.cluster.now()))  # down that long: skipped at once
    end = time.monotonic() + 60
    while clock.now() < spent and time.monotonic() < end:  # the clock the restart reads has seen it
        time.sleep(0.05)
    assert clock.now() >= spent
    assert not gate.lws_fully_rolled(env.kube.get(LWS, NS, "rb2")).passed  # nobody unstuck the group
    out = LwsRollout(env.kube, NS, "rb2", RolloutOptions(stages="1,100%"), env.clock(), manifest=bad).run()
    assert out.result == "rolled-back", out.message
    final = env.kube.get(LWS, NS, "rb2")
    assert image(final) == "vllm:1" and gate.lws_fully_rolled(final).passed


def test_hooks_and_clocks_units() -> None:
    assert not run_hook(lambda _c: 1 / 0, None).ok  # type: ignore[arg-type,return-value]
    assert run_hook(lambda _c: True, None) == HookResult(True, "<lambda>: passed")  # type: ignore[arg-type]
    res = run_hook(http_probe("http://127.0.0.1:9/health", timeout_s=0.5), None)  # type: ignore[arg-type]
    assert not res.ok and "127.0.0.1:9" in res.detail
    docs = iter([{"now": 1000.0, "speed": 50.0}] * 3)
    clock = ClusterClock(lambda: next(docs), resync_s=100)
    assert 1000.0 <= clock.now() < 1000.0 + 50 * 1.0 and clock.wall(100) == 2.0
    assert WallClock().wall(3) == 3


def test_ready_groups_below_the_floor_trip_the_guard(env: Env) -> None:
    # A long load keeps the dip far above the grace even when a loaded machine delays the controller.
    base = lws_manifest("fl", replicas=4, load_s=600)
    env.create(base)
    env.cluster.advance(600 + 60)  # the first load at once: nothing but the cluster runs yet
    env.wait(lambda o: gate.lws_fully_rolled(o).passed, name="fl")

    def knock_out_an_old_group(name: str) -> None:
        if name == "stage-1-partition":  # group 3 is updating; take group 0 down too: 2 < floor 3
            env.kube.delete(POD, NS, "fl-0")
    out = LwsRollout(env.kube, NS, "fl", RolloutOptions(stages="1,100%", floor_grace_s=10, deadline_s=600),
                     env.clock(), manifest=new_release(base),
                     wiring=Wiring(on_step=knock_out_an_old_group)).run()
    assert out.result == "rolled-back" and "below the floor" in out.message
    assert out.report.min_ready_groups == 2
    assert gate.lws_fully_rolled(env.kube.get(LWS, NS, "fl")).passed


def test_leader_worker_revision_skew_trips_the_guard(env: Env) -> None:
    base = lws_manifest("sk", replicas=4)
    env.create_ready(base)

    def skew_a_worker(name: str) -> None:
        if name == "stage-1-gate-passed":  # a Ready worker claiming another revision than its leader
            env.kube.merge_patch(POD, NS, "sk-3-1", {"metadata": {"labels": {
                "leaderworkerset.sigs.k8s.io/template-revision-hash": "someotherrev"}}})
    out = LwsRollout(env.kube, NS, "sk", RolloutOptions(stages="1,100%"), env.clock(),
                     manifest=new_release(base), wiring=Wiring(on_step=skew_a_worker)).run()
    assert out.result == "rolled-back" and "revision skew in group 3" in out.message


def test_cluster_clock_starts_from_a_document_already_read() -> None:
    fetched: list[int] = []

    def fetch() -> dict:
        fetched.append(1)
        return {"now": 5000.0, "speed": 10.0}

    clock = ClusterClock(fetch, resync_s=100, first={"now": 1000.0, "speed": 50.0})
    assert not fetched and clock.speed == 50.0 and 1000.0 <= clock.now() < 1000.0 + 50 * 1.0
    assert not fetched  # within resync_s: extrapolated, not read again
    ClusterClock(fetch, resync_s=100)
    assert fetched == [1]  # without a first document it reads one at once
