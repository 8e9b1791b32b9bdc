"""ServiceAccount admission in the running cluster: the StatefulSet controller's pods are refused while
their ServiceAccount is missing (upstream docs/examples/tensorrt-llm/lws.yaml names ``tensorrt-sa``,
which no manifest creates)."""

from __future__ import annotations

from lwsflow.sim.cluster import Cluster
from lwsflow.sim.lws_controller import LWS
from tests.sim.sim_helpers import NS, available, counters, make_lws, pod_template


def test_missing_service_account_leaves_the_group_uncreated_until_it_exists(cluster: Cluster):
    """As on a real cluster: the leader StatefulSet exists, its pods are refused by the ServiceAccount
    admission plugin, the StatefulSet controller records FailedCreate (its message quotes the 403)
    and the LWS stays unready; creating the ServiceAccount lets the retry succeed."""
    lws = make_lws("demo", replicas=1, size=2)
    lws["spec"]["leaderWorkerTemplate"]["workerTemplate"] = pod_template()
    lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["serviceAccountName"] = "tensorrt-sa"
    cluster.store.create(LWS, lws)
    cluster.advance(600)
    assert cluster.store.get_raw("statefulsets.apps", NS, "demo") is not None
    assert cluster.store.list("pods", NS)[0] == []
    assert counters(cluster) == (0, 0, 0)
    events = [e for e in cluster.store.list("events", NS)[0] if e["reason"] == "FailedCreate"]
    assert [(e["involvedObject"]["name"], e["type"], e["source"]["component"]) for e in events] == [
        ("demo", "Warning", "statefulset-controller")]
    assert events[0]["message"] == (
        'create Pod demo-0 in StatefulSet demo failed error: pods "demo-0" is forbidden: error looking up '
        'service account default/tensorrt-sa: serviceaccount "tensorrt-sa" not found')
    cluster.store.create("serviceaccounts", {"apiVersion": "v1", "kind": "ServiceAccount",
                                             "metadata": {"name": "tensorrt-sa", "namespace": NS}})
    cluster.run_until(available(), 3600)
    assert counters(cluster) == (1, 1, 1)
