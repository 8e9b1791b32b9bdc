"""Analysis of P/D targets with a real Prometheus (issue 17): a P/D pair is analysed per role as each of
its LWS passes a stage (decode first), the new revision of that role against the stable revision of the
same role; a DisaggregatedSet is analysed per role after its one stage, ``{{role}}`` and ``{{lws}}`` (the
DS) selecting the role's series and each role's new revision its own."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from lwsflow.cli import main
from lwsflow.components import prometheus
from lwsflow.components.loadgen import LoadGenerator, LoadSpec, pod_endpoints
from lwsflow.controller.api import labels as L
from lwsflow.controller.kube.client import Kube
from lwsflow.controller.kube.resources import DS, LWS, POD
from lwsflow.controller.rollout import gate
from lwsflow.sim.config import ClusterConfig, ImageProfile, PoolConfig, Timings
from lwsflow.sim.testing import EmbeddedCluster
from reliability.ports import ReservedPort

STABLE = "sha256:" + "1" * 64
SLOWER = "sha256:" + "2" * 64  # Ready, but four times slower TTFT
SAME = "sha256:" + "3" * 64
FLAKY = "sha256:" + "4" * 64  # Ready, but half of its requests fail
MODEL = "m"
SPEED = 20.0
# initialDelay = window: every window full of the new pods' requests, the hook having waited for two
# scrapes of each (docs/analysis.md, the time rule; as test_analysis_rollout.py)
SEL = 'namespace="{{namespace}}",lws="{{lws}}",role="{{role}}",revision="{{revision}}"'
TTFT = {"window": "5s", "metrics": [{
    "name": "ttft-p95", "initialDelay": "5s", "interval": "1s", "count": 3, "failureLimit": 1,
    "inconclusiveLimit": 1,
    "provider": {"prometheus": {"query": (
        f"histogram_quantile(0.95, sum by (le) (rate(vllm:time_to_first_token_seconds_bucket{{{SEL}}}"
        "[{{window}}])))")}},
    "compare": {"mode": "relative", "tolerance": 10}}]}
ERRORS = {"window": "5s", "metrics": [{
    "name": "error-ratio", "initialDelay": "5s", "interval": "1s", "count": 2, "failureLimit": 0,
    "inconclusiveLimit": 1, "successCondition": "result < 0.05",
    "provider": {"prometheus": {"query": (
        f'sum(rate(vllm:request_success_total{{{SEL},finished_reason="error"}}[{{{{window}}}}])) / '
        f"clamp_min(sum(rate(vllm:request_success_total{{{SEL}}}[{{{{window}}}}])), 1e-9)")}}}]}


class Env:
    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self._port = ReservedPort()  # every pod's engine serves on it, at its pod IP
        self.port = self._port.port
        cfg = ClusterConfig(pools=[PoolConfig(name="cpu", count=6)],
                            timings=Timings(pull_gbps=100.0, cpu_image_gb=0.1, container_start_s=1.0,
                                            weight_gb=0.0),
                            # 150 ms sits mid-bucket in vLLM's TTFT buckets (100-250 ms) and 600 ms
                            # four buckets up: a loaded test machine's tens of ms of jitter can neither
                            # hide the slow release nor move a good one's p95 across a bucket edge
                            # (40% slower is test_analysis_rollout.py's case; here the roles' wiring is)
                            images={STABLE: ImageProfile(ttft_s=0.15), SLOWER: ImageProfile(ttft_s=0.6),
                                    SAME: ImageProfile(ttft_s=0.15), FLAKY: ImageProfile(error_ratio=0.5)})
        self.sim = EmbeddedCluster(tmp, cfg, speed=SPEED, engines=True,
                                   engine_options={"side_channel_port": 0}).start()
        self.kube = Kube.connect(str(self.sim.kubeconfig))
        self._eps: tuple[float, list[str]] = (0.0, [])

    def template(self, digest: str, labels: dict[str, str]) -> dict[str, Any]:
        return {"size": 1, "workerTemplate": {
            "metadata": {"labels": labels, "annotations": {
                "sim.lwsflow.io/load-seconds": "10", L.SERVED_MODEL: MODEL, L.SERVING_PORT: str(self.port)}},
            "spec": {"containers": [{"name": "engine", "image": f"r.example/vllm@{digest}"}]}}}

    def pair(self, digest: str) -> list[dict[str, Any]]:
        return [{"apiVersion": L.LWS_API_VERSION, "kind": L.LWS_KIND,
                 "metadata": {"name": f"chat-{role}", "namespace": "default",
                              "labels": {L.PD_PAIR: "chat", L.ROLE: role}},
                 "spec": {"replicas": 2, "leaderWorkerTemplate": self.template(digest, {L.ROLE: role})}}
                for role in ("prefill", "decode")]

    def ds(self, digest: str) -> dict[str, Any]:
        return {"apiVersion": L.DS_API_VERSION, "kind": L.DS_KIND,
                "metadata": {"name": "pd", "namespace": "default"},
                "spec": {"roles": [{"name": role, "spec": {"replicas": 1,
                                                           "leaderWorkerTemplate": self.template(digest, {})}}
                                   for role in ("prefill", "decode")]}}

    def endpoints(self) -> list[str]:
        at, eps = self._eps
        if time.monotonic() - at > 0.5:
            eps = pod_endpoints(self.kube.list(POD, "default")[0], self.port)
            self._eps = (time.monotonic(), eps)
        return eps

    def wait(self, ready: Any) -> None:
        end = time.monotonic() + 30
        while not ready():
            assert time.monotonic() < end, "the stable release never became ready"
            time.sleep(0.1)

    def rollout(self, target: str, docs: list[dict[str, Any]], spec: dict[str, Any],
                stages: str = "1,100%") -> tuple[int, dict[str, Any]]:
        mf, sp, rep = self.tmp / "new.yaml", self.tmp / "analysis.yaml", self.tmp / "report.json"
        mf.write_text(yaml.safe_dump_all(docs))
        sp.write_text(yaml.safe_dump(spec))
        with LoadGenerator(LoadSpec(model=MODEL, rate=40, seed=5, max_tokens=(2, 4)), self.endpoints):
            rc = main(["rollout", "run", target, "-n", "default", "--kubeconfig", str(self.sim.kubeconfig),
                       "--manifest", str(mf), "--stages", stages, "--analysis", str(sp),
                       "--prometheus", "local", "--report", str(rep)])
        return rc, json.loads(rep.read_text())

    def close(self) -> None:
        self.kube.api.close()
        self.sim.close()
        self._port.close()


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Env]:
    e = Env(tmp_path)
    yield e
    e.close()


def _pair_ready(env: Env) -> None:
    for doc in env.pair(STABLE):
        env.kube.create(LWS, "default", doc)
    env.wait(lambda: all(gate.lws_fully_rolled(env.kube.get(LWS, "default", f"chat-{r}")).passed
                         for r in ("prefill", "decode")))


def test_pair_slower_release_fails_the_decode_analysis_first_and_rolls_back(env: Env) -> None:
    _pair_ready(env)
    rc, report = env.rollout("pair/chat", env.pair(SLOWER), TTFT)
    assert rc == 1 and report["result"] == "rolled-back", report["message"]
    first = next(s for s in report["stages"] if s["analysis"])
    assert (first["index"], first["role"], first["result"]) == (1, "decode", "failed")
    assert {m["role"] for m in first["analysis"]} == {"decode"}  # decode moves (and is judged) first
    phases = [m["phase"] for m in first["analysis"]]
    assert "successful" not in phases and "failed" in phases, first["analysis"]
    assert all(m["value"] > m["baseline"] * 1.1 for m in first["analysis"] if m["phase"] == "failed")
    for role in ("prefill", "decode"):
        obj = env.kube.get(LWS, "default", f"chat-{role}")
        assert obj["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]["image"] \
            .endswith(STABLE)


def test_pair_good_release_is_analysed_per_role_against_its_own_stable(env: Env) -> None:
    _pair_ready(env)
    rc, report = env.rollout("pair/chat", env.pair(SAME), TTFT)
    assert rc == 0 and report["result"] == "succeeded", (report["message"],
                                                         [s["analysis"] for s in report["stages"]])
    stage1 = {s["role"]: s for s in report["stages"] if s["index"] == 1}
    for role in ("decode", "prefill"):
        ms = stage1[role]["analysis"]
        assert stage1[role]["result"] == "passed" and {m["role"] for m in ms} == {role}, ms
        assert [m["phase"] for m in ms].count("successful") >= 2, ms
        assert f"role {role}" in stage1[role]["hooks"][0]
    last = [s for s in report["stages"] if s["index"] == 2]
    assert last and all("analysis skipped" in s["hooks"][0] for s in last)


def _ds_ready(env: Env) -> None:
    env.kube.create(DS, "default", env.ds(STABLE))
    env.wait(lambda: gate.ds_gate(env.kube.get(DS, "default", "pd")).passed)


def test_ds_is_analysed_per_role_and_a_flaky_release_rolls_back(env: Env) -> None:
    _ds_ready(env)
    rc, report = env.rollout("ds/pd", [env.ds(FLAKY)], ERRORS)
    assert rc == 1 and report["result"] == "rolled-back", report["message"]
    ms = report["stages"][0]["analysis"]
    assert ms and {m["role"] for m in ms} <= {"prefill", "decode"}
    assert any(m["phase"] == "failed" and m["value"] > 0.2 for m in ms), ms
    live = env.kube.get(DS, "default", "pd")
    assert all(r["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]["image"]
               .endswith(STABLE) for r in live["spec"]["roles"])


def test_ds_good_release_passes_the_analysis_of_both_roles(env: Env) -> None:
    _ds_ready(env)
    rc, report = env.rollout("ds/pd", [env.ds(SAME)], ERRORS)
    assert rc == 0 and report["result"] == "succeeded", report["message"]
    stage = report["stages"][0]
    assert {m["role"] for m in stage["analysis"]} == {"prefill", "decode"}
    assert all(m["phase"] == "successful" for m in stage["analysis"]), stage["analysis"]
    assert "role decode" in stage["hooks"][0] and "role prefill" in stage["hooks"][0]


def test_the_scrape_wait_lets_go_of_a_pod_deleted_meanwhile(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """A DS's old child's pods can be listed when the hook starts and deleted (gone from the targets
    file) before Prometheus scraped them twice: the wait goes on with the pods still there instead of
    running to its timeout and failing the stage ("Prometheus did not scrape ... in time")."""
    prom = prometheus.Prometheus("http://prom", tmp_path / "targets.json", tmp_path, None)  # type: ignore[arg-type]
    new = {"targets": ["127.9.0.1:8000"], "labels": {"pod": "new-0", "revision": "b"}}
    old = {"targets": ["127.9.0.2:8000"], "labels": {"pod": "old-0", "revision": "a"}}
    looks = iter(range(1_000_000))
    delete_at: list[int] = []

    def active(_url: str) -> list[dict[str, Any]]:
        """new-0 scraped at every look, old-0 never; old-0 leaves the file at the look ``delete_at``."""
        n = next(looks)
        if n in delete_at:
            prom.set_targets([new])
        return [{"labels": new["labels"], "health": "up", "lastScrape": f"t{n}"}]
    monkeypatch.setattr(prometheus, "active_targets", active)
    both = {("new-0", "b"), ("old-0", "a")}
    prom.set_targets([new, old])
    assert not prom.wait_for_targets(both, timeout_s=0.5)  # old-0 stays: waited for to the end
    prom.set_targets([new, old])
    delete_at.append(next(looks) + 3)
    assert prom.wait_for_targets(both, timeout_s=5)  # old-0 deleted while we waited
    # a pod never in the file (targets written by someone else) is still waited for
    assert not prom.wait_for_targets({("new-0", "b"), ("other-0", "c")}, timeout_s=0.5)
