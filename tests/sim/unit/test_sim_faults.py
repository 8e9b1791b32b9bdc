"""§e group restart policy and fault injection: crashes, deletions, node loss, bad releases."""

from __future__ import annotations

import pytest

from lwsflow.sim.cluster import Cluster
from lwsflow.sim.faults import Fault, inject
from lwsflow.sim.lws_controller import LWS
from tests.sim.sim_helpers import NS, available, counters, groups, make_lws, pod_template, small_config

STS = "statefulsets.apps"


def _uids(c: Cluster, prefix: str) -> dict[str, str]:
    return {p["metadata"]["name"]: p["metadata"]["uid"] for p in c.store.iter_raw("pods")
            if p["metadata"]["name"] == prefix or p["metadata"]["name"].startswith(prefix + "-")}


def _events(c: Cluster, reason: str) -> list[dict]:
    return [e for e in c.store.list("events", NS)[0] if e["reason"] == reason]


def test_crash_recreates_whole_group_others_untouched(cluster: Cluster):
    """§e RecreateGroupOnPodRestart: a worker crash deletes the leader; the group comes back whole."""
    cluster.store.create(LWS, make_lws("demo", replicas=3, size=3))
    cluster.run_until(available(), 3600)
    g0, g2 = _uids(cluster, "demo-0"), _uids(cluster, "demo-2")
    g1 = _uids(cluster, "demo-1")
    wsts1 = cluster.store.get(STS, NS, "demo-1")["metadata"]["uid"]
    inject(cluster, Fault(kind="crash", pod="demo-1-2"))
    cluster.advance(cluster.config.timings.container_stop_s)  # the old group terminates first
    assert set(_uids(cluster, "demo-1").values()).isdisjoint(g1.values())  # every pod of group 1 is new
    assert cluster.store.get(STS, NS, "demo-1")["metadata"]["uid"] != wsts1
    assert _uids(cluster, "demo-0") == g0 and _uids(cluster, "demo-2") == g2
    ev = _events(cluster, "RecreateGroup")
    # as upstream's recorder writes it: on the LeaderWorkerSet, related to the deleted leader
    assert len(ev) == 1 and ev[0]["involvedObject"]["name"] == "demo"
    assert ev[0]["involvedObject"]["kind"] == "LeaderWorkerSet"
    assert (ev[0]["related"]["kind"], ev[0]["related"]["name"]) == ("Pod", "demo-1")
    assert ev[0]["reportingComponent"] == "leaderworkerset"
    assert counters(cluster)[1] == 2
    cluster.run_until(available(), 3600)
    assert all(p["status"]["containerStatuses"][0]["restartCount"] == 0
               for p in cluster.store.iter_raw("pods"))


def test_restart_policy_none_restarts_only_the_container(cluster: Cluster):
    """§e policy None: no group action; the kubelet restarts the container, restartCount 1."""
    cluster.store.create(LWS, make_lws("demo", replicas=2, size=2,
                                       leaderWorkerTemplate={"size": 2, "restartPolicy": "None",
                                                             "workerTemplate": pod_template()}))
    cluster.run_until(available(), 3600)
    before = _uids(cluster, "demo")
    inject(cluster, Fault(kind="crash", pod="demo-1-1"))
    cluster.settle()
    assert counters(cluster)[1] == 1
    cluster.run_until(lambda c: available()(c) and counters(c)[1] == 2, 3600)
    assert _uids(cluster, "demo") == before
    pod = cluster.store.get("pods", NS, "demo-1-1")
    assert pod["status"]["containerStatuses"][0]["restartCount"] == 1
    assert pod["status"]["containerStatuses"][0]["lastState"]["terminated"]["exitCode"] == 1
    assert not _events(cluster, "RecreateGroup")


