"""kube-apiserver's defaulting of core kinds in the embedded cluster (pkg/apis/core/v1/defaults.go,
apps/v1, autoscaling/v2; the DefaultTolerationSeconds, Priority and ServiceAccount admission plugins):
on objects written directly to the store and on the pods the StatefulSet controller creates."""

from __future__ import annotations

import pytest

from lwsflow.sim.cluster import Cluster
from lwsflow.sim.config import ClusterConfig
from lwsflow.sim.defaulting.podspec import image_pull_policy
from lwsflow.sim.lws_controller import LWS
from lwsflow.sim.serviceaccounts import MOUNT_PATH
from lwsflow.sim.store import Store
from tests.sim.sim_helpers import NS, available, make_lws

STS = "statefulsets.apps"


def _pod(**spec: object) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": NS},
            "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}], **spec}}


def test_pod_spec_container_and_probe_defaults() -> None:
    store = Store(now=lambda: 0.0)
    probe = {"httpGet": {"port": 8000}, "timeoutSeconds": 0}
    pod = _pod(terminationGracePeriodSeconds=0, initContainers=[{"name": "i", "image": "busybox"}])
    pod["spec"]["containers"][0].update(readinessProbe=probe, ports=[{"containerPort": 8000}],
                                        resources={"limits": {"cpu": "2", "nvidia.com/gpu": "8"},
                                                   "requests": {"cpu": "1"}})
    spec = store.create("pods", pod)["spec"]
    assert {k: spec[k] for k in ("dnsPolicy", "restartPolicy", "schedulerName", "securityContext",
                                 "enableServiceLinks", "terminationGracePeriodSeconds")} == {
        "dnsPolicy": "ClusterFirst", "restartPolicy": "Always", "schedulerName": "default-scheduler",
        "securityContext": {}, "enableServiceLinks": True,
        "terminationGracePeriodSeconds": 0}  # a pointer field: an explicit 0 stays
    c = spec["containers"][0]
    assert spec["initContainers"][0]["resources"] == {}  # a struct: on the wire even when empty
    assert c["terminationMessagePath"] == "/dev/termination-log" and c["terminationMessagePolicy"] == "File"
    assert c["imagePullPolicy"] == "IfNotPresent"
    assert c["ports"] == [{"containerPort": 8000, "protocol": "TCP"}]
    # requests copied from limits where the container requests nothing itself
    assert c["resources"]["requests"] == {"cpu": "1", "nvidia.com/gpu": "8"}
    assert c["readinessProbe"] == {"httpGet": {"port": 8000, "path": "/", "scheme": "HTTP"},
                                   "timeoutSeconds": 1, "periodSeconds": 10, "successThreshold": 1,
                                   "failureThreshold": 3}


@pytest.mark.parametrize(("image", "policy"), [
    ("nginx", "Always"), ("nginx:latest", "Always"), ("nginx:1.27", "IfNotPresent"),
    ("localhost:5000/vllm", "Always"), ("localhost:5000/vllm:v1", "IfNotPresent"),
    ("vllm@sha256:" + "a" * 64, "IfNotPresent"), ("vllm:latest@sha256:" + "a" * 64, "Always"),
    ("docker.io/lmsysorg/sglang:latest", "Always"), ("[::1]:5000/vllm", "Always"),
    # not a reference (upstream's tensorrt example): ParseImageName fails, no tag, IfNotPresent
    ("<image>", "IfNotPresent"), ("Nginx", "IfNotPresent"),
])
def test_image_pull_policy_follows_the_tag(image: str, policy: str) -> None:
    assert image_pull_policy(image) == policy


