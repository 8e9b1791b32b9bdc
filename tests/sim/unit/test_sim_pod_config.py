"""Pods that reference a Secret or ConfigMap start only once it exists, as the kubelet does (issue 12
item 3): env (``valueFrom`` key refs, ``envFrom``) gives the waiting reason
``CreateContainerConfigError`` with the kubelet's message (kubelet_pods.go
makeEnvironmentVariables); a volume (``secret``, ``configMap``, ``projected``) keeps the pod in
``ContainerCreating`` with a ``FailedMount`` event (the secret/configmap volume plugins' SetUp).
``optional: true`` skips what is missing; the kubelet retries, so the pod starts once it appears."""

from __future__ import annotations

from lwsflow.sim.cluster import Cluster
from lwsflow.sim.lws_controller import LWS
from tests.sim.sim_helpers import NS, available, make_lws


def _pod(name: str, container: dict | None = None, volumes: list | None = None) -> dict:
    spec: dict = {"containers": [{"name": "app", "image": "busybox:1", **(container or {})}]}
    if volumes:
        spec["volumes"] = volumes
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS}, "spec": spec}


def _state(c: Cluster, name: str) -> tuple[str, bool, dict]:
    pod = c.store.get("pods", NS, name)
    st = pod.get("status") or {}
    ready = any(x["type"] == "Ready" and x["status"] == "True" for x in st.get("conditions") or [])
    return st.get("phase", ""), ready, st["containerStatuses"][0]["state"]


def _warnings(c: Cluster, pod: str) -> list[tuple[str, str]]:
    return [(e["reason"], e["message"]) for e in c.store.list("events", NS)[0]
            if e["involvedObject"]["name"] == pod and e["type"] == "Warning"]


def _secret(name: str, **data: str) -> dict:
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": NS}, "data": data}


def _configmap(name: str, **data: str) -> dict:
    meta = {"name": name, "namespace": NS}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data}


def test_missing_secret_key_ref_then_missing_key_then_starts(cluster: Cluster):
    ref = {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf", "key": "token"}}}
    cluster.store.create("pods", _pod("p", {"env": [ref]}))
    cluster.advance(120)
    waiting = {"waiting": {"reason": "CreateContainerConfigError", "message": 'secret "hf" not found'}}
    assert _state(cluster, "p") == ("Pending", False, waiting)
    assert _warnings(cluster, "p") == [("Failed", 'Error: secret "hf" not found')]
    cluster.store.create("secrets", _secret("hf", other="eA=="))
    cluster.advance(60)
    waiting = {"waiting": {"reason": "CreateContainerConfigError",
                           "message": "couldn't find key token in Secret default/hf"}}
    assert _state(cluster, "p") == ("Pending", False, waiting)
    cluster.store.mutate("secrets", NS, "hf", lambda s: s["data"].__setitem__("token", "eA=="))
    cluster.advance(60)
    phase, ready, state = _state(cluster, "p")
    assert (phase, ready, list(state)) == ("Running", True, ["running"])


def test_env_from_and_config_map_key_ref_honour_optional(cluster: Cluster):
    optional = {"name": "A", "valueFrom": {"configMapKeyRef": {"name": "nope", "key": "k", "optional": True}}}
    env_from = [{"secretRef": {"name": "nope", "optional": True}}]
    cluster.store.create("pods", _pod("opt", {"env": [optional], "envFrom": env_from}))
    cluster.store.create("pods", _pod("cm", {"envFrom": [{"configMapRef": {"name": "settings"}}]}))
    cluster.store.create("configmaps", _configmap("present", x="1"))
    missing_key = {"name": "B", "valueFrom": {"configMapKeyRef": {"name": "present", "key": "k"}}}
    cluster.store.create("pods", _pod("key", {"env": [missing_key]}))
    cluster.advance(120)
    assert _state(cluster, "opt")[:2] == ("Running", True)
    assert _state(cluster, "cm")[2] == {"waiting": {"reason": "CreateContainerConfigError",
                                                    "message": 'configmap "settings" not found'}}
    assert _state(cluster, "key")[2]["waiting"]["message"] == \
        "couldn't find key k in ConfigMap default/present"
    cluster.store.create("configmaps", _configmap("settings", mode="fast"))
    cluster.advance(60)
    assert _state(cluster, "cm")[:2] == ("Running", True)
    assert _state(cluster, "key")[:2] == ("Pending", False)


def test_missing_volume_source_keeps_the_pod_container_creating(cluster: Cluster):
    vols = [{"name": "creds", "secret": {"secretName": "creds"}},
            {"name": "maybe", "secret": {"secretName": "absent", "optional": True}}]
    cluster.store.create("pods", _pod("vol", volumes=vols))
    projected = [{"name": "bundle", "projected": {"sources": [{"configMap": {"name": "bundle"}}]}}]
    cluster.store.create("pods", _pod("proj", volumes=projected))
    items = [{"name": "cfg", "configMap": {"name": "partial", "items": [{"key": "a.yaml", "path": "a"}]}}]
    cluster.store.create("configmaps", _configmap("partial", other="1"))
    cluster.store.create("pods", _pod("items", volumes=items))
    claim = [{"name": "data", "persistentVolumeClaim": {"claimName": "weights"}}]
    cluster.store.create("pods", _pod("pvc", volumes=claim))
    cluster.advance(300)
    creating = {"waiting": {"reason": "ContainerCreating"}}
    assert _state(cluster, "vol") == ("Pending", False, creating)
    assert _warnings(cluster, "vol") == [
        ("FailedMount", 'MountVolume.SetUp failed for volume "creds" : secret "creds" not found')]
    assert _warnings(cluster, "proj") == [
        ("FailedMount", 'MountVolume.SetUp failed for volume "bundle" : configmap "bundle" not found')]
    assert _warnings(cluster, "items") == [
        ("FailedMount", 'MountVolume.SetUp failed for volume "cfg" : configmap references non-existent '
                        "config key: a.yaml")]
    assert _warnings(cluster, "pvc") == [
        ("FailedMount", 'MountVolume.SetUp failed for volume "data" : '
                        'persistentvolumeclaim "weights" not found')]
    cluster.store.create("persistentvolumeclaims", {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                                                    "metadata": {"name": "weights", "namespace": NS},
                                                    "spec": {}, "status": {"phase": "Bound"}})
    cluster.store.create("secrets", _secret("creds", u="eA=="))
    cluster.store.create("configmaps", _configmap("bundle", b="1"))
    cluster.advance(60)
    assert _state(cluster, "vol")[:2] == ("Running", True)
    assert _state(cluster, "proj")[:2] == ("Running", True)
    assert _state(cluster, "pvc")[:2] == ("Running", True)
    assert _state(cluster, "items")[:2] == ("Pending", False)


def test_lws_with_a_missing_secret_is_not_available_until_it_exists(cluster: Cluster):
    """A group whose pods cannot start is not ready (§c), so the LWS never turns Available."""
    lws = make_lws("demo", replicas=1, size=2)
    container = lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]
    container["env"].append({"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf", "key": "t"}}})
    cluster.store.create(LWS, lws)
    cluster.advance(3600)
    assert not available("demo")(cluster)
    for pod in ("demo-0", "demo-0-1"):
        assert _state(cluster, pod)[2]["waiting"]["reason"] == "CreateContainerConfigError"
    cluster.store.create("secrets", _secret("hf", t="eA=="))
    cluster.run_until(available("demo"), 3600)
