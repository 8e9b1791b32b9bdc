"""Smoke against the embedded cluster over HTTP: targets found through the official client, real
engines on the leader pods' loopback IPs (EnginePodHook), placement read from pods and nodes."""

from __future__ import annotations

import random
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lwsflow.components.smoke import run_smoke
from lwsflow.controller.api import labels as L
from lwsflow.controller.kube.client import Kube
from lwsflow.controller.kube.resources import DS, EVENT, LWS, POD, Resource
from lwsflow.sim.config import ClusterConfig, PoolConfig, Timings
from lwsflow.sim.engine import ENGINE_MODE_ANNOTATION
from lwsflow.sim.kubeconfig import write_kubeconfig
from lwsflow.sim.testing import EmbeddedCluster
from tests.smoke.smoke_helpers import MODEL, by_name, failed_names, fast_config

TOPO = "cloud.google.com/gce-topology-block"
TOKEN = "smoke-test-token"


class Sim:
    def __init__(self, tmp: Path) -> None:
        # Each embedded cluster picks a random pod network (127.N.x.y); a random serving port and an
        # ephemeral side channel make a clash with a parallel test process even less likely.
        self.port = random.randint(20_000, 32_000)  # below the ephemeral ports (32768+)
        self.sim = EmbeddedCluster(tmp, ClusterConfig(
            pools=[PoolConfig(name="h100", count=4, gpus_per_node=8, gpu_product="NVIDIA-H100",
                              topology_key=TOPO, topology_domains=2),
                   PoolConfig(name="a100", count=2, gpus_per_node=8, gpu_product="NVIDIA-A100")],
            timings=Timings(pull_gbps=100.0, image_gb=0.1, container_start_s=1.0, weight_gb=0.0)),
            speed=100.0, token=TOKEN, engines=True, engine_options={"side_channel_port": 0}).start()
        self.cluster, self.hook, self.kubeconfig = self.sim.cluster, self.sim.engines, self.sim.kubeconfig
        self.kube = Kube.connect(str(self.kubeconfig))

    def create(self, obj: dict) -> None:
        tpl = obj["spec"]["leaderWorkerTemplate"]["workerTemplate"]
        tpl["metadata"]["annotations"][L.SERVING_PORT] = str(self.port)
        self.kube.create(LWS, "default", obj)

    def wait_engines(self, n: int) -> None:
        _wait(lambda: len(self.hook.engines) >= n)

    def close(self) -> None:
        self.kube.api.close()
        self.sim.close()


def _wait(pred: Any, timeout_wall: float = 20.0) -> None:
    end = time.monotonic() + timeout_wall
    while not pred():
        assert time.monotonic() < end, "condition not reached"
        time.sleep(0.05)


@pytest.fixture
def sim(tmp_path: Path) -> Iterator[Sim]:
    s = Sim(tmp_path)
    yield s
    s.close()


def lws(name: str, *, pool: str = "h100", product: str = "NVIDIA-H100", role: str = "aggregated",
        labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None,
        replicas: int = 2, exclusive: bool = True) -> dict:
    tpl_ann = {"sim.lwsflow.io/load-seconds": "2", L.SERVED_MODEL: MODEL,
               **(annotations or {})}
    meta: dict[str, Any] = {"name": name, "namespace": "default", "labels": {L.ROLE: role, **(labels or {})}}
    if exclusive:
        meta["annotations"] = {L.EXCLUSIVE_TOPOLOGY: TOPO}
    return {
        "apiVersion": L.LWS_API_VERSION, "kind": L.LWS_KIND, "metadata": meta,
        "spec": {"replicas": replicas, "leaderWorkerTemplate": {"size": 2, "workerTemplate": {
            "metadata": {"labels": {L.ROLE: role}, "annotations": tpl_ann},
            "spec": {"nodeSelector": {L.NODE_POOL: pool, L.GPU_PRODUCT: product},
                     "containers": [{"name": "engine", "image": "vllm/vllm-openai:v0.33.0",
                                     "resources": {"limits": {L.GPU_RESOURCE: 8}}}]}}}},
    }


def test_lws_target_passes_every_check(sim: Sim):
    sim.create(lws("llm"))
    sim.wait_engines(2)
    report = run_smoke(fast_config(targets=["lws/llm"], kubeconfig=str(sim.kubeconfig), model=None,
                                   request_timeout_s=3.0, gpu_product="NVIDIA-H100", gpus_per_pod=8))
    assert report.passed, [(c.name, c.target, c.detail) for c in report.failed()]
    checks = by_name(report)
    assert checks["discover"][0].detail.startswith("2 leader(s)")
    assert checks["placement"][0].passed and "4 pod(s) in 2 group(s)" in checks["placement"][0].detail
    urls = {c.target for c in checks["health"]}
    assert len(urls) == 2 and all("pod llm-" in u for u in urls)
    net = f"127.{sim.cluster.kubelet.pod_network}."
    assert all(h.host.startswith(net) for h in sim.hook.engines.values())  # pod IPs, not 127.0.0.1


