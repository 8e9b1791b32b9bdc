"""§b: the objects, names, labels, annotations and env vars the embedded LWS controller creates."""

from __future__ import annotations

from lwsflow.controller.api import labels as L
from lwsflow.sim.cluster import Cluster
from lwsflow.sim.lws_controller import LWS
from lwsflow.sim.lws_webhook import group_key
from tests.sim.sim_helpers import NS, available, lws_revisions, make_lws, pod_template

STS = "statefulsets.apps"


def test_leader_and_worker_statefulsets_pods_service_and_revision(cluster: Cluster):
    """§b object topology: leader sts <lws>, worker sts <lws>-<g>, pods, headless Service, revision."""
    cluster.store.create(LWS, make_lws("demo", replicas=2, size=3, max_surge=1))
    cluster.run_until(available("demo"), 3600)
    st = cluster.store
    leader = st.get(STS, NS, "demo")
    rev = leader["metadata"]["labels"][L.TEMPLATE_REVISION_HASH]
    assert leader["spec"]["serviceName"] == "demo"
    assert leader["spec"]["podManagementPolicy"] == "Parallel"
    assert leader["spec"]["selector"]["matchLabels"] == {L.NAME: "demo", L.WORKER_INDEX: "0"}
    # the controller writes maxUnavailable = max(1, U + S); the API server drops it while the
    # MaxUnavailableStatefulSet gate is off (the default; with it on: test_sim_lws_status_fidelity)
    assert leader["spec"]["updateStrategy"]["rollingUpdate"] == {"partition": 0}
    assert leader["metadata"]["annotations"][L.REPLICAS_ANNOTATION] == "2"
    assert leader["metadata"]["ownerReferences"][0]["kind"] == "LeaderWorkerSet"
    worker = st.get(STS, NS, "demo-1")
    assert worker["spec"]["replicas"] == 2 and worker["spec"]["ordinals"] == {"start": 1}
    # upstream pod_controller.go (v0.9.0 and later) selects a group's workers on name, group-index
    # and group-key
    assert worker["spec"]["selector"]["matchLabels"] == {
        L.NAME: "demo", L.GROUP_INDEX: "1", L.GROUP_KEY: group_key(NS, "demo-1")}
    assert worker["metadata"]["ownerReferences"][0] == {
        "apiVersion": "v1", "kind": "Pod", "name": "demo-1",
        "uid": st.get("pods", NS, "demo-1")["metadata"]["uid"], "controller": True,
        "blockOwnerDeletion": True}
    names = sorted(p["metadata"]["name"] for p in st.list("pods", NS)[0])
    assert names == ["demo-0", "demo-0-1", "demo-0-2", "demo-1", "demo-1-1", "demo-1-2"]
    svc = st.get("services", NS, "demo")
    assert svc["spec"]["clusterIP"] == "None" and svc["spec"]["publishNotReadyAddresses"] is True
    assert svc["spec"]["selector"] == {L.NAME: "demo"}
    # upstream CreateHeadlessServiceIfNotExists labels the Service with the set's name
    # (pkg/utils/controller/controller_utils.go, v0.9.0 and later)
    assert svc["metadata"]["labels"] == {L.NAME: "demo"}
    revs = lws_revisions(cluster)
    assert [r["metadata"]["labels"][L.TEMPLATE_REVISION_HASH] for r in revs] == [rev]
    assert set(revs[0]["data"]["spec"]) == {"leaderWorkerTemplate", "networkConfig"}


def test_pod_labels_annotations_and_env(cluster: Cluster):
    """§b pod labels (name, worker-index, group-index, group-key, revision), annotations, env first."""
    cluster.store.create(LWS, make_lws("demo", replicas=2, size=2))
    cluster.run_until(available("demo"), 3600)
    leader = cluster.store.get("pods", NS, "demo-1")
    worker = cluster.store.get("pods", NS, "demo-1-1")
    key = group_key(NS, "demo-1")
    rev = cluster.store.get(STS, NS, "demo")["metadata"]["labels"][L.TEMPLATE_REVISION_HASH]
    for pod, windex in ((leader, "0"), (worker, "1")):
        labels = pod["metadata"]["labels"]
        assert labels[L.NAME] == "demo" and labels[L.WORKER_INDEX] == windex
        assert labels[L.GROUP_INDEX] == "1" and labels[L.GROUP_KEY] == key
        assert labels[L.TEMPLATE_REVISION_HASH] == rev
        assert pod["metadata"]["annotations"][L.SIZE_ANNOTATION] == "2"
        env = pod["spec"]["containers"][0]["env"]
        assert env[:3] == [{"name": "LWS_LEADER_ADDRESS", "value": "demo-1.demo.default"},
                           {"name": "LWS_GROUP_SIZE", "value": "2"},
                           {"name": "LWS_WORKER_INDEX", "value": windex}]
        assert [e["name"] for e in env[3:]] == ["HF_HOME"]  # the user's LWS_GROUP_SIZE is dropped
        assert pod["spec"]["subdomain"] == "demo"
        assert pod["status"]["podIP"].startswith("127.") and pod["status"]["podIP"] != "127.0.0.1"
        assert {c["type"]: c["status"] for c in pod["status"]["conditions"]}["Ready"] == "True"
    assert worker["metadata"]["annotations"][L.LEADER_NAME_ANNOTATION] == "demo-1"
    assert L.LEADER_NAME_ANNOTATION not in leader["metadata"]["annotations"]
    assert len(key) == 40


