"""§f DisaggregatedSet in the running cluster: child LWS, coordinated rollout, status."""

from __future__ import annotations

from lwsflow.controller.api import labels as L
from lwsflow.sim.cluster import Cluster
from lwsflow.sim.ds_controller import DS, revision_hash
from lwsflow.sim.lws_controller import LWS
from tests.sim.sim_helpers import NS, make_ds, pod_template, small_config


def _children(c: Cluster) -> dict[str, dict]:
    return {o["metadata"]["name"]: o for o in c.store.iter_raw(LWS)}


def _ds_available(c: Cluster) -> bool:
    ds = c.store.get_raw(DS, NS, "pd")
    conds = {x["type"]: x["status"] for x in (ds.get("status") or {}).get("conditions") or []}
    return conds.get("Available") == "True" and \
        ds["status"]["observedGeneration"] == ds["metadata"]["generation"]


def test_child_lws_names_labels_and_status():
    """§f child LWS <ds>-<slice>-<rev8>-<role> with the automatic labels; roleStatuses; Available."""
    c = Cluster(small_config(nodes=12, domains=1))
    c.store.create(DS, make_ds(prefill=3, decode=1))
    c.settle()
    ds = c.store.get(DS, NS, "pd")
    rev = revision_hash(ds["spec"]["roles"])
    assert sorted(_children(c)) == [f"pd-0-{rev}-decode", f"pd-0-{rev}-prefill"]
    child = c.store.get(LWS, NS, f"pd-0-{rev}-prefill")
    auto = {"app": "pd-0-prefill", L.DS_NAME: "pd", L.DS_ROLE: "prefill", L.DS_SLICE: "0", L.DS_REVISION: rev}
    assert auto.items() <= child["metadata"]["labels"].items()
    tlabels = child["spec"]["leaderWorkerTemplate"]["workerTemplate"]["metadata"]["labels"]
    assert auto.items() <= tlabels.items()
    # created through the API upstream, so the CRD's and the LWS webhook's defaults are there
    assert child["spec"]["networkConfig"] == {"subdomainPolicy": "Shared"}
    assert child["spec"]["rolloutStrategy"]["type"] == "RollingUpdate"
    assert child["spec"]["startupPolicy"] == "LeaderCreated"
    assert child["spec"]["leaderWorkerTemplate"]["restartPolicy"] == "RecreateGroupOnPodRestart"
    assert child["metadata"]["ownerReferences"][0]["kind"] == "DisaggregatedSet"
    conds = {x["type"]: x["status"] for x in ds["status"]["conditions"]}
    assert conds == {"Available": "False", "Progressing": "True"}
    c.run_until(_ds_available, 3600)
    ds = c.store.get(DS, NS, "pd")
    assert ds["status"]["roleStatuses"] == [
        {"name": "prefill", "replicas": 3, "readyReplicas": 3, "updatedReplicas": 3},
        {"name": "decode", "replicas": 1, "readyReplicas": 1, "updatedReplicas": 1}]
    assert {x["type"]: x["reason"] for x in ds["status"]["conditions"]}["Available"] == "AllRolesReady"
    # per-role Services of the ready revision
    assert c.store.get("services", NS, f"pd-0-{rev}-decode-prv")["spec"]["selector"][L.DS_ROLE] == "decode"