def test_worker_deletion_recreates_group_but_not_after_start_policy(cluster: Cluster):
    """§e: a deleted worker triggers the recreate; RecreateGroupAfterStart skips short groups."""
    cluster.store.create(LWS, make_lws("a", replicas=1, size=2))
    after_start = {"size": 2, "restartPolicy": "RecreateGroupAfterStart", "workerTemplate": pod_template()}
    cluster.store.create(LWS, make_lws("b", replicas=1, size=2, leaderWorkerTemplate=after_start))
    cluster.run_until(lambda c: available("a")(c) and available("b")(c), 3600)
    a_leader, b_leader = _uids(cluster, "a-0")["a-0"], _uids(cluster, "b-0")["b-0"]
    inject(cluster, Fault(kind="delete-pod", pod="a-0-1"))
    inject(cluster, Fault(kind="delete-pod", pod="b-0-1"))
    cluster.advance(cluster.config.timings.container_stop_s)  # the deleted workers terminate first
    assert cluster.store.get("pods", NS, "a-0")["metadata"]["uid"] != a_leader
    # upstream's pendingPodsInGroup runs when the worker gets its deletionTimestamp: the terminating
    # worker still counts, the group is whole and nothing is Pending, so AfterStart recreates it too
    assert cluster.store.get("pods", NS, "b-0")["metadata"]["uid"] != b_leader


