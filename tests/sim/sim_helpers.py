"""Helpers for the embedded cluster's tests (tests/sim): small clusters, LWS/DS manifests, status readers."""

from __future__ import annotations

import copy

from lwsflow.sim.cluster import Cluster
from lwsflow.sim.config import ClusterConfig, PoolConfig, Taint, Timings
from lwsflow.sim.lws_controller import LWS

NS = "default"
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
TOPO = "cloud.google.com/gce-topology-block"


def small_config(nodes: int = 16, gpus: int = 8, domains: int = 4, scoring: str = "binpack") -> ClusterConfig:
    """One GPU pool with round timings: pull 60 s, start 5 s, load 100 s per pod (140 GB / size 1)."""
    return ClusterConfig(
        pools=[PoolConfig(name="cpu", count=2, cpu=16, memory_gi=64),
               PoolConfig(name="gpu", count=nodes, gpus_per_node=gpus, gpu_product="NVIDIA-H100-80GB-HBM3",
                          topology_key=TOPO, topology_domains=domains,
                          taints=[Taint(key="nvidia.com/gpu", value="present")])],
        timings=Timings(pull_gbps=0.2, image_gb=12, container_start_s=5, storage_gbps=1.0, weight_gb=100),
        scoring=scoring)


def pod_template(image: str = "vllm:v1", gpus: int = 8, **annotations: str) -> dict:
    tpl: dict = {"metadata": {"labels": {"app": "engine"}},
                 "spec": {"containers": [{"name": "engine", "image": image,
                                          "env": [{"name": "LWS_GROUP_SIZE", "value": "user"},
                                                  {"name": "HF_HOME", "value": "/cache"}],
                                          "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}],
                          "tolerations": [dict(GPU_TOLERATION)]}}
    if annotations:
        tpl["metadata"]["annotations"] = {k.replace("__", "/").replace("_", "-"): v
                                          for k, v in annotations.items()}
    return tpl


def make_lws(name: str = "demo", *, replicas: int = 2, size: int = 2, image: str = "vllm:v1",
             gpus: int = 8, max_unavailable: int | str | None = None, max_surge: int | str | None = None,
             partition: int | None = None, annotations: dict | None = None, **spec_extra: object) -> dict:
    spec: dict = {"replicas": replicas,
                  "leaderWorkerTemplate": {"size": size, "workerTemplate": pod_template(image, gpus)}}
    ru = {k: v for k, v in (("maxUnavailable", max_unavailable), ("maxSurge", max_surge),
                            ("partition", partition)) if v is not None}
    if ru:
        spec["rolloutStrategy"] = {"type": "RollingUpdate", "rollingUpdateConfiguration": ru}
    spec.update(spec_extra)
    meta: dict = {"name": name, "namespace": NS}
    if annotations:
        meta["annotations"] = dict(annotations)
    return {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet", "metadata": meta,
            "spec": spec}


def set_image(c: Cluster, name: str, image: str) -> None:
    def edit(o: dict) -> None:
        o["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]["image"] = image
    c.store.mutate(LWS, NS, name, edit)


def patch_spec(c: Cluster, key: str, name: str, fn) -> None:
    c.store.mutate(key, NS, name, fn)


def lws_obj(c: Cluster, name: str = "demo") -> dict:
    return copy.deepcopy(c.store.get_raw(LWS, NS, name))


def counters(c: Cluster, name: str = "demo") -> tuple[int, int, int]:
    st = (c.store.get_raw(LWS, NS, name) or {}).get("status") or {}
    return st.get("replicas", 0), st.get("readyReplicas", 0), st.get("updatedReplicas", 0)


def cond(obj: dict, ctype: str) -> dict | None:
    return next((x for x in (obj.get("status") or {}).get("conditions") or [] if x["type"] == ctype), None)


def is_true(obj: dict, ctype: str) -> bool:
    c = cond(obj, ctype)
    return bool(c and c["status"] == "True")


def available(name: str = "demo"):
    def pred(c: Cluster) -> bool:
        o = c.store.get_raw(LWS, NS, name)
        return bool(o) and is_true(o, "Available") and \
            (o.get("status") or {}).get("observedGeneration") == o["metadata"]["generation"]
    return pred


def leader_sts(c: Cluster, name: str = "demo") -> tuple[int, int]:
    sts = c.store.get_raw("statefulsets.apps", NS, name)
    return (sts["spec"]["updateStrategy"]["rollingUpdate"]["partition"], sts["spec"]["replicas"])


def groups(c: Cluster, name: str = "demo") -> dict[int, tuple[str, str, bool]]:
    """group index -> (leader uid, template-revision-hash, ready(group))."""
    out = {}
    for p in c.store.iter_raw("pods"):
        labels = p["metadata"].get("labels") or {}
        if labels.get("leaderworkerset.sigs.k8s.io/name") == name and \
                labels.get("leaderworkerset.sigs.k8s.io/worker-index") == "0":
            idx = int(labels["leaderworkerset.sigs.k8s.io/group-index"])
            g = c.lws.group_state(NS, name, idx, "")
            out[idx] = (p["metadata"]["uid"], labels["leaderworkerset.sigs.k8s.io/template-revision-hash"],
                        g.ready)
    return dict(sorted(out.items()))


def make_ds(name: str = "pd", *, prefill: int = 6, decode: int = 2, image: str = "vllm:v1",
            rolling: dict | None = None) -> dict:
    def role(rname: str, replicas: int) -> dict:
        spec: dict = {"replicas": replicas,
                      "leaderWorkerTemplate": {"size": 1, "workerTemplate": pod_template(image, 8)}}
        if rolling is not None:
            spec["rolloutStrategy"] = {"type": "RollingUpdate", "rollingUpdateConfiguration": rolling}
        return {"name": rname, "spec": spec}
    return {"apiVersion": "disaggregatedset.x-k8s.io/v1", "kind": "DisaggregatedSet",
            "metadata": {"name": name, "namespace": NS},
            "spec": {"roles": [role("prefill", prefill), role("decode", decode)]}}




def lws_revisions(c: Cluster) -> list[dict]:
    """The LWS controller's ControllerRevisions (not the StatefulSet controller's) in NS."""
    return [r for r in c.store.list("controllerrevisions.apps", NS)[0]
            if r["metadata"]["ownerReferences"][0]["kind"] == "LeaderWorkerSet"]
