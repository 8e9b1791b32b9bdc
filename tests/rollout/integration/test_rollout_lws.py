"""Staged LWS rollouts over HTTP with the real client against the embedded cluster."""

from __future__ import annotations

from lwsflow.controller.kube.resources import EVENT, LWS
from lwsflow.controller.rollout import gate, state
from lwsflow.controller.rollout.engine import LwsRollout, RolloutOptions
from reliability.rollout_env import NS, Env, lws_manifest, new_release


def test_four_stage_rollout_partition_sequence(env: Env) -> None:
    base = lws_manifest("m", replicas=8)
    env.create_ready(base)
    eng = LwsRollout(env.kube, NS, "m", RolloutOptions(stages="1,25%,50%,100%", deadline_s=600),
                     env.clock(), manifest=new_release(base))
    out = eng.run()
    assert out.result == "succeeded", out.message
    # frozen at replicas, then 8-1, 8-2, 8-4, 0: seen by the store, not just by the controller
    assert env.rec.partitions["m"] == [0, 8, 7, 6, 4, 0]
    assert out.report.partitions_written == [8, 7, 6, 4, 0]
    final = env.kube.get(LWS, NS, "m")
    assert gate.lws_fully_rolled(final).passed
    worker = final["spec"]["leaderWorkerTemplate"]["workerTemplate"]
    assert worker["spec"]["containers"][0]["image"] == "vllm:2"
    st = state.RolloutState.from_object(final)
    assert st.phase == state.SUCCEEDED and st.passed == 4
    # every stage gated, in order, with its start/end in the cluster's clock
    assert [s.index for s in out.report.stages] == [1, 2, 3, 4]
    assert all(s.result == "passed" and s.started <= s.gate_passed <= s.ended for s in out.report.stages)
    assert env.rec.min_ready["m"] >= 7  # floor = 8 - maxUnavailable 1
    reasons = [e["reason"] for e in out.report.events]
    assert reasons.count("StageStarted") == 4 and reasons.count("StagePassed") == 4


def test_gate_never_passes_early_with_surge_groups(env: Env) -> None:
    """maxSurge 1: surge groups inflate replicas/ready/updated; at the instant each stage is recorded
    as passed, the pods themselves must show the stage's groups updated and Ready."""
    base = lws_manifest("s", replicas=4, surge=1, unavailable=1)
    env.create_ready(base)
    out = LwsRollout(env.kube, NS, "s", RolloutOptions(stages="1,50%,100%", deadline_s=600),
                     env.clock(), manifest=new_release(base)).run()
    assert out.result == "succeeded", out.message
    targets = [1, 2, 4]
    for k, target in enumerate(targets, start=1):
        good = env.rec.at_pass[("s", k)]
        want = set(range(4 - target, 4))
        assert want <= good, f"stage {k} recorded passed with groups {sorted(good)} good, need {sorted(want)}"
    assert env.rec.partitions["s"] == [0, 4, 3, 2, 0]
    final = env.kube.get(LWS, NS, "s")
    assert final["status"]["replicas"] == 4  # the surge group was reclaimed before the last gate


def test_bad_release_rolled_back_with_floor_held(env: Env) -> None:
    base = lws_manifest("bad", replicas=4)
    env.create_ready(base)
    bad = new_release(base, **{"sim.lwsflow.io/never-ready": "true"})
    out = LwsRollout(env.kube, NS, "bad", RolloutOptions(stages="1,50%,100%", deadline_s=120),
                     env.clock(), manifest=bad).run()
    assert out.result == "rolled-back" and out.exit_code == 1
    assert "deadline" in out.message
    final = env.kube.get(LWS, NS, "bad")
    assert gate.lws_fully_rolled(final).passed
    tmpl = final["spec"]["leaderWorkerTemplate"]["workerTemplate"]
    assert tmpl["spec"]["containers"][0]["image"] == "vllm:1"
    assert "sim.lwsflow.io/never-ready" not in tmpl["metadata"]["annotations"]
    assert state.template_of(final) == state.template_of(env.rec_first("bad"))
    assert state.RolloutState.from_object(final).phase == state.ROLLED_BACK
    assert env.rec.partitions["bad"] == [0, 4, 3, 0]  # never went past stage 1
    assert env.rec.min_ready["bad"] >= 3  # floor: 4 - maxUnavailable 1, held throughout
    assert out.report.min_ready_groups is not None and out.report.min_ready_groups >= 3
    reasons = [e["reason"] for e in out.report.events]
    assert {"StageFailed", "RollbackStarted", "RolledBack"} <= set(reasons)
    events, _ = env.kube.list(EVENT, NS)
    assert {"StageFailed", "RollbackStarted", "RolledBack"} <= {e["reason"] for e in events
                                                                if e["involvedObject"]["name"] == "bad"}


def test_no_rollback_leaves_it_paused(env: Env) -> None:
    base = lws_manifest("nr", replicas=2)
    env.create_ready(base)
    bad = new_release(base, **{"sim.lwsflow.io/never-ready": "true"})
    out = LwsRollout(env.kube, NS, "nr", RolloutOptions(stages="1,100%", deadline_s=60, no_rollback=True),
                     env.clock(), manifest=bad).run()
    assert out.result == "paused" and out.exit_code == 1
    st = state.RolloutState.from_object(env.kube.get(LWS, NS, "nr"))
    assert st.paused and st.phase == state.RUNNING and "deadline" in st.reason
    assert env.rec.partitions["nr"] == [0, 2, 1]  # left where it failed


def test_rerun_after_rollback_does_not_retry_unless_asked(env: Env) -> None:
    base = lws_manifest("again", replicas=2)
    env.create_ready(base)
    bad = new_release(base, **{"sim.lwsflow.io/never-ready": "true"})
    opts = RolloutOptions(stages="1,100%", deadline_s=60)
    assert LwsRollout(env.kube, NS, "again", opts, env.clock(), manifest=bad).run().result == "rolled-back"
    seen = list(env.rec.partitions["again"])
    out = LwsRollout(env.kube, NS, "again", opts, env.clock(), manifest=bad).run()
    assert out.result == "rolled-back" and "--retry" in out.message
    assert env.rec.partitions["again"] == seen  # nothing written
    retry = RolloutOptions(stages="1,100%", deadline_s=60, retry=True)
    assert LwsRollout(env.kube, NS, "again", retry, env.clock(), manifest=bad).run().result == "rolled-back"
    assert len(env.rec.partitions["again"]) > len(seen)  # it really tried again
