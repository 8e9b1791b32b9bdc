"""An embedded cluster served over HTTP with a token, plus helpers to create and watch LWS/DS."""

from __future__ import annotations

import copy
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lwsflow.controller.api import labels as L
from lwsflow.controller.kube.client import Kube
from lwsflow.controller.kube.resources import DS, LWS
from lwsflow.controller.rollout import gate, session
from lwsflow.sim.apiserver import ApiFaults, ApiServer
from lwsflow.sim.cluster import Cluster
from lwsflow.sim.config import ClusterConfig, PoolConfig, Timings
from lwsflow.sim.store import Event

SPEED = 200.0  # virtual seconds per wall second
TOKEN = "rollout-test-token"
LOAD_S = 20  # model load per pod, virtual seconds
NS = "default"


def config(gpu_nodes: int = 0) -> ClusterConfig:
    pools = [PoolConfig(name="cpu", count=16, cpu=256, memory_gi=1024)]
    if gpu_nodes:
        pools.append(PoolConfig(name="h100", count=gpu_nodes, gpus_per_node=8, gpu_product="H100"))
    return ClusterConfig(pools=pools, timings=Timings(pull_gbps=100.0, image_gb=0.1, cpu_image_gb=0.1,
                                                      container_start_s=1.0, weight_gb=0.0))


def lws_manifest(name: str, *, replicas: int = 4, size: int = 2, image: str = "vllm:1",
                 surge: int | str = 0, unavailable: int | str = 1, load_s: int = LOAD_S,
                 annotations: dict[str, str] | None = None, labels: dict[str, str] | None = None,
                 gpus: int = 0, partition: int | None = None) -> dict:
    ann = {"sim.lwsflow.io/load-seconds": str(load_s), **(annotations or {})}
    container: dict[str, Any] = {"name": "engine", "image": image}
    pod_spec: dict[str, Any] = {"containers": [container]}
    if gpus:
        container["resources"] = {"limits": {L.GPU_RESOURCE: gpus}}
        pod_spec["nodeSelector"] = {L.NODE_POOL: "h100"}
    ruc: dict[str, Any] = {"maxSurge": surge, "maxUnavailable": unavailable}
    if partition is not None:
        ruc["partition"] = partition
    return {
        "apiVersion": L.LWS_API_VERSION, "kind": L.LWS_KIND,
        "metadata": {"name": name, "namespace": NS, "labels": dict(labels or {})},
        "spec": {"replicas": replicas, "rolloutStrategy": {"type": "RollingUpdate",
                                                           "rollingUpdateConfiguration": ruc},
                 "leaderWorkerTemplate": {"size": size, "workerTemplate": {
                     "metadata": {"annotations": ann}, "spec": pod_spec}}},
    }


def ds_manifest(name: str, *, prefill: int = 2, decode: int = 1, image: str = "vllm:1",
                load_s: int = LOAD_S) -> dict:
    def role(rname: str, replicas: int) -> dict:
        return {"name": rname, "spec": {"replicas": replicas, "leaderWorkerTemplate": {
            "size": 1, "workerTemplate": {"metadata": {"annotations": {
                "sim.lwsflow.io/load-seconds": str(load_s)}},
                "spec": {"containers": [{"name": "engine", "image": image}]}}}}}
    return {"apiVersion": L.DS_API_VERSION, "kind": L.DS_KIND,
            "metadata": {"name": name, "namespace": NS},
            "spec": {"roles": [role("prefill", prefill), role("decode", decode)]}}


def new_release(manifest: dict, image: str = "vllm:2", **ann: str) -> dict:
    out = copy.deepcopy(manifest)
    specs = [r["spec"] for r in out["spec"]["roles"]] if "roles" in out["spec"] else [out["spec"]]
    for spec in specs:
        tmpl = spec["leaderWorkerTemplate"]["workerTemplate"]
        tmpl["spec"]["containers"][0]["image"] = image
        tmpl["metadata"]["annotations"].update(ann)
    return out


