"""An embedded cluster served over HTTP with a token, plus helpers to create and watch LWS/DS."""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lwsflow.controller.api import labels as L
from lwsflow.controller.kube.client import Kube
from lwsflow.controller.kube.resources import DS, LWS
from lwsflow.controller.rollout import gate, session
from lwsflow.sim.apiserver import ApiFaults
from lwsflow.sim.config import ClusterConfig, ImageProfile, PoolConfig, Timings
from lwsflow.sim.lws_controller import LWS as LWS_KEY
from lwsflow.sim.testing import EmbeddedCluster, Recorded, StoreRecorder
from reliability.sim_views import SimViews

SPEED = 200.0  # virtual seconds per wall second
TOKEN = "rollout-test-token"
LOAD_S = 20  # model load per pod, virtual seconds
NS = "default"

# The P/D compatibility probe's images (stand-in engines): KV layout "2" fails every hand-off with a pod of
# another layout at the NIXL handshake, as vLLM's compatibility check does (vllm PR #29503)
OLD = "r.example/vllm@sha256:" + "1" * 64
SAME_LAYOUT = "r.example/vllm@sha256:" + "3" * 64  # a new build, KV layout unchanged
NEW_LAYOUT_DIGEST = "sha256:" + "2" * 64
NEW_LAYOUT = f"r.example/vllm@{NEW_LAYOUT_DIGEST}"  # KV layout "2": incompatible with every old pod
LAYOUTS = {NEW_LAYOUT_DIGEST: ImageProfile(kv_layout="2")}  # make_env(images=LAYOUTS)


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


class Recorder:
    """The store's ground truth for the rollout tests, read from the harness's ``StoreRecorder``
    (never through the controller): per LWS the partition sequence, the groups fully on the new
    image and Ready when each stage was recorded passed, and the lowest ready count."""

    def __init__(self, store: StoreRecorder) -> None:
        self.store = store
        self.new_image = "vllm:2"
        self._since: dict[str, int] = {}

    def restart(self, name: str, new_image: str | None = None) -> None:
        """Start ``name``'s history again at the object as it is now (a second rollout of it)."""
        self._since[name] = self.store.last_position(LWS_KEY, name)
        if new_image is not None:
            self.new_image = new_image

    def _names(self) -> list[str]:
        return list(dict.fromkeys(r.name for r in self.store.entries(LWS_KEY)))

    def _lws(self, name: str) -> list[Recorded]:
        return [r for r in self.store.entries(LWS_KEY, name, since=self._since.get(name, 0))
                if r.type != "DELETED"]

    @property
    def pods(self) -> dict[str, dict]:
        """Live pods by name."""
        return {name: pod for (_ns, name), pod in self.store.pods().items()}

    @property
    def partitions(self) -> dict[str, list[int]]:
        return {n: [gate.partition(r.object) for r in self.store.changes(
            LWS_KEY, n, gate.partition, since=self._since.get(n, 0))] for n in self._names()}

    @property
    def order(self) -> list[tuple[int, str, str, int]]:
        """(rv, lws, "partition" | "passed", value): each partition change and each first pass."""
        out = []
        for n in self._names():
            out += [(r.rv, n, "partition", gate.partition(r.object)) for r in self.store.changes(
                LWS_KEY, n, gate.partition, since=self._since.get(n, 0))]
            out += [(r.rv, n, "passed", _passed(r.object)) for r in self._first_passes(n)]
        return out

    @property
    def at_pass(self) -> dict[tuple[str, int], set[int]]:
        """(lws, stage passed) -> groups fully on the new image and Ready at that instant."""
        return {(n, _passed(r.object)): self.good_groups(n, r) for n in self._names()
                for r in self._first_passes(n)}

    @property
    def ready_series(self) -> list[tuple[int, str, int]]:
        """(rv, lws, readyReplicas) for every status written for the current generation."""
        out = []
        for n in self._names():
            for r in self._lws(n):
                c = gate.counters(r.object)
                if c["observedGeneration"] == c["generation"] and r.object.get("status"):
                    out.append((r.rv, n, c["readyReplicas"]))
        return out

    @property
    def min_ready(self) -> dict[str, int]:
        """The lowest ready count per LWS once it first had a ready group."""
        out: dict[str, int] = {}
        for _rv, n, ready in self.ready_series:
            if n in out or ready > 0:
                out[n] = min(out.get(n, ready), ready)
        return out

    def _first_passes(self, name: str) -> list[Recorded]:
        seen: set[int] = set()
        out = []
        for r in self._lws(name):
            p = _passed(r.object)
            if p and p not in seen:
                seen.add(p)
                out.append(r)
        return out

    def good_groups(self, lws: str, rec: Recorded) -> set[int]:
        """Group indexes whose every pod runs the new image and is Ready (ground truth from pods)."""
        size = rec.object["spec"]["leaderWorkerTemplate"]["size"]
        groups: dict[int, list[dict]] = {}
        for p in rec.pods.values():
            labels = p["metadata"].get("labels") or {}
            if labels.get(L.NAME) != lws or p["metadata"].get("deletionTimestamp"):
                continue
            groups.setdefault(int(labels.get(L.GROUP_INDEX, -1)), []).append(p)
        return {gi for gi, pods in groups.items() if len(pods) == size and all(
            p["spec"]["containers"][0]["image"] == self.new_image and any(
                c.get("type") == "Ready" and c.get("status") == "True"
                for c in (p.get("status") or {}).get("conditions") or []) for p in pods)}


def _passed(obj: dict) -> int:
    return int((obj["metadata"].get("annotations") or {}).get("rollout.lwsflow.io/passed", 0))


@dataclass
class Env(SimViews):
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
        self.kube.api.close()
        self.sim.close()


def make_env(tmp: Path, *, gpu_nodes: int = 0, faults: ApiFaults | None = None, speed: float = SPEED,
             images: dict[str, ImageProfile] | None = None) -> Env:
    """``images``: profiles by digest; given, the pods run stand-in engines (side channels on free ports)."""
    cfg = config(gpu_nodes)
    cfg.images.update(images or {})
    serve = True if images is not None else None  # None: the config's own choice
    sim = EmbeddedCluster(tmp, cfg, speed=speed, token=TOKEN, faults=faults, engines=serve,
                          engine_options={"side_channel_port": 0} if serve else None)
    rec = Recorder(StoreRecorder(sim.cluster))  # from the start: the creation of every object
    sim.start()
    return Env(sim, Kube.connect(str(sim.kubeconfig)), sim.kubeconfig, rec, tmp)
