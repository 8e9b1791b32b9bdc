"""Gang placement, exclusive topology and node scoring of the embedded scheduler."""

from __future__ import annotations

import pytest

from lwsflow.controller.api import labels as L
from lwsflow.sim.cluster import Cluster
from lwsflow.sim.faults import Fault, inject
from lwsflow.sim.lws_controller import LWS
from tests.sim.sim_helpers import GPU_TOLERATION, NS, TOPO, available, make_lws, small_config


def _node(c: Cluster, pod: str) -> str | None:
    return c.store.get("pods", NS, pod)["spec"].get("nodeName")


def test_gang_places_all_pods_of_a_group_or_none():
    """A group that does not fit entirely gets no node at all (and a FailedScheduling event)."""
    c = Cluster(small_config(nodes=4, domains=1))
    c.store.create(LWS, make_lws("hog", replicas=1, size=1))
    c.settle()
    c.store.create(LWS, make_lws("demo", replicas=2, size=2))
    c.advance(600)
    scheduled = {p: _node(c, p) for p in ("demo-0", "demo-0-1", "demo-1", "demo-1-1")}
    placed = [p for p, n in scheduled.items() if n]
    assert placed in (["demo-0", "demo-0-1"], ["demo-1", "demo-1-1"])  # one whole group, not 3 pods
    stuck = "demo-1" if "demo-0" in placed else "demo-0"
    ev = [e for e in c.store.list("events", NS)[0] if e["reason"] == "FailedScheduling"]
    # the stuck leader and its held worker both get kube-scheduler's Warning
    assert {e["involvedObject"]["name"] for e in ev} == {stuck, f"{stuck}-1"}
    assert {e["type"] for e in ev} == {"Warning"}
    c.store.delete(LWS, NS, "hog")  # capacity comes back: the whole group schedules
    c.run_until(available("demo"), 3600)
    assert len({_node(c, p) for p in scheduled}) == 4


def test_exclusive_topology_one_group_per_domain():
    """§a exclusive-topology: each group in one domain, no two groups share a domain; workers follow."""
    c = Cluster(small_config(nodes=8, domains=4))
    c.store.create(LWS, make_lws("demo", replicas=5, size=2, gpus=1,
                                 annotations={L.EXCLUSIVE_TOPOLOGY: TOPO}))
    c.advance(1200)
    node_domain = {n["metadata"]["name"]: n["metadata"]["labels"][TOPO] for n in c.store.iter_raw("nodes")
                   if TOPO in n["metadata"]["labels"]}
    domains: dict[str, set[str]] = {}
    for g in range(5):
        nodes = [_node(c, f"demo-{g}")] + ([_node(c, f"demo-{g}-1")]
                                            if c.store.try_get("pods", NS, f"demo-{g}-1") else [])
        if nodes[0] is None:
            continue
        assert len({node_domain[n] for n in nodes if n}) == 1  # the group sits in one domain
        domains.setdefault(node_domain[nodes[0]], set()).add(str(g))
    assert len(domains) == 4 and all(len(v) == 1 for v in domains.values())
    unplaced = [g for g in range(5) if _node(c, f"demo-{g}") is None]
    assert len(unplaced) == 1
    # the unscheduled leader has no worker sts yet: workers follow the leader's domain (§a)
    assert c.store.try_get("statefulsets.apps", NS, f"demo-{unplaced[0]}") is None
    leader = c.store.get("pods", NS, "demo-0")
    assert leader["spec"]["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0][
        "topologyKey"] == TOPO
    worker = c.store.get("pods", NS, "demo-0-1") if c.store.try_get("pods", NS, "demo-0-1") else None
    if worker is not None:
        assert worker["spec"]["nodeSelector"][TOPO] == node_domain[_node(c, "demo-0")]


@pytest.mark.parametrize(("scoring", "expect"), [("binpack", "gpu-0001"), ("spread", "gpu-0000")])
def test_binpack_prefers_fewest_free_gpus_not_highest_utilisation(scoring: str, expect: str):
    """Binpack picks the node with the FEWEST FREE GPUs that fits: a node that lost 4 GPUs (4 free,
    0% used) beats a node with 3 of 8 used (5 free, 37.5% used) which utilisation scoring would pick."""
    c = Cluster(small_config(nodes=2, domains=1, scoring=scoring))
    c.store.create(LWS, make_lws("filler", replicas=1, size=1, gpus=3))
    c.settle()
    assert _node(c, "filler-0") == "gpu-0000"
    inject(c, Fault(kind="gpu-loss", node="gpu-0001", gpus=4))
    assert c.store.get("nodes", "", "gpu-0001")["status"]["allocatable"]["nvidia.com/gpu"] == "4"
    c.store.create(LWS, make_lws("demo", replicas=1, size=1, gpus=4))
    c.settle()
    assert _node(c, "demo-0") == expect