def test_rollout_6_2_follows_planner_steps_exactly():
    """§f coordinated update 6:2 prefill:decode, default (surge 1, unavailable 0): the 12 steps of
    upstream medium_6_2_surge1, new readiness gating each step, old revision deleted at the end."""
    c = Cluster(small_config(nodes=12, domains=1))
    c.store.create(DS, make_ds(prefill=6, decode=2))
    c.run_until(_ds_available, 3600)
    old_rev = next(iter(_children(c).values()))["metadata"]["labels"][L.DS_REVISION]

    def bump(o: dict) -> None:
        for role in o["spec"]["roles"]:
            role["spec"]["leaderWorkerTemplate"]["workerTemplate"] = pod_template("vllm:v2")
    c.store.mutate(DS, NS, "pd", bump)
    c.settle()
    new_rev = revision_hash(c.store.get(DS, NS, "pd")["spec"]["roles"])
    olds = [o for o in _children(c).values() if o["metadata"]["labels"][L.DS_REVISION] == old_rev]
    assert sorted(o["metadata"]["annotations"][L.DS_INITIAL_REPLICAS] for o in olds) == ["2", "6"]
    assert c.store.get(LWS, NS, f"pd-0-{new_rev}-prefill")["spec"]["replicas"] == 1  # first step applied
    max_total = {"prefill": 0, "decode": 0}

    def done(cl: Cluster) -> bool:
        for role in max_total:
            total = sum(o["spec"]["replicas"] for o in cl.store.iter_raw(LWS)
                        if o["metadata"]["labels"][L.DS_ROLE] == role)
            max_total[role] = max(max_total[role], total)
        return _ds_available(cl) and all(
            o["metadata"]["labels"][L.DS_REVISION] == new_rev for o in cl.store.iter_raw(LWS))
    c.run_until(done, 24 * 3600)
    assert c.ds.steps[(NS, "pd", 0)] == [
        ((6, 2), (0, 0)), ((6, 2), (1, 1)), ((5, 2), (1, 1)), ((5, 2), (2, 1)), ((4, 2), (2, 1)),
        ((4, 2), (3, 1)), ((3, 1), (3, 1)), ((3, 1), (4, 2)), ((2, 1), (4, 2)), ((2, 1), (5, 2)),
        ((1, 1), (5, 2)), ((1, 1), (6, 2)), ((0, 0), (6, 2))]
    assert max_total == {"prefill": 7, "decode": 3}  # old + new <= target + maxSurge on every step
    assert sorted(_children(c)) == [f"pd-0-{new_rev}-decode", f"pd-0-{new_rev}-prefill"]
    ds = c.store.get(DS, NS, "pd")
    assert [r["updatedReplicas"] for r in ds["status"]["roleStatuses"]] == [6, 2]
    svcs = sorted(x["metadata"]["name"] for x in c.store.list("services", NS)[0]
                  if x["metadata"]["name"].endswith("-prv"))
    assert svcs == [f"pd-0-{new_rev}-decode-prv", f"pd-0-{new_rev}-prefill-prv"]  # old revision's went


def test_scaling_without_template_change_only_scales():
    """§f: replicas and slices are not part of the revision: children are scaled or added, not rolled."""
    c = Cluster(small_config(nodes=16, domains=1))
    c.store.create(DS, make_ds(prefill=2, decode=1))
    c.run_until(_ds_available, 3600)
    before = {n: o["metadata"]["uid"] for n, o in _children(c).items()}

    def grow(o: dict) -> None:
        o["spec"]["roles"][0]["spec"]["replicas"] = 3
        o["spec"]["slices"] = 2
    c.store.mutate(DS, NS, "pd", grow)
    c.run_until(_ds_available, 3600)
    after = _children(c)
    assert all(after[n]["metadata"]["uid"] == uid for n, uid in before.items())
    assert len(after) == 4 and sum(o["spec"]["replicas"] for o in after.values()) == 8
    ds = c.store.get(DS, NS, "pd")
    assert ds["status"]["roleStatuses"][0]["readyReplicas"] == 6
    c.store.mutate(DS, NS, "pd", lambda o: o["spec"].__setitem__("slices", 1))  # slice 1 goes away
    c.run_until(_ds_available, 3600)
    assert {o["metadata"]["labels"][L.DS_SLICE] for o in _children(c).values()} == {"0"}
    prv = [x for x in c.store.list("services", NS)[0] if x["metadata"]["name"].endswith("-prv")]
    assert {x["metadata"]["labels"][L.DS_SLICE] for x in prv} == {"0"}


SCALER = "disaggregatedsetrolescalers.disaggregatedset.x-k8s.io"


def test_external_role_follows_its_scaler():
    """§f scaling.mode External: replicas come from DisaggregatedSetRoleScaler <ds>-<role> (fresh
    role seeded with 1; a role switched from Static seeded with its current total); status.selector
    picks the role's leaders and status.replicas sums the child LWS."""
    c = Cluster(small_config(nodes=12, domains=1))
    ds = make_ds(prefill=2, decode=5)
    ds["spec"]["roles"][1]["scaling"] = {"mode": "External"}
    c.store.create(DS, ds)
    c.run_until(_ds_available, 3600)
    sc = c.store.get(SCALER, NS, "pd-decode")
    assert sc["spec"]["replicas"] == 1 and sc["status"]["replicas"] == 1
    assert sc["status"]["selector"] == (f"{L.DS_NAME}=pd,{L.DS_ROLE}=decode,"
                                        "leaderworkerset.sigs.k8s.io/worker-index=0")
    c.store.mutate(SCALER, NS, "pd-decode", lambda o: o["spec"].__setitem__("replicas", 3))
    c.run_until(lambda cl: _ds_available(cl) and cl.store.get_raw(SCALER, NS, "pd-decode")["status"]
                ["replicas"] == 3, 3600)
    assert c.store.get(DS, NS, "pd")["status"]["roleStatuses"][1]["readyReplicas"] == 3
    # prefill switches Static -> External: its scaler starts at the current total (2)
    c.store.mutate(DS, NS, "pd", lambda o: o["spec"]["roles"][0].__setitem__("scaling", {"mode": "External"}))
    c.settle()
    assert c.store.get(SCALER, NS, "pd-prefill")["spec"]["replicas"] == 2
