"""Graceful pod deletion (pkg/registry/core/pod CheckGracefulDelete, the kubelet's kill): a deleted pod
is Terminating with ``deletionTimestamp`` and ``deletionGracePeriodSeconds`` until its containers
stopped, then removed; period 0 removes it at once; the StatefulSet controller waits for it."""

from __future__ import annotations

from datetime import UTC, datetime

from lwsflow.sim.cluster import Cluster
from lwsflow.sim.lws_controller import LWS
from lwsflow.sim.store import Store
from tests.sim.sim_helpers import NS, available, make_lws

STS = "statefulsets.apps"


def _epoch(ts: str) -> float:
    return datetime.strptime(ts, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()


def _running(cluster: Cluster, **lws_spec: object) -> None:
    cluster.store.create(LWS, make_lws("demo", replicas=2, size=1, **lws_spec))
    cluster.run_until(available("demo"), 3600)


def test_deleted_pod_is_terminating_until_its_containers_stopped(cluster: Cluster) -> None:
    _running(cluster)
    uid = cluster.store.get("pods", NS, "demo-1")["metadata"]["uid"]
    t0 = cluster.now()
    cluster.delete_pod(NS, "demo-1")
    pod = cluster.store.get("pods", NS, "demo-1")
    assert pod["metadata"]["deletionGracePeriodSeconds"] == 30  # terminationGracePeriodSeconds' default
    assert _epoch(pod["metadata"]["deletionTimestamp"]) == t0 + 30
    stop = cluster.config.timings.container_stop_s
    cluster.advance(stop / 2)
    assert cluster.store.get("pods", NS, "demo-1")["metadata"]["uid"] == uid  # not recreated meanwhile
    cluster.advance(stop / 2)
    pod = cluster.store.try_get("pods", NS, "demo-1")
    assert pod is None or pod["metadata"]["uid"] != uid  # removed, then recreated by its StatefulSet


def test_grace_period_bounds_the_stop_and_zero_removes_at_once(cluster: Cluster) -> None:
    lws = make_lws("demo", replicas=2, size=1)
    lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["terminationGracePeriodSeconds"] = 1
    cluster.config.timings.container_stop_s = 20  # a container slower to stop than its grace period
    cluster.store.create(LWS, lws)
    cluster.run_until(available("demo"), 3600)
    uid = cluster.store.get("pods", NS, "demo-1")["metadata"]["uid"]
    cluster.delete_pod(NS, "demo-1")
    cluster.advance(1)
    assert (cluster.store.try_get("pods", NS, "demo-1") or {"metadata": {}})["metadata"].get("uid") != uid
    uid = cluster.store.get("pods", NS, "demo-0")["metadata"]["uid"]
    cluster.delete_pod(NS, "demo-0", grace_period=0)  # kubectl delete --grace-period=0 --force
    assert (cluster.store.try_get("pods", NS, "demo-0") or {"metadata": {}})["metadata"].get("uid") != uid


def test_a_second_delete_only_shortens_the_period(cluster: Cluster) -> None:
    _running(cluster)
    cluster.store.delete("pods", NS, "demo-1", grace_period=60)
    first = cluster.store.get("pods", NS, "demo-1")["metadata"]
    assert first["deletionGracePeriodSeconds"] == 60
    cluster.store.delete("pods", NS, "demo-1", grace_period=90)  # longer: ignored
    again = cluster.store.get("pods", NS, "demo-1")["metadata"]
    assert again["deletionTimestamp"] == first["deletionTimestamp"]
    cluster.store.delete("pods", NS, "demo-1", grace_period=0)
    gone = cluster.store.try_get("pods", NS, "demo-1") or {"metadata": {}}
    assert gone["metadata"].get("uid") != first["uid"]


def test_unscheduled_pod_goes_at_once() -> None:
    store = Store(now=lambda: 0.0)
    store.create("pods", {"metadata": {"name": "p", "namespace": NS},
                          "spec": {"containers": [{"name": "c", "image": "x"}]}})
    store.delete("pods", NS, "p")
    assert store.try_get("pods", NS, "p") is None  # no node holds it: nothing to wait for


def test_statefulset_waits_for_the_terminating_pod_and_counts_it_as_neither_current_nor_updated(
        cluster: Cluster) -> None:
    """updateStatefulSet: an ordinal whose pod is terminating is recreated only once it is gone;
    computeReplicaStatus counts the terminating pod in replicas (and readyReplicas while it is Ready),
    never in currentReplicas or updatedReplicas."""
    _running(cluster)
    cluster.delete_pod(NS, "demo-1")
    cluster.advance(0.5)
    status = cluster.store.get(STS, NS, "demo")["status"]
    assert status["replicas"] == 2 and status["readyReplicas"] == 2
    assert status["currentReplicas"] == 1 and status["updatedReplicas"] == 1
    pods = [p for p in cluster.store.list("pods", NS)[0] if p["metadata"]["name"] == "demo-1"]
    assert len(pods) == 1 and pods[0]["metadata"]["deletionTimestamp"]
    cluster.run_until(available("demo"), 3600)


def test_scaled_away_pods_count_in_replicas_until_gone(cluster: Cluster) -> None:
    _running(cluster)
    cluster.store.mutate(LWS, NS, "demo", lambda o: o["spec"].__setitem__("replicas", 1))
    cluster.advance(0.5)
    status = cluster.store.get(STS, NS, "demo")["status"]
    assert cluster.store.get("pods", NS, "demo-1")["metadata"]["deletionTimestamp"]
    assert status["replicas"] == 2 and status["updatedReplicas"] == 1  # terminating: present, not updated
    cluster.advance(cluster.config.timings.container_stop_s)
    assert cluster.store.try_get("pods", NS, "demo-1") is None
    assert cluster.store.get(STS, NS, "demo")["status"]["replicas"] == 1