def test_unique_per_replica_subdomain(cluster: Cluster):
    """§b UniquePerReplica: Service <lws>-<g> per group (no shared one), and every pod of group g,
    leader included, has subdomain <lws>-<g> and LWS_LEADER_ADDRESS <lws>-<g>.<lws>-<g>.<ns>: the
    upstream pod webhook sets the leader's ``spec.subdomain`` to its own name (pod_webhook.go), and
    the worker StatefulSet's serviceName is <lws>-<g>. The per-replica Service is created by the pod
    controller exactly as ``CreateHeadlessServiceIfNotExists`` builds it: headless, selector
    {name, group-index}, publishNotReadyAddresses, labelled {name: <lws>} (controller_utils.go sets
    ``Labels: {SetNameLabelKey: lws.Name}``, v0.9.0 and later), controller-owned by the leader pod."""
    cluster.store.create(LWS, make_lws("tpu-style", replicas=3, size=3,
                                       networkConfig={"subdomainPolicy": "UniquePerReplica"}))
    cluster.run_until(available("tpu-style"), 3600)
    assert cluster.store.try_get("services", NS, "tpu-style") is None
    for g in range(3):
        group = f"tpu-style-{g}"
        leader = cluster.store.get("pods", NS, group)
        svc = cluster.store.get("services", NS, group)
        assert svc["spec"]["selector"] == {L.NAME: "tpu-style", L.GROUP_INDEX: str(g)}
        assert svc["spec"]["clusterIP"] == "None" and svc["spec"]["publishNotReadyAddresses"] is True
        assert svc["metadata"]["labels"] == {L.NAME: "tpu-style"}
        assert svc["metadata"]["ownerReferences"] == [{
            "apiVersion": "v1", "kind": "Pod", "name": group, "uid": leader["metadata"]["uid"],
            "controller": True, "blockOwnerDeletion": True}]
        assert cluster.store.get(STS, NS, group)["spec"]["serviceName"] == group
        for pod_name in (group, f"{group}-1", f"{group}-2"):
            pod = cluster.store.get("pods", NS, pod_name)
            assert pod["spec"]["hostname"] == pod_name
            assert pod["spec"]["subdomain"] == group, pod_name
            assert pod["spec"]["containers"][0]["env"][0] == {
                "name": "LWS_LEADER_ADDRESS", "value": f"{group}.{group}.default"}, pod_name
    assert cluster.store.get("pods", NS, "tpu-style-0")["metadata"]["annotations"][
        L.SUBDOMAIN_POLICY_ANNOTATION] == "UniquePerReplica"


def test_size_one_creates_no_worker_statefulset(cluster: Cluster):
    """§b: with size 1 no worker StatefulSet is created."""
    cluster.store.create(LWS, make_lws("solo", replicas=2, size=1))
    cluster.run_until(available("solo"), 3600)
    assert [s["metadata"]["name"] for s in cluster.store.list(STS, NS)[0]] == ["solo"]


def test_startup_policy_leader_ready(cluster: Cluster):
    """§a startupPolicy LeaderReady: the worker sts appears only once the leader pod is Ready."""
    cluster.store.create(LWS, make_lws("demo", replicas=1, size=2, startupPolicy="LeaderReady"))
    cluster.advance(60 + 5 + 10)  # leader pulled and started, still loading its shard (50 s)
    assert cluster.store.try_get("pods", NS, "demo-0")["status"]["phase"] == "Running"
    assert cluster.store.try_get(STS, NS, "demo-0") is None
    cluster.advance(60)  # leader Ready
    assert cluster.store.try_get(STS, NS, "demo-0") is not None
    cluster.run_until(available("demo"), 3600)


def test_leader_created_default_starts_workers_at_once(cluster: Cluster):
    """§a startupPolicy LeaderCreated (default): the worker sts exists before the leader is Ready."""
    cluster.store.create(LWS, make_lws("demo", replicas=1, size=2))
    cluster.settle()
    assert cluster.store.try_get(STS, NS, "demo-0") is not None


