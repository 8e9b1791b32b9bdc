"""The StatefulSet controller's ControllerRevisions: one per template, numbered, named as the pods'
``controller-revision-hash`` and the status revisions, a template that comes back renumbered, and
history beyond ``revisionHistoryLimit`` dropped."""

from __future__ import annotations

from lwsflow.sim.cluster import Cluster
from lwsflow.sim.lws_controller import LWS
from lwsflow.sim.sts_revisions import HASH_LABEL
from tests.sim.sim_helpers import NS, available, make_lws, set_image

STS = "statefulsets.apps"


def _sts_revisions(c: Cluster, sts: str = "demo") -> dict[str, int]:
    uid = c.store.get(STS, NS, sts)["metadata"]["uid"]
    return {r["metadata"]["name"]: r["revision"] for r in c.store.list("controllerrevisions.apps", NS)[0]
            if r["metadata"]["ownerReferences"][0]["uid"] == uid}


def test_revisions_follow_the_template_and_match_pods_and_status(cluster: Cluster) -> None:
    cluster.store.create(LWS, make_lws("demo", replicas=2, size=1))
    cluster.run_until(available("demo"), 3600)
    first = cluster.store.get(STS, NS, "demo")["status"]["updateRevision"]
    assert _sts_revisions(cluster) == {first: 1}
    cr = cluster.store.get("controllerrevisions.apps", NS, first)
    assert cr["metadata"]["labels"][HASH_LABEL] == first.rsplit("-", 1)[1]
    assert cr["metadata"]["labels"]["leaderworkerset.sigs.k8s.io/name"] == "demo"  # the template's labels
    assert cr["data"]["spec"]["template"]["$patch"] == "replace"
    # newRevision copies the StatefulSet's annotations (the leader's replicas one here)
    assert cr["metadata"]["annotations"] == cluster.store.get(STS, NS, "demo")["metadata"]["annotations"]
    assert cr["metadata"]["annotations"]["leaderworkerset.sigs.k8s.io/replicas"] == "2"
    assert cr["data"]["spec"]["template"]["spec"]["containers"][0]["image"] == "vllm:v1"
    set_image(cluster, "demo", "vllm:v2")
    cluster.run_until(lambda c: available("demo")(c) and c.store.get(STS, NS, "demo")["status"].get(
        "updatedReplicas") == 2, 7200)
    status = cluster.store.get(STS, NS, "demo")["status"]
    second = status["updateRevision"]
    assert status["currentRevision"] == second != first
    assert _sts_revisions(cluster) == {first: 1, second: 2}
    hashes = {p["metadata"]["labels"]["controller-revision-hash"] for p in cluster.store.list("pods", NS)[0]}
    assert hashes == {second}
    set_image(cluster, "demo", "vllm:v1")  # back to the first template: its revision, renumbered
    cluster.settle()
    assert _sts_revisions(cluster) == {first: 3, second: 2}


def test_history_beyond_the_limit_goes(cluster: Cluster) -> None:
    cluster.store.create("statefulsets.apps", {"metadata": {"name": "web", "namespace": NS}, "spec": {
        "replicas": 0, "revisionHistoryLimit": 1, "selector": {"matchLabels": {"app": "web"}},
        "template": {"metadata": {"labels": {"app": "web"}},
                     "spec": {"containers": [{"name": "c", "image": "nginx:1"}]}}}})
    for tag in range(2, 5):
        cluster.settle()
        cluster.store.mutate(STS, NS, "web", lambda s, t=tag: s["spec"]["template"]["spec"]["containers"][0]
                             .__setitem__("image", f"nginx:{t}"))
    cluster.settle()
    # the update revision (current too: zero replicas are all updated) plus one of history
    assert sorted(_sts_revisions(cluster, "web").values()) == [3, 4]