def test_restart_below_partition_comes_back_on_old_template(cluster: Cluster):
    """§e/§d: a group below the partition that restarts is recreated at the old revision."""
    cluster.store.create(LWS, make_lws("demo", replicas=3, size=2, partition=0))
    cluster.run_until(available(), 3600)
    old = groups(cluster)[0][1]

    def edit(o: dict) -> None:
        o["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]["image"] = "vllm:v2"
        o["spec"]["rolloutStrategy"]["rollingUpdateConfiguration"]["partition"] = 2
    cluster.store.mutate(LWS, NS, "demo", edit)
    cluster.run_until(lambda c: available()(c) and counters(c)[2] == 1, 3600)
    inject(cluster, Fault(kind="crash", pod="demo-0-1"))
    cluster.run_until(lambda c: available()(c) and counters(c)[1] == 3, 3600)
    g = groups(cluster)
    assert g[0][1] == old and g[2][1] != old
    worker = cluster.store.get("pods", NS, "demo-0-1")
    assert worker["spec"]["containers"][0]["image"] == "vllm:v1"


def test_node_failure_loses_pods_and_group_moves():
    """Node failure: node NotReady, its pods lost; the group is recreated on healthy nodes."""
    c = Cluster(small_config(nodes=6, domains=1))
    c.store.create(LWS, make_lws("demo", replicas=2, size=2))
    c.run_until(available(), 3600)
    node = c.store.get("pods", NS, "demo-1-1")["spec"]["nodeName"]
    untouched = _uids(c, "demo-0")
    inject(c, Fault(kind="node-failure", node=node))
    c.settle()
    n = c.store.get("nodes", "", node)
    assert n["status"]["conditions"][0]["status"] == "Unknown"
    assert not [p for p in c.store.iter_raw("pods") if p["spec"].get("nodeName") == node]
    c.run_until(available(), 3600)
    assert _uids(c, "demo-0") == untouched
    assert all(p["spec"]["nodeName"] != node for p in c.store.iter_raw("pods"))


def test_image_pull_failure_and_never_ready():
    """Bad releases: ErrImagePull by image pattern; never-ready by annotation: not Available."""
    cfg = small_config()
    cfg.failing_images.append("registry/bad:*")
    c = Cluster(cfg)
    c.store.create(LWS, make_lws("pull", replicas=1, size=1, image="registry/bad:1"))
    never = make_lws("never", replicas=1, size=1)
    never["spec"]["leaderWorkerTemplate"]["workerTemplate"]["metadata"]["annotations"] = {
        "sim.lwsflow.io/never-ready": "true"}
    c.store.create(LWS, never)
    c.advance(3600)
    pod = c.store.get("pods", NS, "pull-0")
    assert pod["status"]["phase"] == "Pending"
    assert pod["status"]["containerStatuses"][0]["state"]["waiting"]["reason"] == "ImagePullBackOff"
    assert _events(c, "Failed")[0]["involvedObject"]["name"] == "pull-0"
    pod = c.store.get("pods", NS, "never-0")
    assert pod["status"]["phase"] == "Running" and pod["status"]["podIP"]
    assert {x["type"]: x["status"] for x in pod["status"]["conditions"]}["Ready"] == "False"
    assert counters(c, "pull")[1] == 0 and counters(c, "never")[1] == 0


def test_lifecycle_timings_image_cache_and_hooks():
    """Pod lifecycle in virtual time: pull 60 s + start 5 s + load 100 s; cached image skips the pull."""
    c = Cluster(small_config(nodes=1, domains=1))
    seen: list[tuple[str, str, str]] = []

    class Hook:
        def on_running(self, pod: dict) -> None:
            seen.append(("run", pod["metadata"]["name"], pod["status"]["podIP"]))

        def on_stopped(self, pod: dict) -> None:
            seen.append(("stop", pod["metadata"]["name"], pod["status"]["podIP"]))
    c.pod_hooks.append(Hook())
    c.store.create(LWS, make_lws("demo", replicas=1, size=1))
    t = c.run_until(available(), 3600) - c.clock.start
    assert t == 60 + 5 + 100
    ip = f"127.{c.kubelet.pod_network}.0.1"
    assert seen == [("run", "demo-0", ip)]
    inject(c, Fault(kind="delete-pod", pod="demo-0"))
    t0 = c.now()
    assert c.store.get("pods", NS, "demo-0")["metadata"]["deletionGracePeriodSeconds"] == 30
    uid = c.store.get("pods", NS, "demo-0")["metadata"]["uid"]
    c.run_until(lambda c: (c.store.try_get("pods", NS, "demo-0") or {"metadata": {}})["metadata"].get("uid")
                != uid, 60)
    assert c.now() - t0 == c.config.timings.container_stop_s  # Terminating until its container stopped
    c.run_until(available(), 3600)
    assert c.now() - t0 == pytest.approx(c.config.timings.container_stop_s + 5 + 100)  # image cached
    assert seen[1] == ("stop", "demo-0", ip) and seen[2][0] == "run"


def test_pod_ips_are_unique_loopback(cluster: Cluster):
    cluster.store.create(LWS, make_lws("demo", replicas=4, size=2))
    cluster.run_until(available(), 3600)
    ips = [p["status"]["podIP"] for p in cluster.store.iter_raw("pods")]
    net = f"127.{cluster.kubelet.pod_network}."
    assert len(set(ips)) == 8 and all(ip.startswith(net) for ip in ips)


def test_crash_loop_release_recreates_group_forever():
    """§e: a release that crashes while loading loops forever under RecreateGroupOnPodRestart
    (no restart budget at this commit); the LWS never becomes Available."""
    cfg = small_config(nodes=4, domains=1)
    cfg.crashing_images.append("vllm:oom*")
    c = Cluster(cfg)
    c.store.create(LWS, make_lws("demo", replicas=1, size=2, image="vllm:oom-1"))
    c.advance(3 * 3600)
    assert len(_events(c, "RecreateGroup")) >= 3
    assert counters(c)[1] == 0
    assert not available()(c)


def test_cordoned_nodes_take_no_new_pods():
    """Nodes with spec.unschedulable (kubectl cordon) are skipped; uncordon lets pending pods in."""
    c = Cluster(small_config(nodes=2, domains=1))

    def cordon(node: str, on: bool) -> None:
        c.store.mutate("nodes", "", node, lambda o: o["spec"].__setitem__("unschedulable", on))
    cordon("gpu-0000", True)
    c.store.create(LWS, make_lws("a", replicas=1, size=1))
    c.settle()
    assert c.store.get("pods", NS, "a-0")["spec"]["nodeName"] == "gpu-0001"
    cordon("gpu-0001", True)
    c.store.create(LWS, make_lws("b", replicas=1, size=1))
    c.settle()
    assert not c.store.get("pods", NS, "b-0")["spec"].get("nodeName")
    cordon("gpu-0000", False)
    c.settle()
    assert c.store.get("pods", NS, "b-0")["spec"]["nodeName"] == "gpu-0000"


def test_fault_scheduled_at_a_virtual_time(cluster: Cluster):
    """faults.schedule: the fault happens exactly when virtual time reaches it."""
    from lwsflow.sim.faults import schedule
    cluster.store.create(LWS, make_lws("demo", replicas=1, size=2, leaderWorkerTemplate={
        "size": 2, "restartPolicy": "None", "workerTemplate": pod_template()}))
    cluster.run_until(available(), 3600)
    schedule(cluster, 300, Fault(kind="crash", pod="demo-0-1"))

    def restarts() -> int:
        return cluster.store.get("pods", NS, "demo-0-1")["status"]["containerStatuses"][0]["restartCount"]
    cluster.advance(299)
    assert restarts() == 0
    cluster.advance(2)
    assert restarts() == 1
