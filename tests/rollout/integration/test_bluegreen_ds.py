"""Blue-green of a DisaggregatedSet on the embedded cluster (issue 18): a second DS ``<name>-<rev>`` in
its own InferencePool, HTTPRoute weights shifted stage by stage, traffic observed through the stand-in
llm-d router, the old DS and pool deleted at the end; a slower green DS caught by analysis and shifted
back; a capacity refusal naming the missing GPUs; a controller SIGKILLed mid-shift and resumed.

The pools tell the two DS's pods apart by ``disaggregatedset.x-k8s.io/name``, which the DS controller
puts on every pod of every role (lws-semantics §f "Child LWS, labels, Services": automatic labels on the
LWS and the pod templates). Readiness of green is the DS gate (§f "Status": per role
``desired*slices == replicas == ready == updated``), from the child LWS where the DS controller writes
no status, as released upstream controllers (v0.9.0, v0.10.0) do.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from lwsflow.cli import main
from lwsflow.controller.api import labels as L
from lwsflow.controller.bluegreen import kinds as K
from lwsflow.controller.bluegreen import plan as P
from lwsflow.controller.errors import InvalidInput
from lwsflow.controller.kube.resources import DS, INFERENCE_POOL, LWS
from lwsflow.controller.rollout import gate
from lwsflow.controller.rollout.ds import DsKind
from tests.rollout.bluegreen_kit import (
    BLUE,
    DS_ROLES,
    GREEN,
    KILL_AT_STAGE_2,
    NS,
    SLOWER,
    Env,
    analysed,
    assert_blue_pool_narrowed,
    assert_shares,
    env_fixture,
    lwsflow,
    only,
    shift_with_traffic,
)

env = env_fixture("ds")


def _ds_of(env: Env, ref: str) -> dict[str, Any]:
    return env.docs(ref)[0]


def _children(env: Env) -> list[dict[str, Any]]:
    return env.kube.list(LWS, NS)[0]


def test_ds_blue_green_shifts_weights_stage_by_stage_and_deletes_blue(env: Env) -> None:
    out, seen, lines = shift_with_traffic(env)
    assert out.result == "succeeded", out.message
    cap = next(line for line in lines if line.startswith("capacity blue-green: both revisions fit"))
    assert all("DisaggregatedSet chat-" in cap and f"role {r} (pool h100): 2 of 2 group(s)" in cap
               for r in DS_ROLES), cap
    assert_blue_pool_narrowed(env, L.DS_NAME)
    assert env.green_weights() == [None, 0, 10, 50, 100]
    assert_shares(seen, [10, 50, 100], env)
    assert seen[-1][1] == 1.0
    assert all(p.startswith("chat-") and "-decode-" in p for _w, _s, pods in seen for p in pods), seen
    st = env.route_state()
    assert st.phase == P.SUCCEEDED and st.green is not None and st.green.kind == "ds"
    green = st.green.pair
    assert green == f"chat-{K.ds_revision(_ds_of(env, GREEN))}"
    assert env.backend_refs() == only(st.green.pool)
    # only green is left: its DS, its children (by owner reference), its pool selecting its pods only
    assert env.names(DS) == [green]
    kids = _children(env)
    assert kids and {o["metadata"]["labels"][L.DS_NAME] for o in kids} == {green}
    pools = env.kube.list(INFERENCE_POOL, NS)[0]
    assert [p["metadata"]["name"] for p in pools] == [green]
    assert pools[0]["spec"]["selector"]["matchLabels"] == {L.MODEL: "chat", L.WORKER_INDEX: "0",
                                                           L.DS_NAME: green}
    assert out.message.endswith(f"traffic on ds/{green}")
    assert out.report.kind == L.DS_KIND


def test_slower_green_ds_is_caught_at_the_first_weight_stage_and_shifted_back(tmp_path: Path) -> None:
    """Analysis per role (green DS's role against blue DS's role; Prometheus labels a DS's pods with the
    DS's name) fails at 50%; the route goes back to blue alone and the green DS is deleted."""
    with Env(tmp_path, "ds", speed=20.0) as env:  # analysis measures in wall time (Prometheus's clock)
        rc, report = analysed(env, SLOWER)
        assert rc == 1 and report["result"] == "rolled-back", report
        assert len(report["stages"]) == 1  # never went past the first weight stage
        first = report["stages"][0]
        assert first["result"] == "failed" and first["target_groups"] == 50
        failed = [m for m in first["analysis"] if m["phase"] == "failed"]
        assert failed and all(m["value"] > m["baseline"] * 1.1 for m in failed), first["analysis"]
        assert {m["role"] for m in first["analysis"]} <= set(DS_ROLES)
        # weights shifted back (green's backendRef removed), green DS and its children deleted, blue as it was
        assert env.green_weights() == [None, 0, 50, None]
        assert env.backend_refs() == only("chat")
        assert env.names(DS) == ["chat"]
        end = time.monotonic() + 30  # the children go by owner reference (garbage collection)
        while {o["metadata"]["labels"][L.DS_NAME] for o in _children(env)} != {"chat"}:
            assert time.monotonic() < end, [o["metadata"]["name"] for o in _children(env)]
            time.sleep(0.1)
        assert env.names(INFERENCE_POOL) == ["chat"]
        blue = env.kube.get(DS, NS, "chat")
        assert all(BLUE in r["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0][
            "image"] for r in blue["spec"]["roles"])
        assert DsKind(env.kube, NS).gate(blue, 1).passed


def test_ds_capacity_refusal_names_missing_gpus_and_writes_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with Env(tmp_path, "ds", gpus_per_node=8) as env:
        env.deploy_blue(gpus=2)  # 2 roles x 2 groups x 2 GPUs: 8 of 8 GPUs in use
        route_before = env.route()
        pool_before = env.kube.get(INFERENCE_POOL, NS, "chat")
        rc = main(env.bg_args(env.manifest(GREEN)))
        err = capsys.readouterr().err
        assert rc == 2 and err.count("\n") == 1, err
        # green wants 1 GPU per pod: 2 roles x 2 groups, none placed
        assert "strategy" in err and "missing 4 GPUs in pool h100" in err, err
        assert all(f"role {r} (pool h100): 0 of 2 group(s) x 1 GPUs placed in 0 free GPUs" in err
                   for r in DS_ROLES), err
        assert env.route()["metadata"]["resourceVersion"] == route_before["metadata"]["resourceVersion"]
        assert env.kube.get(INFERENCE_POOL, NS, "chat")["metadata"]["resourceVersion"] == \
            pool_before["metadata"]["resourceVersion"]
        assert env.names(DS) == ["chat"]


def test_sigkill_mid_shift_then_resume_on_a_ds_without_status(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """The controller is killed (SIGKILL) while checking the 50% stage; a rerun re-checks that stage
    and goes on; no weight is written twice (docs/rollout.md "Crash safety"). The DS controller writes
    no status (upstream v0.9.0/v0.10.0), so green's readiness comes from its child LWS."""
    with Env(tmp_path, "ds", ds_writes_status=False) as env:
        env.deploy_blue()
        assert "observedGeneration" not in (env.kube.get(DS, NS, "chat").get("status") or {})
        mf = env.manifest(GREEN)
        base = env.bg_args(mf, "--weights", "10,50,100", "--bake", "20s")
        first = lwsflow(base + KILL_AT_STAGE_2, timeout=120)
        assert first.returncode == -9, first.stdout + first.stderr
        rev = K.ds_revision(_ds_of(env, GREEN))
        assert f"green chat-{rev} ready: ds {gate.CHILDREN_SOURCE}" in first.stdout
        st = env.route_state()
        assert (st.phase, st.stage, st.passed) == (P.SHIFTING, 1, 1) and st.green is not None
        assert env.green_weights() == [None, 0, 10, 50]
        kc = ["-n", NS, "--kubeconfig", str(env.sim.kubeconfig)]
        assert main(["rollout", "status", "ds/chat", *kc]) == 0
        row = json.loads(capsys.readouterr().out.splitlines()[0])
        assert (row["strategy"], row["phase"], row["stage"], row["passed"], row["weights"], row["green"]) == \
            ("blue-green", P.SHIFTING, 2, 1, [10, 50, 100], st.green.pair)
        # a partition rollout of the blue DS is refused while the blue-green is in progress
        assert main(["rollout", "run", "ds/chat", *kc, "--manifest", str(mf)]) == 2
        err = capsys.readouterr().err
        assert "blue-green" in err and "--strategy blue-green to resume it" in err
        # the rerun smoke-tests green (ds/<green>) at each stage it checks
        second = lwsflow([*base, "--smoke", "--report", str(tmp_path / "rep.json")], timeout=180)
        assert second.returncode == 0, second.stdout + second.stderr
        assert "succeeded" in second.stdout and "stage-2-passed" in second.stdout
        stages = json.loads((tmp_path / "rep.json").read_text())["stages"]
        assert [(s["target_groups"], s["hooks"]) for s in stages] == [(50, ["smoke passed"]),
                                                                       (100, ["smoke passed"])], stages
        assert "stage-2-shifted" not in second.stdout  # the 50% weights were not written again
        assert env.green_weights() == [None, 0, 10, 50, 100]
        assert env.route_state().phase == P.SUCCEEDED
        assert env.names(DS) == [st.green.pair]
        # a rerun after the end reports the recorded outcome and writes nothing
        rv = env.route()["metadata"]["resourceVersion"]
        third = lwsflow(base, timeout=60)
        assert third.returncode == 0 and "succeeded" in third.stdout, third.stdout + third.stderr
        assert env.route()["metadata"]["resourceVersion"] == rv


def test_cli_refuses_ds_blue_green_misuse(env: Env, capsys: pytest.CaptureFixture[str]) -> None:
    kc = ["--kubeconfig", str(env.sim.kubeconfig)]
    assert main(["rollout", "run", "ds/x", "--strategy", "blue-green", *kc]) == 2
    assert "--manifest" in capsys.readouterr().err
    assert main(["rollout", "run", "ds/x", "--strategy", "blue-green", "--auto-budget", "--manifest", "m",
                 *kc]) == 2
    assert "--auto-budget" in capsys.readouterr().err
    # no blue DS, then a blue DS that no InferencePool selects: one line each, nothing created
    bg = ["rollout", "run", "ds/chat", "--strategy", "blue-green", "--manifest", str(env.manifest(GREEN)),
          *kc]
    assert main(bg) == 2
    assert "target: DisaggregatedSet default/chat not found" in capsys.readouterr().err
    env.kube.create(DS, NS, _ds_of(env, BLUE))
    assert main(bg) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert "exactly one InferencePool in default selecting the leader pods of chat; found none" in err, err
    assert env.names(DS) == ["chat"]


# -- the DS part, from its inputs alone ----------------------------------------------------------------


def _ds(name: str = "chat", slices: int = 1, role_names: tuple[str, ...] = DS_ROLES) -> dict[str, Any]:
    roles = [{"name": r, "spec": {"replicas": 2, "leaderWorkerTemplate": {"size": 2, "workerTemplate": {
        "metadata": {"labels": {L.MODEL: "chat", L.ROLE: r, L.DS_NAME: "spoofed"}},
        "spec": {"containers": [{"name": "e", "image": "vllm:2",
                                 "resources": {"limits": {L.GPU_RESOURCE: 4}}}]}}}}} for r in role_names]
    return {"apiVersion": L.DS_API_VERSION, "kind": L.DS_KIND,
            "metadata": {"name": name, "namespace": "ns", "resourceVersion": "7", "uid": "u",
                         "annotations": {"rollout.lwsflow.io/phase": "Succeeded", "keep": "me"}},
            "spec": {"slices": slices, "roles": roles}, "status": {"observedGeneration": 1}}


def test_ds_green_names_objects_and_selectors() -> None:
    m = _ds()
    rev = K.ds_revision(m)
    assert len(rev) == P.REV_LEN and rev == K.ds_revision(_ds())
    assert rev != K.ds_revision(_ds(role_names=("p", "d")))
    green = K.ds_green_side("chat", rev, m)
    assert green == P.Side(f"chat-{rev}", f"chat-{rev}", {}, "ds")
    assert P.Side.from_json(green.to_json()) == green
    assert P.Side.from_json('{"pair":"c","pool":"c","lws":{}}').kind == "pair"  # state from before
    g = K.green_ds(m, green, rev, "ns")
    assert g["metadata"]["name"] == green.pair and g["metadata"]["labels"][L.REVISION] == rev
    assert g["metadata"]["annotations"] == {"keep": "me"} and "status" not in g
    assert "resourceVersion" not in g["metadata"] and "uid" not in g["metadata"]
    # a second blue-green from that green strips its suffix instead of stacking one
    assert K.ds_base_name(green.pair, g) == "chat"
    # the DS controller's labels win over the role's own (lws-semantics §f "Automatic labels")
    assert K.ds_leader_labels(g)["decode"] == {L.MODEL: "chat", L.ROLE: "decode", L.DS_NAME: green.pair,
                                               L.DS_ROLE: "decode"}
    kind = K.DsBlueGreen(None, "ns")  # type: ignore[arg-type]  # the pure methods only
    pool = {"metadata": {"name": "chat"}, "spec": {"selector": {"matchLabels": {L.MODEL: "chat",
                                                                                  L.WORKER_INDEX: "0"}},
                                                     "targetPorts": [{"number": 8000}]}}
    blue = {"": {**m, "metadata": {**m["metadata"], "name": "chat"}}}
    match = kind.narrowed_selector(pool, "chat", blue)
    assert match == {L.MODEL: "chat", L.WORKER_INDEX: "0", L.DS_NAME: "chat"}
    gp = kind.green_pool({**pool, "spec": {**pool["spec"], "selector": {"matchLabels": match}}}, green, rev)
    assert gp["spec"]["selector"]["matchLabels"] == {L.MODEL: "chat", L.WORKER_INDEX: "0",
                                                     L.DS_NAME: green.pair}
    assert gp["spec"]["targetPorts"] == [{"number": 8000}]
    green_leaders = K.ds_leader_labels(g).values()
    blue_leaders = K.ds_leader_labels(blue[""]).values()
    assert all(P.selects(gp, lb) and not P.selects({"spec": {"selector": {"matchLabels": match}}}, lb)
               for lb in green_leaders)
    assert all(P.selects({"spec": {"selector": {"matchLabels": match}}}, lb) and not P.selects(gp, lb)
               for lb in blue_leaders)
    # capacity: every role at replicas x slices groups of its template
    objs = kind.capacity_objs([K.green_ds(_ds(slices=3), green, rev, "ns")])
    assert [(o["metadata"]["name"], o["spec"]["replicas"]) for o in objs] == \
        [(f"{green.pair} role prefill", 6), (f"{green.pair} role decode", 6)]


def test_ds_green_name_must_leave_room_for_child_names() -> None:
    """The DS webhook refuses ``len(ds) + len(role) + 3 + slice digits + 8 + 4 > 63`` (§f
    "Validation"); green's name is refused before anything is written, naming the field."""
    name = "d" * 31
    rev = "abcdef12"
    K.ds_green_side(name, rev, _ds(name))  # green: 40 + "prefill" 7 + 3 + 1 slice digit + 12 = 63
    with pytest.raises(InvalidInput, match="shorten the DisaggregatedSet's name") as e:
        K.ds_green_side(name, rev, _ds(name, slices=11))  # slices 0..10: 2 digits, 64
    assert e.value.field == "target"
