"""The smoke, http and command providers against real endpoints and processes (issue 17); the
prometheus provider is tested against a real Prometheus in test_prometheus.py."""

from __future__ import annotations

import random
import sys
import time
from pathlib import Path

import pytest

from lwsflow.components.analysis_smoke import smoke_measure, smoke_value
from lwsflow.components.smoke.model import CheckResult, SmokeReport
from lwsflow.controller.analysis.providers import ProviderError, command_value, http_value, prometheus_value
from lwsflow.controller.analysis.run import provider_measure, run_analysis
from lwsflow.controller.analysis.spec import CommandProvider, HttpProvider, SmokeProvider, validate_spec
from lwsflow.controller.api import labels as L
from lwsflow.controller.kube.client import Kube
from lwsflow.controller.kube.resources import LWS
from lwsflow.sim.config import ClusterConfig, PoolConfig, Timings
from lwsflow.sim.engine import start_engine
from lwsflow.sim.testing import EmbeddedCluster


def test_http_value_reads_a_json_path() -> None:
    with start_engine(model="m", max_model_len=4096) as eng:
        p = HttpProvider(url=eng.url + "/v1/models", jsonPath="data.0.max_model_len")
        assert http_value(p, {}) == 4096.0
        with pytest.raises(ProviderError, match=r"no 'data\.5\.id'"):
            http_value(HttpProvider(url=eng.url + "/v1/models", jsonPath="data.5.id"), {})
        with pytest.raises(ProviderError, match="HTTP 404"):
            http_value(HttpProvider(url=eng.url + "/nope"), {})
        with pytest.raises(ProviderError, match="is not a number"):
            http_value(HttpProvider(url=eng.url + "/v1/models", jsonPath="data.0.id"), {})


@pytest.mark.parametrize(("code", "want"), [
    ("print('x'); print(0.25)", 0.25),
    ("pass", None),
])
def test_command_value_reads_the_last_line(code: str, want: float | None) -> None:
    assert command_value(CommandProvider(argv=[sys.executable, "-c", code]), {}) == want


@pytest.mark.parametrize(("code", "msg"), [
    ("raise SystemExit(3)", "exit 3"),
    ("print('fast')", "is not a number"),
    ("import time; time.sleep(5)", "timed out"),
])
def test_command_failures_are_provider_errors(code: str, msg: str) -> None:
    with pytest.raises(ProviderError, match=msg):
        command_value(CommandProvider(argv=[sys.executable, "-c", code], timeout=1), {})


def test_unreachable_prometheus_is_a_provider_error() -> None:
    with start_engine(model="m") as eng:
        url = eng.url
    with pytest.raises(ProviderError, match="prometheus"):
        prometheus_value(url, "up", timeout=1)


def _report(*checks: tuple[str, bool, dict]) -> SmokeReport:
    return SmokeReport.build([CheckResult(name=n, target="lws/m pod m-0", passed=ok, data=d)
                              for n, ok, d in checks], 0.1)


@pytest.mark.parametrize(("provider", "want"), [
    ({}, 0.75),  # the share of checks that passed
    ({"check": "chat"}, 0.0),
    ({"check": "ttft"}, 1.0),
    ({"check": "ttft", "figure": "ttft_max_s"}, 0.09),  # the worst pod's figure
    ({"check": "nope"}, None),  # no such check: no data (inconclusive), not a pass
    ({"check": "ttft", "figure": "nope"}, None),
])
def test_smoke_value(provider: dict, want: float | None) -> None:
    rep = _report(("health", True, {}), ("chat", False, {}), ("ttft", True, {"ttft_max_s": 0.05}),
                  ("ttft", True, {"ttft_max_s": 0.09}))
    assert smoke_value(rep, SmokeProvider.model_validate(provider)) == want


def test_smoke_provider_runs_the_smoke_test_of_the_new_revision(tmp_path: Path) -> None:
    """The smoke provider against a real LWS on the embedded cluster: a release whose engines answer
    every request scores 1.0 and passes `result >= 1`; one whose engines answer 500 (an image tag with
    `bad`, docs/embedded-cluster.md) scores below it and fails; the TTFT figure is a real latency."""
    port = random.randint(20_000, 32_000)  # below the ephemeral ports (32768+)
    cfg = ClusterConfig(pools=[PoolConfig(name="cpu", count=2)],
                        timings=Timings(pull_gbps=100.0, cpu_image_gb=0.1, container_start_s=1.0,
                                        weight_gb=0.0))
    spec = validate_spec({"metrics": [
        {"name": "smoke-pass", "provider": {"smoke": {"timeout": 60}}, "successCondition": "result >= 1"},
        {"name": "ttft", "provider": {"smoke": {"check": "ttft", "figure": "ttft_max_s"}},
         "successCondition": "result < 5"}]})
    with EmbeddedCluster(tmp_path, cfg, speed=50.0, engines=True) as sim:
        kube = Kube.connect(str(sim.kubeconfig))
        results = {}
        for name, tag in (("good", "v1"), ("broken", "bad-1")):
            kube.create(LWS, "default", {
                "apiVersion": L.LWS_API_VERSION, "kind": L.LWS_KIND,
                "metadata": {"name": name, "namespace": "default"},
                "spec": {"replicas": 1, "leaderWorkerTemplate": {"size": 1, "workerTemplate": {
                    "metadata": {"annotations": {L.SERVED_MODEL: "m", L.SERVING_PORT: str(port + len(name))}},
                    "spec": {"containers": [{"name": "engine", "image": f"r.example/vllm:{tag}"}]}}}}})
        for name in ("good", "broken"):
            end = time.monotonic() + 30
            while (kube.get(LWS, "default", name).get("status") or {}).get("readyReplicas") != 1:
                assert time.monotonic() < end, f"{name} never became ready"
                time.sleep(0.1)
            results[name] = run_analysis(spec, {"namespace": "default", "lws": name, "revision": "r"},
                                         provider_measure(None, smoke_measure(str(sim.kubeconfig))))
        kube.api.close()
    good, broken = results["good"], results["broken"]
    assert good.phase == "successful", good.as_dict()
    assert good.measurements[0].value == 1.0 and 0 < (good.measurements[1].value or 0) < 5
    assert broken.phase == "failed", broken.as_dict()
    assert (broken.measurements[0].value or 0) < 1


def test_smoke_metric_without_the_provider_wired_is_an_error() -> None:
    spec = validate_spec({"metrics": [{"name": "s", "provider": {"smoke": {}},
                                       "successCondition": "result>=1"}]})
    res = run_analysis(spec, {"namespace": "default", "lws": "m"}, provider_measure(None))
    assert res.phase == "error" and "not wired" in res.measurements[0].detail
