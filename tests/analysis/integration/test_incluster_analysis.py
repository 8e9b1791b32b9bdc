"""Analysis in the RolloutPolicy (issue 17): `lwsflow controller run --prometheus local` as its own
process with only the controller ServiceAccount's token (the shipped RBAC, enforced by the embedded
cluster), a real Prometheus and seeded traffic. A release as fast as the stable one passes the
analysis at stage 1 and is skipped at 100% (no stable pod left to compare with); the next release,
Ready but 40% slower at p95 TTFT, fails it at stage 1 and is rolled back. Every measurement and
verdict is in the policy's status.analysis and in Events on the policy."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from lwsflow.components.loadgen import LoadGenerator, LoadSpec
from lwsflow.controller.kube.resources import EVENT, LWS, ROLLOUT_POLICY
from reliability.analysis_env import MODEL, NAME, NS, SAME, SLOWER, STABLE, AnalysisEnv, ttft_spec
from reliability.incluster_env import install_rbac, policy, sync

SPEC = ttft_spec(initial_delay="5s")


@pytest.fixture
def env(tmp_path: Path) -> Iterator[AnalysisEnv]:
    e = AnalysisEnv(tmp_path, speed=20.0)
    yield e
    e.close()


def _wait(env: AnalysisEnv, log: Path, pred: object, timeout: float) -> dict:
    end = time.monotonic() + timeout
    status: dict = {}
    while time.monotonic() < end:
        status = env.kube.get(ROLLOUT_POLICY, NS, NAME).get("status") or {}
        if pred(status):  # type: ignore[operator]
            return status
        time.sleep(0.1)
    raise AssertionError(f"policy status {status}\ncontroller log:\n{log.read_text()}")


def test_policy_analysis_passes_a_good_release_and_rolls_back_a_slower_one(env: AnalysisEnv,
                                                                           tmp_path: Path) -> None:
    env.create_ready(STABLE)
    env.kube.create(ROLLOUT_POLICY, NS, policy(NAME, NAME, [{"groups": 1}, {"groups": "100%"}],
                                               analysis=SPEC))
    sa = install_rbac(env, tmp_path)
    log = tmp_path / "controller.log"
    lwsflow = Path(sys.executable).parent / "lwsflow"
    penv = {**os.environ, "LWSFLOW_LOG": "text"}
    penv.pop("KUBECONFIG", None)
    with log.open("wb") as sink, \
            LoadGenerator(LoadSpec(model=MODEL, rate=40, seed=5, max_tokens=(2, 4)), env.endpoints):
        proc = subprocess.Popen([str(lwsflow), "controller", "run", "-n", NS, "--resync=1s",
                                 "--cluster-clock",
                                 "--metrics-addr=127.0.0.1:0", "--health-addr=127.0.0.1:0",
                                 "--prometheus", "local", f"--kubeconfig={sa}"],
                                stdout=sink, stderr=subprocess.STDOUT, env=penv)
        try:
            _wait(env, log, lambda s: bool(s.get("stableRevision")), 60)
            image = f"r.example/vllm@{SAME}"
            sync(env, NAME, image)
            good = _wait(env, log, lambda s: s.get("phase") in ("Succeeded", "RolledBack", "Failed"), 120)
            sync(env, NAME, f"r.example/vllm@{SLOWER}")
            bad = _wait(env, log, lambda s: s.get("rolloutId") != good["rolloutId"]
                        and s.get("phase") in ("Succeeded", "RolledBack", "Failed"), 120)
            assert proc.poll() is None, log.read_text()
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    text = log.read_text()
    assert "orbidden" not in text and "Traceback" not in text, text
    assert good["phase"] == "Succeeded", good
    a = good["analysis"]
    assert a["rolloutId"] == good["rolloutId"]
    assert [(v["stage"], v["phase"]) for v in a["verdicts"]] == [(1, "Successful"), (2, "Skipped")], a
    [metric] = a["metrics"]
    # three measurements at stage 1; failureLimit 1 lets one noisy window fail (the bench measures how
    # often on a loaded machine: docs/analysis.md)
    assert metric["name"] == "ttft-p95" and metric["phase"] == "successful", metric
    assert metric["successful"] >= 2 and metric["successful"] + metric["failed"] == 3, metric

    assert bad["phase"] == "RolledBack", bad
    a = bad["analysis"]
    assert a["rolloutId"] == bad["rolloutId"] and a["phase"] == "Failed", a
    assert [(v["stage"], v["phase"]) for v in a["verdicts"]] == [(1, "Failed")], a
    [metric] = a["metrics"]
    assert metric["failed"] == 2 and metric["inconclusive"] == 0, metric  # failureLimit 1: the 2nd fails it
    assert all(m["value"] > m["baseline"] * 1.1 for m in metric["measurements"]), metric
    assert a["revision"] and a["stableRevision"] and a["revision"] != a["stableRevision"]
    live = env.kube.get(LWS, NS, NAME)["spec"]["leaderWorkerTemplate"]["workerTemplate"]
    assert live["spec"]["containers"][0]["image"] == image  # back on the good release

    events = [e for e in env.kube.list(EVENT, NS)[0]
              if e["involvedObject"].get("kind") == "RolloutPolicy"]
    reasons = [e["reason"] for e in events]
    assert {"AnalysisMeasurement", "AnalysisSuccessful", "AnalysisSkipped", "AnalysisFailed"} <= set(reasons)
    failed = [e for e in events if e["reason"] == "AnalysisFailed"]
    assert failed[0]["type"] == "Warning" and "stage 1" in failed[0]["message"], failed