def test_node_selector_and_taints_filter_nodes():
    """Pods without a GPU toleration never land on tainted GPU nodes; nodeSelector is honoured."""
    c = Cluster(small_config(nodes=2, domains=1))
    plain = make_lws("web", replicas=2, size=1, gpus=0)
    tpl = plain["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]
    tpl.pop("tolerations")
    tpl["containers"][0]["resources"] = {"requests": {"cpu": "500m", "memory": "1Gi"}}
    c.store.create(LWS, plain)
    pinned = make_lws("pinned", replicas=1, size=1, gpus=1)
    pinned["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["nodeSelector"] = {
        "kubernetes.io/hostname": "gpu-0001"}
    c.store.create(LWS, pinned)
    c.run_until(lambda cl: available("web")(cl) and available("pinned")(cl), 3600)
    assert {_node(c, "web-0"), _node(c, "web-1")} <= {"cpu-0000", "cpu-0001"}
    assert _node(c, "pinned-0") == "gpu-0001"


def test_default_cluster_shape():
    """ClusterConfig.default(): a CPU pool, 16 x 8 H100-80GB nodes in 4 topology blocks, 8 x 4 L40S."""
    c = Cluster()
    gpu = [n for n in c.store.iter_raw("nodes") if n["metadata"]["labels"][L.NODE_POOL] == "h100x8"]
    assert len(gpu) == 16
    labels = gpu[0]["metadata"]["labels"]
    # the example catalog's values: its rendered pods select nvidia.com/gpu.product = the catalog's gpu
    assert labels[L.GPU_PRODUCT] == "nvidia-h100-80gb" and labels["kubernetes.io/hostname"]
    assert labels["cloud.google.com/gke-accelerator"] == "nvidia-h100-80gb"
    assert gpu[0]["status"]["allocatable"]["nvidia.com/gpu"] == "8"
    assert len({n["metadata"]["labels"][TOPO] for n in gpu}) == 4
    assert gpu[0]["spec"]["taints"][0]["key"] == "nvidia.com/gpu"
    pools = [n["metadata"]["labels"][L.NODE_POOL] for n in c.store.iter_raw("nodes")]
    assert pools.count("cpu") == 4 and pools.count("l40sx4") == 8


# -- why a pod stays Pending: kube-scheduler's FitError, condition and event ----------------------------
def _bare_pod(name: str, gpus: int, *, tolerate: bool = True, selector: dict | None = None) -> dict:
    spec: dict = {"containers": [{"name": "c", "image": "vllm:v1",
                                  "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}]}
    if tolerate:
        spec["tolerations"] = [dict(GPU_TOLERATION)]
    if selector:
        spec["nodeSelector"] = selector
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS}, "spec": spec}


def _scheduled_cond(c: Cluster, pod: str) -> dict:
    conds = c.store.get("pods", NS, pod)["status"]["conditions"]
    return next(x for x in conds if x["type"] == "PodScheduled")


def _failed(c: Cluster, pod: str) -> list[dict]:
    return [e for e in c.store.list("events", NS)[0]
            if e["reason"] == "FailedScheduling" and e["involvedObject"]["name"] == pod]


def test_pending_pod_gets_the_kube_scheduler_fit_error():
    """kube-scheduler's FitError.Error() (pkg/scheduler/framework/types.go): per node the first failing
    filter's reasons, counted and sorted as strings, then the preemption PostFilter's verdict; the same
    text goes into PodScheduled=False/Unschedulable and a Warning FailedScheduling event from
    default-scheduler. Taints are not named since kubernetes/kubernetes#134740."""
    c = Cluster(small_config(nodes=4, domains=1))  # 2 CPU nodes (no GPUs) + 4 tainted 8-GPU nodes
    c.store.create("pods", _bare_pod("no-toleration", 1, tolerate=False))
    c.store.create("pods", _bare_pod("too-big", 9))
    c.store.create("pods", _bare_pod("nowhere", 1, selector={"lwsflow.io/node-pool": "tpu"}))
    c.advance(30)
    cond = _scheduled_cond(c, "no-toleration")
    msg = ("0/6 nodes are available: 2 Insufficient nvidia.com/gpu, 4 node(s) had untolerated taint(s). "
           "preemption: 0/6 nodes are available: 2 No preemption victims found for incoming pod, "
           "4 Preemption is not helpful for scheduling.")
    assert (cond["status"], cond["reason"], cond["message"]) == ("False", "Unschedulable", msg)
    assert c.store.get("pods", NS, "no-toleration")["status"]["phase"] == "Pending"
    [ev] = _failed(c, "no-toleration")
    assert (ev["type"], ev["message"], ev["source"]["component"]) == ("Warning", msg, "default-scheduler")
    assert _scheduled_cond(c, "too-big")["message"] == (
        "0/6 nodes are available: 6 Insufficient nvidia.com/gpu. "
        "preemption: 0/6 nodes are available: 6 No preemption victims found for incoming pod.")
    # NodeAffinity runs before NodeResourcesFit: the CPU nodes fail on the selector first
    assert _scheduled_cond(c, "nowhere")["message"] == (
        "0/6 nodes are available: 6 node(s) didn't match Pod's node affinity/selector. "
        "preemption: 0/6 nodes are available: 6 Preemption is not helpful for scheduling.")
    # a cordoned node reports NodeUnschedulable first
    c.store.mutate("nodes", "", "gpu-0000", lambda o: o["spec"].__setitem__("unschedulable", True))
    c.kubelet.retry_pending()
    c.advance(30)
    assert _scheduled_cond(c, "no-toleration")["message"].startswith(
        "0/6 nodes are available: 1 node(s) were unschedulable, 2 Insufficient nvidia.com/gpu, "
        "3 node(s) had untolerated taint(s). preemption:")


def test_repeated_scheduling_failures_aggregate_into_one_event():
    """client-go's EventCorrelator: an identical event bumps count and lastTimestamp of the first
    (kubectl describe shows "(x3 over ...)"), it does not add objects."""
    c = Cluster(small_config(nodes=4, domains=1))
    c.store.create("pods", _bare_pod("too-big", 9))
    c.advance(10)
    for _ in range(2):
        c.kubelet.retry_pending()  # another scheduling attempt (e.g. after a pod went away)
        c.advance(10)
    [ev] = _failed(c, "too-big")
    assert ev["count"] == 3 and ev["lastTimestamp"] > ev["firstTimestamp"]
    assert len(c.store.list("events", NS)[0]) == 1


def test_gang_and_exclusive_topology_reasons():
    """The leader alone fits but its group does not (gang): those nodes say so. With exclusive topology
    the webhook's required pod anti-affinity rejects every domain that holds another group."""
    c = Cluster(small_config(nodes=4, domains=1))
    for i in range(3):
        c.store.create("pods", _bare_pod(f"hog-{i}", 8))
    c.advance(30)
    c.store.create(LWS, make_lws("demo", replicas=1, size=3))
    c.advance(60)
    assert _scheduled_cond(c, "demo-0")["message"] == (
        "0/6 nodes are available: 1 node(s) could not also hold the other 2 pod(s) of the group, "
        "5 Insufficient nvidia.com/gpu. preemption: 0/6 nodes are available: 6 No preemption victims "
        "found for incoming pod.")
    c = Cluster(small_config(nodes=8, domains=4))
    c.store.create(LWS, make_lws("demo", replicas=5, size=2, gpus=1,
                                 annotations={L.EXCLUSIVE_TOPOLOGY: TOPO}))
    c.advance(1200)
    [stuck] = [g for g in range(5) if _node(c, f"demo-{g}") is None]
    assert _scheduled_cond(c, f"demo-{stuck}")["message"] == (
        "0/10 nodes are available: 2 Insufficient nvidia.com/gpu, 8 node(s) didn't match pod anti-affinity "
        "rules. preemption: 0/10 nodes are available: 10 No preemption victims found for incoming pod.")


def test_gang_held_workers_are_unschedulable_for_their_groups_reason():
    """A group that does not fit: the leader gets kube-scheduler's fit error, and its workers, held
    by the gang, get PodScheduled=False/Unschedulable with the same message (not no condition)."""
    c = Cluster(small_config(nodes=1, domains=1))
    c.store.create(LWS, make_lws("big", replicas=1, size=3))  # 3 pods x 8 GPUs on one 8-GPU node
    c.advance(30)
    leader = _scheduled_cond(c, "big-0")
    assert leader["status"] == "False" and leader["message"].startswith("0/3 nodes are available")
    for worker in ("big-0-1", "big-0-2"):
        cond = _scheduled_cond(c, worker)
        assert (cond["status"], cond["reason"], cond["message"]) == ("False", "Unschedulable",
                                                                      leader["message"])