def test_placement_on_the_wrong_pool_fails(sim: Sim):
    """The release's template points at the A100 pool; the catalog expects H100: only placement fails."""
    sim.create(lws("misplaced", pool="a100", product="NVIDIA-A100", replicas=1, exclusive=False))
    sim.wait_engines(1)
    report = run_smoke(fast_config(targets=["lws/misplaced"], kubeconfig=str(sim.kubeconfig),
                                   request_timeout_s=3.0, gpu_product="NVIDIA-H100"))
    assert failed_names(report) == {"placement"}
    detail = by_name(report)["placement"][0].detail
    assert "nvidia.com/gpu.product='NVIDIA-A100', expected 'NVIDIA-H100'" in detail


def test_pd_pair_through_cluster_and_bad_release(sim: Sim):
    """A P/D pair found by label; a decode release with a broken KV path fails the hand-off."""
    pair = {L.PD_PAIR: "chat"}
    sim.create(lws("chat-prefill", role="prefill", labels=pair, replicas=1, exclusive=False))
    sim.create(lws("chat-decode", role="decode", labels=pair, replicas=1, exclusive=False,
                   annotations={ENGINE_MODE_ANNOTATION: "kv-recompute"}))
    sim.wait_engines(2)
    cfg = fast_config(targets=["pair/chat"], kubeconfig=str(sim.kubeconfig), request_timeout_s=3.0)
    report = run_smoke(cfg)
    assert report.passed, [(c.name, c.target, c.detail) for c in report.failed()]
    assert {c.name for c in report.checks} >= {"pd-prefill", "pd-decode", "pd-metrics", "placement"}
    # Now the prefill side channel breaks (a bad prefill release): the decode silently recomputes.
    prefill = next(h for h in sim.hook.engines.values() if h.role == "prefill")
    prefill.engine.set_modes("broken-handoff")
    report = run_smoke(cfg)
    assert failed_names(report) == {"pd-metrics"}


def test_unknown_target_and_no_pods_are_failed_discover_checks(sim: Sim):
    report = run_smoke(fast_config(targets=["lws/nothing", "pair/none"], kubeconfig=str(sim.kubeconfig)))
    assert not report.passed
    assert [c.name for c in report.checks] == ["discover", "discover"]
    assert "not found" in report.checks[0].detail.lower()