def test_hpa_selector_and_observed_generation(cluster: Cluster):
    """§c: hpaPodSelector selects leaders; observedGeneration follows metadata.generation."""
    cluster.store.create(LWS, make_lws("demo", replicas=1, size=1))
    cluster.settle()
    o = cluster.store.get(LWS, NS, "demo")
    assert o["status"]["hpaPodSelector"] == f"{L.NAME}=demo,{L.WORKER_INDEX}=0"
    cluster.store.mutate(LWS, NS, "demo", lambda x: x["spec"].__setitem__("replicas", 2))
    cluster.settle()
    o = cluster.store.get(LWS, NS, "demo")
    assert o["metadata"]["generation"] == 2 and o["status"]["observedGeneration"] == 2
    assert all(c["observedGeneration"] == 2 for c in o["status"]["conditions"])


def test_subgroup_labels(cluster: Cluster):
    """§b subgroup-index: (w-1)/n when (size-1) % n == 0 and size % n != 0, else w/n; the
    subgroup-size annotation (and subgroup-policy-type on the leader); LeaderExcluded leaves the
    leader out."""
    for name, policy in (("lw", "LeaderWorker"), ("lx", "LeaderExcluded")):
        cluster.store.create(LWS, make_lws(name, replicas=1, size=5, gpus=1, leaderWorkerTemplate={
            "size": 5, "workerTemplate": pod_template(gpus=1),
            "subGroupPolicy": {"subGroupPolicyType": policy, "subGroupSize": 2}}))
    cluster.advance(1)  # worker pods come a moment (INFORMER_LAG_S) after their leader

    def idx(pod: str) -> str | None:
        return cluster.store.get("pods", NS, pod)["metadata"]["labels"].get(L.SUBGROUP_INDEX)
    assert [idx(f"lw-0-{w}") for w in range(1, 5)] == ["0", "0", "1", "1"]
    assert idx("lw-0") == "0" and idx("lx-0") is None
    assert [idx(f"lx-0-{w}") for w in range(1, 5)] == ["0", "0", "1", "1"]
    ann = cluster.store.get("pods", NS, "lw-0-3")["metadata"]["annotations"]
    assert ann["leaderworkerset.sigs.k8s.io/subgroup-size"] == "2"
    # the policy type is the leader's only: upstream's worker template never carries it
    assert "leaderworkerset.sigs.k8s.io/subgroup-policy-type" not in ann
    leader_ann = cluster.store.get("pods", NS, "lx-0")["metadata"]["annotations"]
    assert leader_ann["leaderworkerset.sigs.k8s.io/subgroup-policy-type"] == "LeaderExcluded"
    keys = {cluster.store.get("pods", NS, f"lw-0-{w}")["metadata"]["labels"][L.SUBGROUP_KEY] for w in (1, 2)}
    assert len(keys) == 1


def test_delete_and_recreate_same_name(cluster: Cluster):
    """Deleting an LWS garbage-collects everything it owns; a same-named LWS starts clean."""
    cluster.store.create(LWS, make_lws("demo", replicas=2, size=2))
    cluster.run_until(available("demo"), 3600)
    cluster.store.delete(LWS, NS, "demo")
    keys = ("pods", STS, "services", "controllerrevisions.apps")
    # leaders terminate, then the garbage collector deletes their worker StatefulSets, whose pods
    # terminate in turn
    cluster.run_until(lambda c: not any(c.store.list(key, NS)[0] for key in keys), 60)
    assert all(n.used_gpus == 0 for n in cluster.scheduler.nodes.values())  # resources released
    cluster.store.create(LWS, make_lws("demo", replicas=2, size=2))
    cluster.run_until(available("demo"), 3600)
    assert len(lws_revisions(cluster)) == 1


def test_orphan_deletion_strips_owner_refs_and_a_new_statefulset_adopts_the_pods(cluster: Cluster):
    """API conventions, garbage collection: ``propagationPolicy: Orphan`` leaves the dependants and
    removes the deleted owner's reference from them; the StatefulSet the LWS controller recreates
    adopts the orphaned leader pods that match its selector (ClaimPods) instead of failing on them."""
    cluster.store.create(LWS, make_lws("demo", replicas=2, size=2))
    cluster.run_until(available("demo"), 3600)
    uids = {n: cluster.store.get("pods", NS, n)["metadata"]["uid"] for n in ("demo-0", "demo-1")}
    old = cluster.store.get(STS, NS, "demo")["metadata"]["uid"]
    cluster.store.delete(STS, NS, "demo", propagation="Orphan")
    assert all("ownerReferences" not in cluster.store.get("pods", NS, n)["metadata"] for n in uids)
    cluster.run_until(available("demo"), 3600)
    new = cluster.store.get(STS, NS, "demo")["metadata"]["uid"]
    assert new != old
    for n, uid in uids.items():
        pod = cluster.store.get("pods", NS, n)
        assert pod["metadata"]["uid"] == uid and pod["metadata"]["ownerReferences"][0]["uid"] == new