def test_new_pod_gets_tolerations_priority_and_qos_but_an_update_does_not() -> None:
    store = Store(now=lambda: 0.0)
    pod = _pod()
    pod["spec"]["containers"][0]["resources"] = {"limits": {"cpu": "1", "memory": "1Gi"}}
    out = store.create("pods", pod)
    assert out["spec"]["tolerations"] == [
        {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
         "tolerationSeconds": 300},
        {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute",
         "tolerationSeconds": 300}]
    assert out["spec"]["priority"] == 0 and out["spec"]["preemptionPolicy"] == "PreemptLowerPriority"
    assert out["status"] == {"phase": "Pending", "qosClass": "Guaranteed"}
    out["spec"]["tolerations"] = []
    assert store.replace("pods", out)["spec"]["tolerations"] == []  # admission runs on create only
    # a toleration of its own for the taint keeps the plugin's away
    own = _pod(tolerations=[{"key": "node.kubernetes.io/unreachable", "operator": "Exists"}])
    own["metadata"]["name"] = "q"
    keys = [t["key"] for t in store.create("pods", own)["spec"]["tolerations"]]
    assert keys == ["node.kubernetes.io/unreachable", "node.kubernetes.io/not-ready"]


def test_service_defaults_and_cluster_ip() -> None:
    store = Store(now=lambda: 0.0)
    svc = store.create("services", {"metadata": {"name": "web", "namespace": NS}, "spec": {
        "selector": {"app": "web"}, "ports": [{"port": 80}]}})
    spec = svc["spec"]
    assert spec["type"] == "ClusterIP" and spec["sessionAffinity"] == "None"
    assert spec["ports"] == [{"port": 80, "protocol": "TCP", "targetPort": 80}]
    assert spec["clusterIP"].startswith("10.96.") and spec["clusterIPs"] == [spec["clusterIP"]]
    assert spec["ipFamilies"] == ["IPv4"] and spec["ipFamilyPolicy"] == "SingleStack"
    assert spec["internalTrafficPolicy"] == "Cluster" and svc["status"] == {"loadBalancer": {}}
    other = store.create("services", {"metadata": {"name": "db", "namespace": NS},
                                      "spec": {"ports": [{"port": 5432}]}})
    assert other["spec"]["clusterIP"] != spec["clusterIP"]
    headless = store.create("services", {"metadata": {"name": "h", "namespace": NS}, "spec": {
        "clusterIP": "None", "sessionAffinity": "ClientIP"}})["spec"]
    assert headless["clusterIPs"] == ["None"] and headless["ipFamilyPolicy"] == "RequireDualStack"
    assert headless["ipFamilies"] == ["IPv4", "IPv6"]  # as the reference cluster answers
    assert headless["sessionAffinityConfig"] == {"clientIP": {"timeoutSeconds": 10800}}


