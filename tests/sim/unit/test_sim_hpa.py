"""The HPA status kube-controller-manager writes without a metrics API (as on the reference cluster,
Kubernetes 1.36): the target's scale is read, the metrics are not, nothing is scaled."""

from __future__ import annotations

from lwsflow.sim.cluster import Cluster
from lwsflow.sim.lws_controller import LWS
from tests.sim.sim_helpers import NS, available, make_lws

HPA = "horizontalpodautoscalers.autoscaling"
NO_METRICS = ("failed to get cpu utilization: unable to get metrics for resource cpu: unable to fetch "
              "metrics from resource metrics API: the server could not find the requested resource "
              "(get pods.metrics.k8s.io)")


def _hpa(name: str, target: str) -> dict:
    return {"metadata": {"name": name, "namespace": NS}, "spec": {
        "scaleTargetRef": {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
                           "name": target},
        "maxReplicas": 4, "metrics": [{"type": "Resource", "resource": {
            "name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}}}]}}


def test_hpa_without_metrics_api_is_able_to_scale_but_not_active(cluster: Cluster) -> None:
    cluster.store.create(LWS, make_lws("demo", replicas=2, size=1))
    cluster.store.create(HPA, _hpa("demo", "demo"))
    cluster.run_until(available("demo"), 3600)
    status = cluster.store.get(HPA, NS, "demo")["status"]
    conds = {c["type"]: c for c in status["conditions"]}
    assert (conds["AbleToScale"]["status"], conds["AbleToScale"]["reason"]) == ("True", "SucceededGetScale")
    active = conds["ScalingActive"]
    assert (active["status"], active["reason"]) == ("False", "FailedGetResourceMetric")
    assert active["message"] == f"the HPA was unable to compute the replica count: {NO_METRICS}"
    assert status["currentMetrics"] == [{"type": ""}]
    assert status["currentReplicas"] == 2 and status["desiredReplicas"] == 0
    events = {e["reason"]: e for e in cluster.store.list("events", NS)[0]
              if e["involvedObject"]["kind"] == "HorizontalPodAutoscaler"}
    assert events["FailedGetResourceMetric"]["message"] == NO_METRICS
    assert events["FailedComputeMetricsReplicas"]["type"] == "Warning"
    assert cluster.store.get(LWS, NS, "demo")["spec"]["replicas"] == 2  # nothing scales it


def test_hpa_with_a_missing_target_cannot_get_its_scale(cluster: Cluster) -> None:
    cluster.store.create(HPA, _hpa("orphan", "missing"))
    cluster.settle()
    status = cluster.store.get(HPA, NS, "orphan")["status"]
    [cond] = status["conditions"]
    assert (cond["type"], cond["status"], cond["reason"]) == ("AbleToScale", "False", "FailedGetScale")
    assert cond["message"] == ("the HPA controller was unable to get the target's current scale: "
                               'leaderworkersets.leaderworkerset.x-k8s.io "missing" not found')
    assert status["currentMetrics"] is None and "currentReplicas" not in status
    cluster.store.create(LWS, make_lws("missing", replicas=1, size=1))  # the target appears
    cluster.settle()
    assert cluster.store.get(HPA, NS, "orphan")["status"]["conditions"][0]["status"] == "True"