def test_bad_image_tag_misbehaves_for_real(sim: Sim):
    bad = lws("bad", replicas=1, exclusive=False)
    bad["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]["image"] = "vllm:v2-bad"
    sim.create(bad)
    sim.wait_engines(1)
    report = run_smoke(fast_config(targets=["lws/bad"], kubeconfig=str(sim.kubeconfig)))
    assert failed_names(report) == {"completions", "chat", "completions-stream", "chat-stream"}
    assert "HTTP 500" in by_name(report)["completions"][0].detail


def test_revision_only_checks_the_new_revision(sim: Sim):
    obj = lws("rev", replicas=2, exclusive=False)
    obj["spec"]["rolloutStrategy"] = {"type": "RollingUpdate",
                                      "rollingUpdateConfiguration": {"partition": 1, "maxUnavailable": 1}}
    sim.create(obj)
    sim.wait_engines(2)
    # the new release is bad; a merge patch, not a read-then-PUT the LWS controller's writes can overtake
    sim.kube.merge_patch(LWS, "default", "rev", {"spec": {"leaderWorkerTemplate": {"workerTemplate": {
        "metadata": {"annotations": {ENGINE_MODE_ANNOTATION: "status500:chat"}}}}}})
    # the rolled group's leader is recreated under the same name; wait for its engine with the new mode
    _wait(lambda: any(h.engine.faults.items for h in sim.hook.engines.values()))
    cfg = dict(targets=["lws/rev"], kubeconfig=str(sim.kubeconfig), placement=False)
    new_only = run_smoke(fast_config(revision_only=True, **cfg))
    assert [c.target for c in new_only.checks if c.name == "health"] == ["lws/rev pod rev-1"]
    assert failed_names(new_only) == {"chat"}
    everything = run_smoke(fast_config(**cfg))
    assert sorted(c.target for c in everything.checks if c.name == "health") == [
        "lws/rev pod rev-0", "lws/rev pod rev-1"]


def test_ds_target_pairs_prefill_and_decode_of_one_revision(sim: Sim):
    roles = []
    for role in ("prefill", "decode"):
        spec = lws(f"x-{role}", replicas=1, exclusive=False)["spec"]
        tpl = spec["leaderWorkerTemplate"]["workerTemplate"]
        del tpl["metadata"]["labels"][L.ROLE]  # DS pods carry only the DS role label
        tpl["metadata"]["annotations"][L.SERVING_PORT] = str(sim.port)
        roles.append({"name": role, "spec": spec})
    sim.kube.create(DS, "default", {"apiVersion": L.DS_API_VERSION, "kind": L.DS_KIND,
                                    "metadata": {"name": "svc", "namespace": "default"},
                                    "spec": {"roles": roles}})
    sim.wait_engines(2)
    assert sorted(h.role for h in sim.hook.engines.values()) == ["decode", "prefill"]
    report = run_smoke(fast_config(targets=["ds/svc"], kubeconfig=str(sim.kubeconfig), revision_only=True,
                                   request_timeout_s=3.0))
    assert report.passed, [(c.name, c.target, c.detail) for c in report.failed()]
    handoff = by_name(report)["pd-decode"]
    assert len(handoff) == 1 and handoff[0].target.startswith("ds/svc ")


def test_unreachable_cluster_is_a_bounded_failed_discover_check(tmp_path: Path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    kc = write_kubeconfig(tmp_path / "kc", f"http://127.0.0.1:{port}", None)
    t0 = time.monotonic()
    report = run_smoke(fast_config(targets=["lws/x"], kubeconfig=str(kc)))
    assert [c.name for c in report.failed()] == ["discover"] and time.monotonic() - t0 < 5
    want = f"cannot reach the Kubernetes API at http://127.0.0.1:{port} (nothing answered; kubeconfig: {kc})"
    assert want in report.checks[0].detail


# -- the serving port comes from the manifest (issue 12.5) -------------------------------------------


def _port_lws(name: str, container: dict[str, Any]) -> dict:
    """An LWS without lwsflow's serving-port annotation: only its container says where it listens."""
    obj = lws(name, replicas=1, exclusive=False)
    c = obj["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]
    c.update(container)
    return obj


def _pods(sim: Sim, name: str) -> list[dict]:
    return sim.kube.list(POD, "default", label_selector=f"{L.NAME}={name}")[0]


@pytest.mark.parametrize("how", ["args", "shell-script", "container-port"])
def test_engine_listens_where_the_manifest_says_and_smoke_finds_it(sim: Sim, how: str):
    """Issue 12.5: the stand-in engine always listened on 8000 and smoke always probed 8000. It now
    listens on the leader container's serving port (`--port N` in its command line, else the
    containerPort named http, else the first) and smoke reads the same from the pod spec."""
    port = sim.port + 1
    container = {
        "args": {"args": ["meta-llama/x", "--port", str(port), "--tensor-parallel-size", "8"]},
        "shell-script": {"command": ["/bin/sh", "-c"], "args": [
            f"bash start.sh && exec vllm serve m --port={port} --pipeline-parallel-size 2"]},
        "container-port": {"ports": [{"name": "metrics", "containerPort": port + 1},
                                     {"name": "http", "containerPort": port}]},
    }[how]
    sim.kube.create(LWS, "default", _port_lws("p", container))
    sim.wait_engines(1)
    assert [h.port for h in sim.hook.engines.values()] == [port]
    report = run_smoke(fast_config(targets=["lws/p"], kubeconfig=str(sim.kubeconfig), model=None,
                                   request_timeout_s=3.0, placement=False))
    assert report.passed, [(c.name, c.target, c.detail) for c in report.failed()]
    assert by_name(report)["health"][0].passed


def _leader_service(name: str, target_port: int | str) -> dict:
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": f"{name}-leader", "namespace": "default"},
            "spec": {"selector": {L.NAME: name, L.WORKER_INDEX: "0"},
                     "ports": [{"name": "http", "port": 80, "targetPort": target_port}]}}


def test_leader_service_port_decides_where_smoke_probes(sim: Sim):
    """A Service whose targetPort nobody listens on fails smoke, as traffic through it would on a
    real cluster; a named targetPort resolves through the container's ports."""
    svc = Resource("", "v1", "services")
    port = sim.port + 2
    sim.kube.create(LWS, "default", _port_lws("s", {"args": ["m", "--port", str(port)],
                                                    "ports": [{"name": "http", "containerPort": port}]}))
    sim.wait_engines(1)
    sim.kube.create(svc, "default", _leader_service("s", port + 7))
    cfg = fast_config(targets=["lws/s"], kubeconfig=str(sim.kubeconfig), model=None, request_timeout_s=3.0,
                      placement=False)
    report = run_smoke(cfg)
    health = by_name(report)["health"][0]
    assert not health.passed and f":{port + 7}/health" in health.detail
    sim.kube.delete(svc, "default", "s-leader")
    sim.kube.create(svc, "default", _leader_service("s", "web"))  # a name no container port has
    report = run_smoke(cfg)
    assert failed_names(report) == {"service"}
    assert "targetPort 'web' is no container port" in by_name(report)["service"][0].detail
    sim.kube.delete(svc, "default", "s-leader")
    sim.kube.create(svc, "default", _leader_service("s", "http"))
    report = run_smoke(cfg)
    assert report.passed, [(c.name, c.target, c.detail) for c in report.failed()]


def test_readiness_probe_on_a_port_nobody_listens_on_never_turns_ready(sim: Sim):
    """A readiness probe is checked against the stand-in engine's port: a probe on another port
    fails as the kubelet's would (connection refused), so the pod stays Running and not Ready."""
    port = sim.port + 3
    for name, probe_port in (("good", "http"), ("bad", port + 5)):
        sim.kube.create(LWS, "default", _port_lws(name, {
            "args": ["m", "--port", str(port)], "ports": [{"name": "http", "containerPort": port}],
            "readinessProbe": {"httpGet": {"path": "/health", "port": probe_port}, "periodSeconds": 5}}))
    sim.wait_engines(2)

    def ready(name: str) -> list[bool]:
        return [any(c["type"] == "Ready" and c["status"] == "True"
                    for c in (p.get("status") or {}).get("conditions") or []) for p in _pods(sim, name)
                if (p["metadata"].get("labels") or {}).get(L.WORKER_INDEX) == "0"]
    _wait(lambda: ready("good") == [True])
    time.sleep(0.5)  # 50 virtual seconds: well past the 2 s load
    assert ready("bad") == [False]
    events = sim.kube.list(EVENT, "default")[0]
    assert any(e.get("reason") == "Unhealthy" and "Readiness probe failed" in e.get("message", "")
               and f":{port + 5}" in e.get("message", "") for e in events)


def test_services_that_cannot_be_read_fail_a_service_check(sim: Sim, tmp_path: Path):
    """A role without services `list`: the smoke does not fall back to the pod spec's port in silence
    (the leaders' Service would go unchecked), it fails a ``service`` check in the API server's words;
    the endpoints are still checked. With the verb granted, nothing fails."""
    from lwsflow.cli import main

    rules = [{"apiGroups": ["leaderworkerset.x-k8s.io"], "resources": ["leaderworkersets"], "verbs": ["get"]},
             {"apiGroups": [""], "resources": ["pods", "nodes"], "verbs": ["list"]},
             {"apiGroups": ["apps"], "resources": ["statefulsets"], "verbs": ["get"]}]
    sim.kube.request("POST", "/api/v1/namespaces/default/serviceaccounts",
                     body={"metadata": {"name": "smoker", "namespace": "default"}})
    rbac = "/apis/rbac.authorization.k8s.io/v1"
    sim.kube.request("POST", f"{rbac}/clusterroles", body={"metadata": {"name": "smoker"}, "rules": rules})
    sim.kube.request("POST", f"{rbac}/clusterrolebindings", body={
        "metadata": {"name": "smoker"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "smoker"},
        "subjects": [{"kind": "ServiceAccount", "name": "smoker", "namespace": "default"}]})
    sa = tmp_path / "smoker.kubeconfig"
    assert main(["sim", "token", "smoker", "-n", "default", "--kubeconfig", str(sim.kubeconfig),
                 "--kubeconfig-out", str(sa)]) == 0
    sim.create(lws("llm", replicas=1, exclusive=False))
    sim.wait_engines(1)
    cfg = fast_config(targets=["lws/llm"], kubeconfig=str(sa), request_timeout_s=3.0)
    report = run_smoke(cfg)
    assert failed_names(report) == {"service"}, [(c.name, c.detail) for c in report.failed()]
    [svc] = by_name(report)["service"]
    assert svc.target == "lws/llm"
    assert svc.detail == ('cannot list services in default: 403 Forbidden: services is forbidden: User '
                          '"system:serviceaccount:default:smoker" cannot list resource "services" in API '
                          'group "" in the namespace "default"'), svc.detail
    assert [c.passed for c in report.checks if c.name == "health"] == [True]  # still checked
    rules.append({"apiGroups": [""], "resources": ["services"], "verbs": ["list"]})
    sim.kube.request("PUT", f"{rbac}/clusterroles/smoker",
                     body={"metadata": {"name": "smoker"}, "rules": rules})
    report = run_smoke(cfg)
    assert report.passed, [(c.name, c.detail) for c in report.failed()]