@dataclass
class Recorder:
    """Watches the store directly (not through the controller): the partition sequence and the
    lowest ready count per LWS, so tests check the controller against ground truth."""

    partitions: dict[str, list[int]] = field(default_factory=dict)
    pods: dict[str, dict] = field(default_factory=dict)  # name -> pod (live)
    # (lws, stage passed) -> names of groups fully on the new image and Ready at that instant
    at_pass: dict[tuple[str, int], set[int]] = field(default_factory=dict)
    new_image: str = "vllm:2"
    order: list[tuple[int, str, str, int]] = field(default_factory=list)  # (rv, lws, what, value)
    min_ready: dict[str, int] = field(default_factory=dict)
    ready_series: list[tuple[float, str, int]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, ev: Event) -> None:
        if ev.key == "pods":
            with self.lock:
                if ev.type == "DELETED":
                    self.pods.pop(ev.object["metadata"]["name"], None)
                else:
                    self.pods[ev.object["metadata"]["name"]] = ev.object
            return
        if not ev.key.startswith("leaderworkersets") or ev.type == "DELETED":
            return
        obj = ev.object
        name = obj["metadata"]["name"]
        with self.lock:
            seq = self.partitions.setdefault(name, [])
            p = gate.partition(obj)
            if not seq or seq[-1] != p:
                seq.append(p)
                self.order.append((ev.rv, name, "partition", p))
            passed = int((obj["metadata"].get("annotations") or {}).get("rollout.lwsflow.io/passed", 0))
            if passed and (name, passed) not in self.at_pass:
                self.at_pass[(name, passed)] = self.good_groups(name, obj)
                self.order.append((ev.rv, name, "passed", passed))
            c = gate.counters(obj)
            if c["observedGeneration"] == c["generation"] and obj.get("status"):
                ready = c["readyReplicas"]
                self.ready_series.append((ev.rv, name, ready))
                if name in self.min_ready or ready > 0:
                    self.min_ready[name] = min(self.min_ready.get(name, ready), ready)


    def good_groups(self, lws: str, obj: dict) -> set[int]:
        """Group indexes whose every pod runs the new image and is Ready (ground truth from pods)."""
        size = obj["spec"]["leaderWorkerTemplate"]["size"]
        groups: dict[int, list[dict]] = {}
        for p in self.pods.values():
            labels = p["metadata"].get("labels") or {}
            if labels.get(L.NAME) != lws or p["metadata"].get("deletionTimestamp"):
                continue
            groups.setdefault(int(labels.get(L.GROUP_INDEX, -1)), []).append(p)
        good = set()
        for gi, pods in groups.items():
            ok = len(pods) == size and all(
                p["spec"]["containers"][0]["image"] == self.new_image and any(
                    c.get("type") == "Ready" and c.get("status") == "True"
                    for c in (p.get("status") or {}).get("conditions") or []) for p in pods)
            if ok:
                good.add(gi)
        return good


@dataclass
class Env:
    cluster: Cluster
    server: ApiServer
    kube: Kube
    kubeconfig: Path
    rec: Recorder
    tmp: Path
    firsts: dict[str, dict] = field(default_factory=dict)

    def clock(self) -> Any:
        return session.clock_for(self.kube)

    def create(self, obj: dict) -> dict:
        res = DS if obj["kind"] == "DisaggregatedSet" else LWS
        created = self.kube.create(res, NS, obj)
        self.firsts[obj["metadata"]["name"]] = created
        return created

    def wait(self, pred: Any, timeout_wall: float = 30.0, res: Any = LWS, name: str = "") -> dict:
        end = time.monotonic() + timeout_wall
        while time.monotonic() < end:
            obj = self.kube.get(res, NS, name)
            if pred(obj):
                return obj
            time.sleep(0.05)
        raise AssertionError(f"{name}: condition not reached in {timeout_wall}s: {obj.get('status')}")

    def create_ready(self, obj: dict) -> dict:
        self.create(obj)
        name = obj["metadata"]["name"]
        if obj["kind"] == "DisaggregatedSet":
            return self.wait(lambda o: gate.ds_gate(o).passed, res=DS, name=name)
        return self.wait(lambda o: gate.lws_fully_rolled(o).passed, name=name)

    def rec_first(self, name: str) -> dict:
        """The object as it was created (the first version the store recorded)."""
        return self.firsts[name]

    def close(self) -> None:
        self.server.stop()
        self.cluster.stop()
        self.kube.api.close()


def make_env(tmp: Path, *, gpu_nodes: int = 0, faults: ApiFaults | None = None,
             speed: float = SPEED) -> Env:
    cluster = Cluster(config(gpu_nodes))
    rec = Recorder()
    cluster.store.subscribe(rec)
    server = ApiServer(cluster.store, token=TOKEN, clock=cluster.now, speed=speed, faults=faults)
    server.start()
    # The server writes headers and body in two sends; with Nagle on, the body waits for the
    # client's delayed ACK (~40 ms a request). Until server.py sets it, turn Nagle off here.
    server._httpd.RequestHandlerClass.disable_nagle_algorithm = True  # type: ignore[union-attr]
    cluster.start_realtime(speed)
    kc = server.write_kubeconfig(tmp / "kubeconfig")
    kube = Kube.connect(str(kc))
    return Env(cluster, server, kube, kc, rec, tmp)
