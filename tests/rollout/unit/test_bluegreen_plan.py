"""The blue-green planner (controller/bluegreen/plan.py) from its inputs alone: weight stages,
green names and objects, the route's backendRefs at each weight, the persisted state and the next step
(llm-d's P/D upgrade: a new InferencePool per revision, traffic moved by HTTPRoute weights)."""

from __future__ import annotations

import pytest

from lwsflow.controller.api import labels as L
from lwsflow.controller.bluegreen import plan as P
from lwsflow.controller.errors import InvalidInput
from lwsflow.controller.rollout import capacity

REF = {"group": "inference.networking.k8s.io", "kind": "InferencePool"}


def _lws(role: str, pair: str = "chat", image: str = "vllm:1", gpus: int = 0, replicas: int = 2) -> dict:
    labels = {L.MODEL: "chat", L.PD_PAIR: pair, L.ROLE: role}
    c: dict = {"name": "engine", "image": image}
    if gpus:
        c["resources"] = {"limits": {L.GPU_RESOURCE: gpus}}
    return {"apiVersion": L.LWS_API_VERSION, "kind": L.LWS_KIND,
            "metadata": {"name": f"{pair}-{role}", "namespace": "ns", "labels": dict(labels),
                         "resourceVersion": "9", "annotations": {"rollout.lwsflow.io/phase": "Succeeded",
                                                                  "keep": "me"}},
            "spec": {"replicas": replicas,
                     "rolloutStrategy": {"rollingUpdateConfiguration": {"partition": 2}},
                     "leaderWorkerTemplate": {"size": 1, "workerTemplate": {
                         "metadata": {"labels": dict(labels)}, "spec": {"containers": [c]}}}},
            "status": {"replicas": 2}}


def _pool(name: str = "chat") -> dict:
    return {"apiVersion": "inference.networking.k8s.io/v1", "kind": "InferencePool",
            "metadata": {"name": name, "namespace": "ns"},
            "spec": {"selector": {"matchLabels": {L.MODEL: "chat", L.WORKER_INDEX: "0"}},
                     "targetPorts": [{"number": 8000}],
                     "endpointPickerRef": {"name": "chat-epp", "port": {"number": 9002}}}}


def _route() -> dict:
    return {"metadata": {"name": "chat", "namespace": "ns", "resourceVersion": "5"},
            "spec": {"rules": [{"backendRefs": [{**REF, "name": "chat", "weight": 100}]},
                               {"backendRefs": [{"kind": "Service", "name": "other", "weight": 1}]}]}}


def test_weights_rise_to_100() -> None:
    assert P.parse_weights("10,50,100") == [10, 50, 100]
    assert P.parse_weights("25%, 100%") == [25, 100]
    for bad, says in [("50,10,100", "must rise"), ("10,50", "must be 100"), ("0,100", "1..100"),
                      ("x", "1..100"), ("10,150", "1..100")]:
        with pytest.raises(InvalidInput, match=says) as e:
            P.parse_weights(bad)
        assert e.value.field == "weights"


def test_green_names_objects_and_selectors() -> None:
    manifests = {r: _lws(r, image="vllm:2") for r in P.ROLES}
    rev = P.revision_of(manifests)
    assert len(rev) == P.REV_LEN and rev == P.revision_of({r: _lws(r, image="vllm:2") for r in P.ROLES})
    assert rev != P.revision_of({r: _lws(r, image="vllm:3") for r in P.ROLES})
    blue = {r: _lws(r) for r in P.ROLES}
    green = P.green_side(P.base_name("chat", blue), rev)
    assert green == P.Side(f"chat-{rev}", f"chat-{rev}", {r: f"chat-{rev}-{r}" for r in P.ROLES})
    # a second blue-green from that green strips its suffix instead of stacking one
    again = {r: P.green_lws(manifests[r], green, r, rev, "ns") for r in P.ROLES}
    assert P.base_name(green.pair, again) == "chat"
    g = again["decode"]
    assert g["metadata"]["name"] == f"chat-{rev}-decode" and "status" not in g
    assert g["metadata"]["annotations"] == {"keep": "me"}  # no rollout state carried over
    assert "resourceVersion" not in g["metadata"]
    assert g["spec"]["rolloutStrategy"]["rollingUpdateConfiguration"]["partition"] == 0
    pod = P.pod_labels(g)
    assert pod[L.PD_PAIR] == green.pair and pod[L.REVISION] == rev and pod[L.MODEL] == "chat"
    gp = P.green_pool(_pool(), green, rev, "ns")
    assert gp["spec"]["selector"]["matchLabels"] == {L.MODEL: "chat", L.WORKER_INDEX: "0",
                                                     L.PD_PAIR: green.pair, L.REVISION: rev}
    assert P.selects(gp, pod) and not P.selects(gp, P.pod_labels(blue["decode"]))
    # the blue pool takes the green pods too until it is narrowed to the blue pair
    assert P.selects(_pool(), pod)
    match = P.narrowed_blue_selector(_pool(), "chat", blue)
    narrowed = {**_pool(), "spec": {"selector": {"matchLabels": match}}}
    assert P.selects(narrowed, P.pod_labels(blue["prefill"])) and not P.selects(narrowed, pod)
    unlabelled = _lws("decode")
    del unlabelled["spec"]["leaderWorkerTemplate"]["workerTemplate"]["metadata"]["labels"][L.PD_PAIR]
    with pytest.raises(InvalidInput, match=r"carry no lwsflow\.io/pd-pair=chat"):
        P.narrowed_blue_selector(_pool(), "chat", {"decode": unlabelled, "prefill": blue["prefill"]})
    with pytest.raises(InvalidInput, match="63 characters"):
        P.green_side("x" * 60, rev)


