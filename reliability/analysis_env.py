"""An embedded cluster for analysis trials (tests/analysis, bench/analysis_bench.py): stand-in engines
on the pod IPs with behaviour profiles by image digest, a two-group LWS, and endpoints for seeded
traffic. Analysis runs in Prometheus's (wall) time; the cluster runs ``speed`` times faster."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from lwsflow.components.loadgen import pod_endpoints
from lwsflow.controller.api import labels as L
from lwsflow.controller.kube.client import Kube
from lwsflow.controller.kube.resources import LWS, POD
from lwsflow.sim.config import ClusterConfig, ImageProfile, PoolConfig, Timings
from lwsflow.sim.testing import EmbeddedCluster
from reliability.ports import ReservedPort

STABLE = "sha256:" + "1" * 64
SLOWER = "sha256:" + "2" * 64  # ready, but 40% slower TTFT
SAME = "sha256:" + "3" * 64  # a good release: as fast as stable
# histogram_quantile interpolates inside vLLM's TTFT buckets (.., 0.25, 0.5, 0.75, 1.0, ..): a 40%
# slower release is visible only when it lands in another bucket, and scheduling noise on a loaded
# machine must not push the stable one over a boundary. 0.55 s sits 0.2 s below 0.75; 0.77 s above it
# (docs/analysis.md, "what the bench found")
STABLE_TTFT_S = 0.55
MODEL = "m"
NS = "default"
NAME = "llama"


def ttft_spec(initial_delay: str, window: str = "5s", interval: str = "1s", count: int = 3,
              inconclusive_limit: int = 0) -> dict[str, Any]:
    """p95 TTFT of the new revision against the stable one, 10% tolerance."""
    return {"window": window, "metrics": [{
        "name": "ttft-p95", "initialDelay": initial_delay, "interval": interval, "count": count,
        "failureLimit": 1, "inconclusiveLimit": inconclusive_limit,
        "provider": {"prometheus": {"query": (
            'histogram_quantile(0.95, sum by (le) (rate(vllm:time_to_first_token_seconds_bucket'
            '{namespace="{{namespace}}",lws="{{lws}}",revision="{{revision}}"}[{{window}}])))')}},
        "compare": {"mode": "relative", "tolerance": 10}}]}


class AnalysisEnv:
    def __init__(self, tmp: Path, speed: float = 20.0, images: dict[str, ImageProfile] | None = None,
                 **cluster: Any) -> None:
        self._port = ReservedPort()  # every pod's engine serves on it, at its pod IP
        self.port = self._port.port
        cfg = ClusterConfig(pools=[PoolConfig(name="cpu", count=4)],
                            timings=Timings(pull_gbps=100.0, cpu_image_gb=0.1, container_start_s=1.0,
                                            weight_gb=0.0),
                            images=images if images is not None else {
                                STABLE: ImageProfile(ttft_s=STABLE_TTFT_S),
                                SLOWER: ImageProfile(ttft_s=STABLE_TTFT_S * 1.4),
                                SAME: ImageProfile(ttft_s=STABLE_TTFT_S)})
        self.sim = EmbeddedCluster(tmp, cfg, speed=speed, engines=True,
                                   engine_options={"side_channel_port": 0}, **cluster).start()
        self.kube = Kube.connect(str(self.sim.kubeconfig))
        self._eps: tuple[float, list[str]] = (0.0, [])

    @property
    def kubeconfig(self) -> Path:
        return self.sim.kubeconfig

    def manifest(self, digest: str, replicas: int = 2, load_s: int = 10) -> dict[str, Any]:
        return {"apiVersion": L.LWS_API_VERSION, "kind": L.LWS_KIND,
                "metadata": {"name": NAME, "namespace": NS},
                "spec": {"replicas": replicas, "leaderWorkerTemplate": {"size": 1, "workerTemplate": {
                    "metadata": {"annotations": {"sim.lwsflow.io/load-seconds": str(load_s),
                                                 L.SERVED_MODEL: MODEL, L.SERVING_PORT: str(self.port)}},
                    "spec": {"containers": [{"name": "engine", "image": f"r.example/vllm@{digest}"}]}}}}}

    def create_ready(self, digest: str = STABLE, **kw: Any) -> dict[str, Any]:
        mf = self.manifest(digest, **kw)
        self.kube.create(LWS, NS, mf)
        want = mf["spec"]["replicas"]
        end = time.monotonic() + 30
        while (self.kube.get(LWS, NS, NAME).get("status") or {}).get("readyReplicas") != want:
            assert time.monotonic() < end, "the stable release never became ready"
            time.sleep(0.1)
        return mf

    def endpoints(self) -> list[str]:
        at, eps = self._eps
        if time.monotonic() - at > 0.5:  # re-read the pods twice a second, not per request
            eps = pod_endpoints(self.kube.list(POD, NS)[0], self.port)
            self._eps = (time.monotonic(), eps)
        return eps

    def close(self) -> None:
        self.kube.api.close()
        self.sim.close()
        self._port.close()
