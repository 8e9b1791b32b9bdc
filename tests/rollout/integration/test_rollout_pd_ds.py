"""P/D pair (two LWS) decode-first with skew <= 1, and a DisaggregatedSet gated per role."""

from __future__ import annotations

import pytest

from lwsflow.controller.api import labels as L
from lwsflow.controller.kube.resources import DS, LWS
from lwsflow.controller.pd.pair import PairRollout, skew
from lwsflow.controller.rollout import gate, state
from lwsflow.controller.rollout.ds import ds_rollout
from lwsflow.controller.rollout.engine import Interrupted, RolloutOptions, Wiring
from reliability.rollout_env import NS, Env, ds_manifest, lws_manifest, new_release


def pair(prefill: int = 4, decode: int = 2) -> tuple[dict, dict]:
    def one(role: str, replicas: int) -> dict:
        return lws_manifest(f"chat-{role}", replicas=replicas, load_s=15,
                            labels={L.PD_PAIR: "chat", L.ROLE: role})
    return one("prefill", prefill), one("decode", decode)


def test_skew_measure() -> None:
    assert skew(4, 2, 4, 2) == 0
    assert skew(4, 1, 4, 2) == 1  # one decode group down
    assert skew(3, 2, 4, 2) == 0.5  # one prefill group down: half a decode group off
    assert skew(2, 2, 4, 2) == 1  # two prefill groups = one decode group's worth
    assert skew(4, 0, 4, 2) == 2
    assert skew(6, 1, 6, 2) == 1


def test_pair_moves_decode_first_with_skew_at_most_one(env: Env) -> None:
    p, d = pair()
    env.create_ready(p)
    env.create_ready(d)
    out = PairRollout(env.kube, NS, "chat", RolloutOptions(stages="1,50%,100%", deadline_s=600),
                      env.clock(), manifests={"prefill": new_release(p), "decode": new_release(d)}).run()
    assert out.result == "succeeded", out.message
    # prefill targets 1,2,4 (partitions 3,2,0); decode scaled 1,1,2 (partitions 1,1,0)
    assert env.rec.partitions["chat-prefill"] == [0, 4, 3, 2, 0]
    assert env.rec.partitions["chat-decode"] == [0, 2, 1, 0]
    # per stage: decode passed stage k before prefill's partition for stage k was written
    events = sorted(env.rec.order)
    freeze = next(rv for rv, n, w, v in events if n == "chat-prefill" and w == "partition" and v == 4)
    for k, prefill_partition in enumerate([3, 2, 0], start=1):
        d_pass = next(rv for rv, n, w, v in events if n == "chat-decode" and w == "passed" and v == k)
        p_move = next(rv for rv, n, w, v in events
                      if n == "chat-prefill" and w == "partition" and v == prefill_partition
                      and rv > freeze)
        assert d_pass < p_move, f"stage {k}: prefill moved before decode passed"
    # max-skew from the store's own ready counts (both LWS, every status change)
    ready = {"chat-prefill": 4, "chat-decode": 2}
    worst = 0.0
    for rv, name, r in sorted(env.rec.ready_series):
        if name in ready and rv > freeze:
            ready[name] = r
            worst = max(worst, skew(ready["chat-prefill"], ready["chat-decode"], 4, 2))
    assert worst <= 1.0
    assert out.report.max_pd_skew is not None and out.report.max_pd_skew <= 1.0
    for name in ready:
        assert gate.lws_fully_rolled(env.kube.get(LWS, NS, name)).passed


def test_pair_rollback_prefill_first(env: Env) -> None:
    p, d = pair(prefill=2, decode=2)
    env.create_ready(p)
    env.create_ready(d)
    bad_prefill = new_release(p, **{"sim.lwsflow.io/never-ready": "true"})
    out = PairRollout(env.kube, NS, "chat", RolloutOptions(stages="1,100%", deadline_s=90),
                      env.clock(), manifests={"prefill": bad_prefill, "decode": new_release(d)}).run()
    assert out.result == "rolled-back", out.message
    starts = [e for e in out.report.events if e["reason"] == "RollbackStarted"]
    assert len(starts) == 2
    rb = [(rv, n) for rv, n, w, v in sorted(env.rec.order) if w == "partition" and v == 0 and rv > 0]
    order = [n for _rv, n in rb][-2:]
    assert order == ["chat-prefill", "chat-decode"], order
    for name in ("chat-prefill", "chat-decode"):
        obj = env.kube.get(LWS, NS, name)
        assert gate.lws_fully_rolled(obj).passed
        worker = obj["spec"]["leaderWorkerTemplate"]["workerTemplate"]
        assert worker["spec"]["containers"][0]["image"] == "vllm:1"
        assert state.RolloutState.from_object(obj).phase == state.ROLLED_BACK