def test_statefulset_defaults_and_the_gated_max_unavailable() -> None:
    gates: set[str] = set()
    from lwsflow.sim.defaulting import Defaulter

    store = Store(now=lambda: 0.0, defaulter=Defaulter(lambda: frozenset(gates)))
    body = {"metadata": {"name": "web", "namespace": NS}, "spec": {
        "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 2}},
        "template": {"spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}
    spec = store.create(STS, body)["spec"]
    assert {k: spec[k] for k in ("replicas", "podManagementPolicy", "revisionHistoryLimit",
                                 "persistentVolumeClaimRetentionPolicy", "updateStrategy")} == {
        "replicas": 1, "podManagementPolicy": "OrderedReady", "revisionHistoryLimit": 10,
        "persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Retain", "whenScaled": "Retain"},
        "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}}}  # gate off: dropped
    assert spec["template"]["spec"]["dnsPolicy"] == "ClusterFirst"
    assert "tolerations" not in spec["template"]["spec"]  # admission is for pods, not templates
    gates.add("MaxUnavailableStatefulSet")
    body["metadata"]["name"] = "web2"
    rolling = store.create(STS, body)["spec"]["updateStrategy"]["rollingUpdate"]
    assert rolling == {"partition": 0, "maxUnavailable": 2}
    gates.clear()  # once stored, an update keeps it (maxUnavailableInUse)
    assert store.replace(STS, store.get(STS, NS, "web2"))["spec"]["updateStrategy"]["rollingUpdate"][
        "maxUnavailable"] == 2


def test_hpa_and_claim_defaults() -> None:
    store = Store(now=lambda: 0.0)
    hpa_spec = {"maxReplicas": 4, "behavior": {"scaleDown": {"stabilizationWindowSeconds": 300}}}
    hpa = store.create("horizontalpodautoscalers.autoscaling",
                       {"metadata": {"name": "h", "namespace": NS}, "spec": hpa_spec})["spec"]
    assert hpa["minReplicas"] == 1
    assert hpa["metrics"] == [{"type": "Resource", "resource": {"name": "cpu", "target": {
        "type": "Utilization", "averageUtilization": 80}}}]
    assert hpa["behavior"]["scaleDown"] == {
        "stabilizationWindowSeconds": 300, "selectPolicy": "Max",
        "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}]}
    assert hpa["behavior"]["scaleUp"]["policies"][0] == {"type": "Pods", "value": 4, "periodSeconds": 15}
    claim = store.create("persistentvolumeclaims", {"metadata": {"name": "c", "namespace": NS}, "spec": {}})
    assert claim["spec"]["volumeMode"] == "Filesystem" and claim["status"] == {"phase": "Pending"}


def test_controller_created_pods_get_defaults_and_the_service_account_token(cluster: Cluster) -> None:
    """The StatefulSet controller's pods go through defaulting and admission as on a real cluster:
    the ``default`` ServiceAccount, its projected token volume mounted in every container (the
    namespace's ``kube-root-ca.crt`` exists, so the pod starts), the NoExecute tolerations."""
    cluster.store.create(LWS, make_lws("demo", replicas=1, size=2))
    cluster.run_until(available("demo"), 3600)
    for name in ("demo-0", "demo-0-1"):
        assert cluster.store.get("pods", NS, name)["metadata"]["generateName"] == name.rsplit("-", 1)[0] + "-"
        spec = cluster.store.get("pods", NS, name)["spec"]
        assert spec["serviceAccountName"] == spec["serviceAccount"] == "default"
        token = [v for v in spec["volumes"] if v["name"].startswith("kube-api-access-")]
        assert len(token) == 1 and len(token[0]["name"]) == len("kube-api-access-") + 5
        sources = token[0]["projected"]["sources"]
        assert sources[0] == {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}}
        assert sources[1]["configMap"]["name"] == "kube-root-ca.crt"
        assert spec["containers"][0]["volumeMounts"][-1] == {
            "name": token[0]["name"], "readOnly": True, "mountPath": MOUNT_PATH}
        assert {t.get("key") for t in spec["tolerations"]} >= {"node.kubernetes.io/not-ready",
                                                               "node.kubernetes.io/unreachable"}
        assert spec["containers"][0]["resources"]["requests"] == {"nvidia.com/gpu": "8"}
    assert cluster.store.get("serviceaccounts", NS, "default")
    assert "ca.crt" in cluster.store.get("configmaps", NS, "kube-root-ca.crt")["data"]


def test_automount_off_gets_no_token_volume() -> None:
    c = Cluster(ClusterConfig(pools=[{"name": "cpu", "count": 1}]))
    c.settle()
    pod = _pod(automountServiceAccountToken=False)
    from lwsflow.sim import serviceaccounts

    serviceaccounts.admit_pod(c.store, pod)
    assert "volumes" not in pod["spec"] and pod["spec"]["serviceAccountName"] == "default"
    c.store.create("serviceaccounts", {"metadata": {"name": "quiet", "namespace": NS},
                                       "automountServiceAccountToken": False})
    pod = _pod(serviceAccountName="quiet")
    serviceaccounts.admit_pod(c.store, pod)
    assert "volumes" not in pod["spec"]
