"""A rollout gated by analysis on the embedded cluster, with a real Prometheus and seeded traffic
(issue 17): a release that is Ready but 40% slower at p95 TTFT passes readiness and fails the analysis
at the first stage (rolled back); a release as fast as the stable one passes."""

from __future__ import annotations

import json
import random
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from lwsflow.components.loadgen import LoadGenerator, LoadSpec, pod_endpoints
from lwsflow.controller.api import labels as L
from lwsflow.controller.kube.client import Kube
from lwsflow.controller.kube.resources import LWS, POD
from lwsflow.pipelines.cli import main
from lwsflow.sim.config import ClusterConfig, ImageProfile, PoolConfig, Timings
from lwsflow.sim.testing import EmbeddedCluster

STABLE = "sha256:" + "1" * 64
SLOWER = "sha256:" + "2" * 64  # ready, but 40% slower TTFT
SAME = "sha256:" + "3" * 64  # a good release: as fast as stable
MODEL = "m"
SPEED = 20.0  # virtual seconds per wall second; analysis runs in wall time (Prometheus's clock)
SPEC = {"window": "5s", "metrics": [{
    "name": "ttft-p95", "initialDelay": "8s", "interval": "1s", "count": 3, "failureLimit": 1,
    "inconclusiveLimit": 1,
    "provider": {"prometheus": {"query": (
        'histogram_quantile(0.95, sum by (le) (rate(vllm:time_to_first_token_seconds_bucket'
        '{namespace="{{namespace}}",lws="{{lws}}",revision="{{revision}}"}[{{window}}])))')}},
    "compare": {"mode": "relative", "tolerance": 10}}]}


class Env:
    def __init__(self, tmp: Path) -> None:
        self.port = random.randint(20_000, 60_000)
        cfg = ClusterConfig(pools=[PoolConfig(name="cpu", count=4)],
                            timings=Timings(pull_gbps=100.0, cpu_image_gb=0.1, container_start_s=1.0,
                                            weight_gb=0.0),
                            images={STABLE: ImageProfile(ttft_s=0.045), SLOWER: ImageProfile(ttft_s=0.063),
                                    SAME: ImageProfile(ttft_s=0.045)})
        self.sim = EmbeddedCluster(tmp, cfg, speed=SPEED, engines=True,
                                   engine_options={"side_channel_port": 0}).start()
        self.kube = Kube.connect(str(self.sim.kubeconfig))
        self._eps: tuple[float, list[str]] = (0.0, [])

    def manifest(self, digest: str) -> dict[str, Any]:
        return {"apiVersion": L.LWS_API_VERSION, "kind": L.LWS_KIND,
                "metadata": {"name": "llama", "namespace": "default"},
                "spec": {"replicas": 2, "leaderWorkerTemplate": {"size": 1, "workerTemplate": {
                    "metadata": {"annotations": {"sim.lwsflow.io/load-seconds": "10", L.SERVED_MODEL: MODEL,
                                                 L.SERVING_PORT: str(self.port)}},
                    "spec": {"containers": [{"name": "engine", "image": f"r.example/vllm@{digest}"}]}}}}}

    def endpoints(self) -> list[str]:
        at, eps = self._eps
        if time.monotonic() - at > 0.5:  # re-read the pods twice a second, not per request
            eps = pod_endpoints(self.kube.list(POD, "default")[0], self.port)
            self._eps = (time.monotonic(), eps)
        return eps

    def close(self) -> None:
        self.kube.api.close()
        self.sim.close()


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Env]:
    e = Env(tmp_path)
    yield e
    e.close()


def _rollout(env: Env, tmp: Path, digest: str) -> tuple[int, dict[str, Any]]:
    env.kube.create(LWS, "default", env.manifest(STABLE))
    end = time.monotonic() + 30
    while (env.kube.get(LWS, "default", "llama").get("status") or {}).get("readyReplicas") != 2:
        assert time.monotonic() < end, "stable release never became ready"
        time.sleep(0.1)
    mf, spec, rep = tmp / "new.yaml", tmp / "analysis.yaml", tmp / "report.json"
    mf.write_text(yaml.safe_dump(env.manifest(digest)))
    spec.write_text(yaml.safe_dump(SPEC))
    with LoadGenerator(LoadSpec(model=MODEL, rate=40, seed=3, max_tokens=(2, 4)), env.endpoints) as load:
        rc = main(["rollout", "run", "lws/llama", "-n", "default", "--kubeconfig", str(env.sim.kubeconfig),
                   "--manifest", str(mf), "--stages", "1,100%", "--analysis", str(spec),
                   "--prometheus", "local", "--report", str(rep)])
    # no engine error; a request in flight to a pod being replaced may lose its connection (status 0)
    assert load.stats.ok > 0 and set(load.stats.by_status) <= {200, 0}, load.stats
    assert load.stats.errors <= 0.02 * load.stats.sent, load.stats
    return rc, json.loads(rep.read_text())


def test_slower_release_is_ready_but_fails_analysis_and_rolls_back(env: Env, tmp_path: Path) -> None:
    rc, report = _rollout(env, tmp_path, SLOWER)
    assert rc == 1 and report["result"] == "rolled-back", report["stages"]
    first = report["stages"][0]
    assert first["gate"] and first["result"] == "failed"  # the gate (readiness) passed; analysis did not
    # every judged measurement saw the new revision >10% slower; now and then one window finds no
    # samples of the new pod (inconclusive; docs/analysis.md "Not done yet")
    phases = [m["phase"] for m in first["analysis"]]
    assert "successful" not in phases and "failed" in phases, first["analysis"]
    assert all(m["value"] > m["baseline"] * 1.1 for m in first["analysis"] if m["phase"] == "failed")
    image = env.kube.get(LWS, "default", "llama")["spec"]["leaderWorkerTemplate"]["workerTemplate"]
    assert image["spec"]["containers"][0]["image"].endswith(STABLE)


def test_release_as_fast_as_stable_passes_analysis(env: Env, tmp_path: Path) -> None:
    rc, report = _rollout(env, tmp_path, SAME)
    assert rc == 0 and report["result"] == "succeeded"
    first, last = report["stages"]
    phases = [m["phase"] for m in first["analysis"]]
    assert len(phases) == 3 and "failed" not in phases and phases.count("successful") >= 2, phases
    assert "analysis skipped" in last["hooks"][0]  # no stable pod left to compare with at 100%