def test_pair_decode_failing_at_stage_one_rolls_back_without_touching_prefill(env: Env) -> None:
    """Decode moves first, so a decode release that fails stage 1 ends the rollout before prefill
    started: only decode is rolled back, and prefill (no rollout of its own to undo) is left as it is
    instead of the whole pair reading "rollback failed" (found by the P/D analysis test)."""
    p, d = pair(prefill=2, decode=2)
    env.create_ready(p)
    env.create_ready(d)
    bad_decode = new_release(d, **{"sim.lwsflow.io/never-ready": "true"})
    out = PairRollout(env.kube, NS, "chat", RolloutOptions(stages="1,100%", deadline_s=90),
                      env.clock(), manifests={"prefill": new_release(p), "decode": bad_decode}).run()
    assert out.result == "rolled-back", out.message
    assert [e["reason"] for e in out.report.events].count("RollbackStarted") == 1
    prefill = env.kube.get(LWS, NS, "chat-prefill")
    image = prefill["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]["image"]
    assert image == "vllm:1" and not state.RolloutState.from_object(prefill).id
    assert env.rec.partitions["chat-prefill"] == [0]
    decode = env.kube.get(LWS, NS, "chat-decode")
    assert state.RolloutState.from_object(decode).phase == state.ROLLED_BACK
    assert gate.lws_fully_rolled(decode).passed


def test_ds_rollout_gated_per_role(env: Env) -> None:
    base = ds_manifest("dis", prefill=2, decode=1)
    env.create_ready(base)
    seen: list[dict] = []
    out = ds_rollout(env.kube, NS, "dis", RolloutOptions(deadline_s=600), env.clock(),
                    manifest=new_release(base), wiring=Wiring(on_step=lambda n: seen.append(
                        env.kube.get(DS, NS, "dis")) if n.endswith("gate-passed") else None)).run()
    assert out.result == "succeeded", out.message
    gate_checks = out.report.stages[0].gate
    assert gate_checks["role:prefill"] and gate_checks["role:decode"]
    # at the instant the gate passed, every role was at desired == replicas == ready == updated
    assert seen and all(gate.ds_gate(o).passed for o in seen)
    for rs in seen[0]["status"]["roleStatuses"]:
        want = {"prefill": 2, "decode": 1}[rs["name"]]
        assert (rs["replicas"], rs["readyReplicas"], rs["updatedReplicas"]) == (want, want, want)
    final = env.kube.get(DS, NS, "dis")
    assert state.RolloutState.from_object(final).phase == state.SUCCEEDED


def test_ds_bad_release_reapplies_previous_spec(env: Env) -> None:
    base = ds_manifest("dbad", prefill=2, decode=1)
    env.create_ready(base)
    bad = new_release(base, **{"sim.lwsflow.io/never-ready": "true"})
    out = ds_rollout(env.kube, NS, "dbad", RolloutOptions(deadline_s=120), env.clock(), manifest=bad).run()
    assert out.result == "rolled-back", out.message
    final = env.kube.get(DS, NS, "dbad")
    assert gate.ds_gate(final).passed
    for role in final["spec"]["roles"]:
        tmpl = role["spec"]["leaderWorkerTemplate"]["workerTemplate"]
        assert tmpl["spec"]["containers"][0]["image"] == "vllm:1"
        assert "sim.lwsflow.io/never-ready" not in tmpl["metadata"]["annotations"]


def test_pair_resumes_after_interrupt_mid_stage(env: Env) -> None:
    p, d = pair()
    env.create_ready(p)
    env.create_ready(d)
    manifests = {"prefill": new_release(p), "decode": new_release(d)}

    def stop(name: str) -> None:
        if name == "prefill:stage-2-gate-passed":
            raise Interrupted(name)
    with pytest.raises(Interrupted):
        PairRollout(env.kube, NS, "chat", RolloutOptions(stages="1,50%,100%"), env.clock(),
                    manifests=manifests, on_step=stop).run()
    out = PairRollout(env.kube, NS, "chat", RolloutOptions(stages="1,50%,100%"), env.clock(),
                      manifests=manifests).run()
    assert out.result == "succeeded", out.message
    assert env.rec.partitions["chat-prefill"] == [0, 4, 3, 2, 0]
    assert env.rec.partitions["chat-decode"] == [0, 2, 1, 0]
    passes = [(n, v) for _rv, n, w, v in sorted(env.rec.order) if w == "passed"]
    assert passes == [("chat-decode", 1), ("chat-prefill", 1), ("chat-decode", 2), ("chat-prefill", 2),
                      ("chat-decode", 3), ("chat-prefill", 3)]


def test_interrupted_all_at_once_switch_resumes_with_both_roles_together(env: Env) -> None:
    """The all-at-once switch (cross-revision P/D compatibility, docs/rollout.md) lowers both roles'
    partitions before gating either; a coordinator restarted in the middle (options from the persisted
    state: one stage, no "together") must not fall back to decode first."""
    from lwsflow.controller.rollout import capacity

    p, d = pair(prefill=2, decode=1)
    env.create_ready(p)
    env.create_ready(d)
    manifests = {"prefill": capacity.with_budget(new_release(p), capacity.Budget(2, 0)),
                 "decode": capacity.with_budget(new_release(d), capacity.Budget(1, 0))}

    def stop(name: str) -> None:
        if name == "prefill:started":  # decode's partition is down, prefill only frozen
            raise Interrupted(name)
    with pytest.raises(Interrupted):
        PairRollout(env.kube, NS, "chat", RolloutOptions(stages="100%", together=True), env.clock(),
                    manifests=manifests, on_step=stop).run()
    out = PairRollout(env.kube, NS, "chat", RolloutOptions(stages="100%"), env.clock(),
                      manifests=manifests).run()
    assert out.result == "succeeded", out.message
    events = sorted(env.rec.order)
    lowered = {n: rv for rv, n, w, v in events if w == "partition" and v == 0 and rv > 0}
    passed = [rv for rv, n, w, v in events if w == "passed" and v == 1]
    assert len(passed) == 2 and max(lowered.values()) < min(passed), events
