"""A DisaggregatedSet whose controller writes no status, as upstream's released v0.9.0 and v0.10.0
(the DS status is main-only, lws-semantics §f "Status"): the gate reads the child LWS instead.

The embedded DS controller runs with ``ds_writes_status: false``; everything else is as upstream.
"""

from __future__ import annotations

import time

from lwsflow.controller.api import labels as L
from lwsflow.controller.kube.resources import DS, LWS
from lwsflow.controller.rollout import gate, state
from lwsflow.controller.rollout.ds import DsKind, ds_rollout
from lwsflow.controller.rollout.engine import RolloutOptions, Wiring
from reliability.rollout_env import NS, Env, ds_manifest, new_release


def _create_ready(env: Env, manifest: dict) -> DsKind:
    """Create the DS with the status-less controller and wait until its children pass the gate."""
    env.cluster.config.ds_writes_status = False
    env.create(manifest)
    kind = DsKind(env.kube, NS)
    name = manifest["metadata"]["name"]
    end = time.monotonic() + 30
    while not kind.gate(obj := env.kube.get(DS, NS, name), 1).passed:
        assert time.monotonic() < end, kind.gate(obj, 1).detail
        time.sleep(0.05)
    assert "observedGeneration" not in (obj.get("status") or {}), obj.get("status")
    return kind


def _children(env: Env, name: str) -> list[dict]:
    items, _ = env.kube.list(LWS, NS, label_selector=f"{L.DS_NAME}={name}")
    return items


def test_ds_without_status_rolls_through_the_children_gate(env: Env) -> None:
    base = ds_manifest("dns", prefill=2, decode=1)
    _create_ready(env, base)
    seen: list[list[dict]] = []
    out = ds_rollout(env.kube, NS, "dns", RolloutOptions(deadline_s=600), env.clock(),
                     manifest=new_release(base), wiring=Wiring(on_step=lambda n: seen.append(
                         _children(env, "dns")) if n.endswith("gate-passed") else None)).run()
    assert out.result == "succeeded", out.message
    rec = out.report.stages[0]
    assert rec.gate["role:prefill"] and rec.gate["role:decode"] and rec.gate["oldRevisionsDrained"]
    assert rec.gate_detail.startswith(gate.CHILDREN_SOURCE), rec.gate_detail
    # at the instant the gate passed: per role one child on vllm:2 at its equality, nothing else left
    assert seen
    want = {"prefill": 2, "decode": 1}
    for kid in seen[0]:
        role, st = kid["metadata"]["labels"][L.DS_ROLE], kid["status"]
        image = kid["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]["image"]
        if image == "vllm:1":
            assert kid["spec"]["replicas"] == 0 and st.get("replicas", 0) == 0
            continue
        assert kid["spec"]["replicas"] == st["replicas"] == st["readyReplicas"] == st["updatedReplicas"] \
            == want[role]
    final = env.kube.get(DS, NS, "dns")
    assert "observedGeneration" not in (final.get("status") or {})
    assert state.RolloutState.from_object(final).phase == state.SUCCEEDED


def test_ds_without_status_holds_on_an_unready_child_and_rolls_back(env: Env) -> None:
    base = ds_manifest("dnb", prefill=2, decode=1)
    kind = _create_ready(env, base)
    bad = new_release(base, **{"sim.lwsflow.io/never-ready": "true"})
    out = ds_rollout(env.kube, NS, "dnb", RolloutOptions(deadline_s=120), env.clock(), manifest=bad).run()
    assert out.result == "rolled-back", out.message
    rec = out.report.stages[0]
    assert rec.result == "failed" and not (rec.gate["role:prefill"] and rec.gate["role:decode"]), rec.gate
    # the explanation names the unready child on the new revision and the predicate it fails
    assert gate.CHILDREN_SOURCE in rec.gate_detail and "lws/dnb-" in rec.gate_detail, rec.gate_detail
    assert "failing" in rec.gate_detail and "readyReplicas" in rec.gate_detail, rec.gate_detail
    final = env.kube.get(DS, NS, "dnb")
    assert kind.gate(final, 1).passed, kind.gate(final, 1).detail
    for role in final["spec"]["roles"]:
        assert role["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0][
            "image"] == "vllm:1"


def test_first_install_of_a_status_less_ds_waits_for_its_children(env: Env) -> None:
    """``deploy.install`` (the pipeline's first install) judges a DS without status by its child LWS,
    as the rollout gate does: it ends once every role's child is at its equality, and not before."""
    from lwsflow.components.deploy import install

    env.cluster.config.ds_writes_status = False
    report = install(env.kube, [ds_manifest("dfi", prefill=2, decode=1)], deadline_s=600)
    assert report["result"] == "succeeded"
    kids = _children(env, "dfi")
    assert sorted(k["metadata"]["labels"][L.DS_ROLE] for k in kids) == ["decode", "prefill"]
    for kid in kids:
        st = kid["status"]
        assert kid["spec"]["replicas"] == st["readyReplicas"] == st["updatedReplicas"]
    assert "observedGeneration" not in (env.kube.get(DS, NS, "dfi").get("status") or {})