def test_route_rules_at_each_weight() -> None:
    route = _route()
    at0 = P.rules_with(route, "chat", "green", 0)
    assert at0[0]["backendRefs"] == [{**REF, "name": "chat", "weight": 100},
                                     {**REF, "name": "green", "weight": 0}]
    assert at0[1] == route["spec"]["rules"][1]  # a rule without either pool is left alone
    route["spec"]["rules"] = at0
    at10 = P.rules_with(route, "chat", "green", 10)
    assert [r["weight"] for r in at10[0]["backendRefs"]] == [90, 10]
    assert P.green_weight_of({"spec": {"rules": at10}}, "green") == 10
    end = P.rules_with({"spec": {"rules": at10}}, "chat", "green", 100, drop_blue=True)
    assert end[0]["backendRefs"] == [{**REF, "name": "green", "weight": 100}]
    back = P.rules_with({"spec": {"rules": at10}}, "chat", "green", None)
    assert back[0]["backendRefs"] == [{**REF, "name": "chat", "weight": 100}]
    assert P.green_weight_of({"spec": {"rules": back}}, "green") is None
    assert P.references(_route(), "chat") and not P.references(_route(), "green")


def test_state_round_trips_on_the_route_with_its_precondition() -> None:
    st = P.BlueGreenState("id1", P.SHIFTING, P.Side("chat", "chat", {"decode": "chat-decode"}),
                          P.Side("chat-ab", "chat-ab", {"decode": "chat-ab-decode"}), [10, 100], 0, 0,
                          "h", "", 12.5, 30.0, 600.0)
    patch = P.route_patch(_route(), st, [])
    assert patch["metadata"]["resourceVersion"] == "5" and patch["spec"] == {"rules": []}
    back = P.BlueGreenState.from_route({"metadata": {"annotations": patch["metadata"]["annotations"]}})
    assert back == st and back.active
    assert not P.BlueGreenState.from_route(_route()).active


@pytest.mark.parametrize(("phase", "stage", "passed", "n", "want"), [
    (P.STARTING, -1, 0, 3, P.Action("await-green")),
    (P.SHIFTING, 0, 0, 3, P.Action("check", 0)),       # weights written, checks not passed: check again
    (P.SHIFTING, 1, 1, 3, P.Action("check", 1)),
    (P.SHIFTING, 0, 1, 3, P.Action("shift", 1)),       # passed, next weights not written yet
    (P.SHIFTING, 2, 3, 3, P.Action("finish")),
    (P.FINISHING, 2, 3, 3, P.Action("finish")),        # blue deletes interrupted: delete again
    (P.ROLLING_BACK, 1, 1, 3, P.Action("rollback")),
    (P.SUCCEEDED, 2, 3, 3, P.Action("report")),
    (P.ROLLED_BACK, 0, 0, 3, P.Action("report")),
])
def test_next_action(phase: str, stage: int, passed: int, n: int, want: P.Action) -> None:
    st = P.BlueGreenState("i", phase, None, None, [10 * (k + 1) for k in range(n - 1)] + [100], stage, passed)
    assert P.next_action(st) == want


def test_capacity_beside_names_missing_gpus_per_pool() -> None:
    node = {"metadata": {"name": "n1", "labels": {L.NODE_POOL: "h100"}},
            "status": {"allocatable": {L.GPU_RESOURCE: "8"}}}
    running = [{"metadata": {"name": f"p{i}"}, "spec": {"nodeName": "n1", "containers": [
        {"resources": {"limits": {L.GPU_RESOURCE: 2}}}]}, "status": {"phase": "Running"}} for i in range(2)]
    green = [_lws("decode", gpus=2), _lws("prefill", gpus=2)]
    for o in green:
        o["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["nodeSelector"] = {L.NODE_POOL: "h100"}
    rep = capacity.check_beside(green, [node], running)  # 4 free: decode's 2 groups fit, prefill's do not
    assert not rep.fits and rep.missing == {"pool h100": 4}
    assert "missing 4 GPUs in pool h100" in rep.message and "0 of 2 group(s)" in rep.message
    assert capacity.check_beside(green, [node], []).fits


def test_rollout_policy_strategy_field() -> None:
    """A RolloutPolicy chooses the strategy; blue-green stages carry weights, partition stages groups."""
    from pydantic import ValidationError

    from lwsflow.controller.policy.model import RolloutPolicySpec

    pair = {"kind": "LeaderWorkerSetPair", "name": "chat"}
    spec = RolloutPolicySpec.model_validate({"targetRef": pair, "strategy": "blue-green",
                                             "stages": [{"weight": 10}, {"weight": 50, "bake": "5m"},
                                                        {"weight": 100}]})
    assert spec.stages_text() == "10,50,100"
    assert RolloutPolicySpec.model_validate({"targetRef": pair, "stages": [{"groups": "100%"}]}).strategy == \
        "partition"
    for doc, says in [
        ({"targetRef": pair, "strategy": "blue-green", "stages": [{"weight": 50}, {"weight": 10}]}, "rise"),
        ({"targetRef": pair, "strategy": "blue-green", "stages": [{"groups": "100%"}]}, "sets weight"),
        ({"targetRef": pair, "stages": [{"weight": 100}]}, "sets groups"),
        ({"targetRef": {"kind": "LeaderWorkerSet", "name": "x"}, "strategy": "blue-green",
          "stages": [{"weight": 100}]}, "LeaderWorkerSetPair"),
        ({"targetRef": pair, "strategy": "canary", "stages": [{"groups": "100%"}]}, "strategy"),
    ]:
        with pytest.raises(ValidationError, match=says):
            RolloutPolicySpec.model_validate(doc)
