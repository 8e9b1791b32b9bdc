"""§a: ``volumeClaimTemplates`` and ``persistentVolumeClaimRetentionPolicy`` are copied to the leader
and the worker StatefulSets (leaderworkerset_controller.go, pod_controller.go), and the StatefulSet
controller makes a claim ``<template>-<pod>`` per pod, mounts it, and deletes claims per the policy
through owner references (kube stateful_set_utils.go ``updateClaimOwnerRefForSetAndPod``). Issue 12
item 2."""

from __future__ import annotations

from lwsflow.sim.cluster import Cluster
from lwsflow.sim.lws_controller import LWS
from tests.sim.sim_helpers import NS, available, make_lws

STS, PVC = "statefulsets.apps", "persistentvolumeclaims"
TEMPLATE = {"metadata": {"name": "cache", "labels": {"tier": "scratch"}},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "10Gi"}}}}


def _lws(policy: dict | None, replicas: int = 2) -> dict:
    lws = make_lws("demo", replicas=replicas, size=2)
    lwt = lws["spec"]["leaderWorkerTemplate"]
    lwt["workerTemplate"]["spec"]["containers"][0]["volumeMounts"] = [{"name": "cache", "mountPath": "/c"}]
    lwt["volumeClaimTemplates"] = [TEMPLATE]
    if policy is not None:
        lwt["persistentVolumeClaimRetentionPolicy"] = policy
    return lws


def _claims(c: Cluster) -> dict[str, dict]:
    return {p["metadata"]["name"]: p for p in c.store.list(PVC, NS)[0]}


def _scale(c: Cluster, replicas: int) -> None:
    c.store.mutate(LWS, NS, "demo", lambda o: o["spec"].__setitem__("replicas", replicas))


def test_templates_and_policy_reach_both_statefulsets_and_claims_are_bound_and_mounted(cluster: Cluster):
    policy = {"whenDeleted": "Delete", "whenScaled": "Retain"}
    cluster.store.create(LWS, _lws(policy))
    cluster.run_until(available("demo"), 3600)
    for sts in ("demo", "demo-0", "demo-1"):
        spec = cluster.store.get(STS, NS, sts)["spec"]
        # with the API server's defaults of a claim (SetDefaults_PersistentVolumeClaim)
        assert spec["volumeClaimTemplates"] == [{**TEMPLATE, "status": {"phase": "Pending"},
                                                 "spec": {**TEMPLATE["spec"], "volumeMode": "Filesystem"}}]
        assert spec["persistentVolumeClaimRetentionPolicy"] == policy
    claims = _claims(cluster)
    assert sorted(claims) == ["cache-demo-0", "cache-demo-0-1", "cache-demo-1", "cache-demo-1-1"]
    for pod_name in ("demo-0", "demo-0-1", "demo-1", "demo-1-1"):
        claim = claims[f"cache-{pod_name}"]
        assert claim["status"] == {"phase": "Bound", "accessModes": ["ReadWriteOnce"],
                                   "capacity": {"storage": "10Gi"}}
        assert claim["spec"]["volumeMode"] == "Filesystem"
        owner_sts = cluster.store.get(STS, NS, "demo" if pod_name.count("-") == 1 else pod_name[:-2])
        # labels: the template's plus the set's selector; whenDeleted Delete: the set is its controller
        assert claim["metadata"]["labels"] == {"tier": "scratch",
                                               **owner_sts["spec"]["selector"]["matchLabels"]}
        assert claim["metadata"]["ownerReferences"] == [{
            "apiVersion": "apps/v1", "kind": "StatefulSet", "name": owner_sts["metadata"]["name"],
            "uid": owner_sts["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}]
        pod = cluster.store.get("pods", NS, pod_name)
        assert pod["spec"]["volumes"][0] == {"name": "cache",
                                             "persistentVolumeClaim": {"claimName": f"cache-{pod_name}"}}
    # scale-down with whenScaled Retain: the leader's claim stays (still owned by the set); the
    # worker set went with its leader pod (whenDeleted Delete), so the worker's claim went too
    _scale(cluster, 1)
    cluster.run_until(available("demo"), 3600)
    assert sorted(_claims(cluster)) == ["cache-demo-0", "cache-demo-0-1", "cache-demo-1"]
    cluster.store.delete(LWS, NS, "demo")
    # whenDeleted Delete: the claims go once their pods have terminated and their sets are gone
    cluster.run_until(lambda c: not _claims(c), 60)


def test_default_retain_keeps_claims_and_a_new_lws_reuses_them(cluster: Cluster):
    cluster.store.create(LWS, _lws(None))
    cluster.run_until(available("demo"), 3600)
    uids = {n: c["metadata"]["uid"] for n, c in _claims(cluster).items()}
    assert all("ownerReferences" not in c["metadata"] for c in _claims(cluster).values())
    _scale(cluster, 1)
    cluster.run_until(available("demo"), 3600)
    cluster.store.delete(LWS, NS, "demo")
    cluster.settle()
    assert {n: c["metadata"]["uid"] for n, c in _claims(cluster).items()} == uids
    cluster.store.create(LWS, _lws(None))
    cluster.run_until(available("demo"), 3600)
    assert {n: c["metadata"]["uid"] for n, c in _claims(cluster).items()} == uids


def test_when_scaled_delete_removes_the_scaled_away_leader_claim(cluster: Cluster):
    """whenScaled Delete: the claim of a scaled-away ordinal is handed to its pod and goes with it;
    whenDeleted Retain: the worker set deleted with its leader leaves the worker's claim."""
    cluster.store.create(LWS, _lws({"whenDeleted": "Retain", "whenScaled": "Delete"}))
    cluster.run_until(available("demo"), 3600)
    assert all("ownerReferences" not in c["metadata"] for c in _claims(cluster).values())
    _scale(cluster, 1)
    cluster.run_until(available("demo"), 3600)
    assert sorted(_claims(cluster)) == ["cache-demo-0", "cache-demo-0-1", "cache-demo-1-1"]
