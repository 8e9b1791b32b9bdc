"""A rollout gated by analysis on the embedded cluster, with a real Prometheus and seeded traffic
(issue 17): a release that is Ready but 40% slower at p95 TTFT passes readiness and fails the analysis
at the first stage (rolled back); a release as fast as the stable one passes."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from lwsflow.cli import main
from lwsflow.components.analysis_hook import analysis_hook
from lwsflow.components.loadgen import LoadGenerator, LoadSpec
from lwsflow.components.prometheus import serving_targets
from lwsflow.controller.analysis.spec import AnalysisSpec
from lwsflow.controller.api import labels as L
from lwsflow.controller.kube.resources import LWS
from lwsflow.controller.rollout.hooks import HookContext, HookResult
from reliability.analysis_env import MODEL, SAME, SLOWER, STABLE, AnalysisEnv, ttft_spec

SPEED = 20.0  # virtual seconds per wall second; analysis runs in wall time (Prometheus's clock)
# no inconclusive measurement allowed: the hook waits until Prometheus has scraped every new pod twice
# (rate() needs two samples), and a replaced pod's engine no longer answers on its keep-alive
# connections; initialDelay = window, so every window is full (docs/analysis.md, the time rule)
SPEC = ttft_spec(initial_delay="5s", inconclusive_limit=0)
Env = AnalysisEnv


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Env]:
    e = Env(tmp_path, speed=SPEED)
    yield e
    e.close()


def _rollout(env: Env, tmp: Path, digest: str) -> tuple[int, dict[str, Any]]:
    env.create_ready(STABLE)
    mf, spec, rep = tmp / "new.yaml", tmp / "analysis.yaml", tmp / "report.json"
    mf.write_text(yaml.safe_dump(env.manifest(digest)))
    spec.write_text(yaml.safe_dump(SPEC))
    with LoadGenerator(LoadSpec(model=MODEL, rate=40, seed=3, max_tokens=(2, 4)), env.endpoints) as load:
        rc = main(["rollout", "run", "lws/llama", "-n", "default", "--kubeconfig", str(env.sim.kubeconfig),
                   "--manifest", str(mf), "--stages", "1,100%", "--analysis", str(spec),
                   "--prometheus", "local", "--report", str(rep)])
    # no engine error; a request in flight to a pod being replaced may lose its connection (status 0,
    # counted as lost once that pod's address no longer serves); no answer from a live pod is an error
    assert load.stats.ok > 0 and set(load.stats.by_status) <= {200, 0}, load.stats
    assert load.stats.errors <= 0.02 * load.stats.sent, load.stats
    return rc, json.loads(rep.read_text())


def test_slower_release_is_ready_but_fails_analysis_and_rolls_back(env: Env, tmp_path: Path) -> None:
    rc, report = _rollout(env, tmp_path, SLOWER)
    assert rc == 1 and report["result"] == "rolled-back", report["stages"]
    first = report["stages"][0]
    assert first["gate"] and first["result"] == "failed"  # the gate (readiness) passed; analysis did not
    # every measurement saw the new revision >10% slower; the second failure (failureLimit 1) decides
    phases = [m["phase"] for m in first["analysis"]]
    assert phases == ["failed", "failed"], first["analysis"]
    assert all(m["value"] > m["baseline"] * 1.1 for m in first["analysis"] if m["phase"] == "failed")
    image = env.kube.get(LWS, "default", "llama")["spec"]["leaderWorkerTemplate"]["workerTemplate"]
    assert image["spec"]["containers"][0]["image"].endswith(STABLE)


def test_release_as_fast_as_stable_passes_analysis(env: Env, tmp_path: Path) -> None:
    rc, report = _rollout(env, tmp_path, SAME)
    assert rc == 0 and report["result"] == "succeeded"
    first, last = report["stages"]
    phases = [m["phase"] for m in first["analysis"]]
    # no inconclusive measurement; failureLimit 1 lets one noisy window fail on a loaded machine
    assert len(phases) == 3 and "inconclusive" not in phases and phases.count("successful") >= 2, phases
    assert "analysis skipped" in last["hooks"][0]  # no stable pod left to compare with at 100%


def test_resume_takes_the_analysis_again(env: Env, tmp_path: Path) -> None:
    """`rollout resume` does not remember the checks a run had (a spec file may not exist on the machine
    that resumes; docs/rollout.md): given --analysis again, the resumed stage is analysed. A slower
    release held at stage 1 by a failing hook (--no-rollback) is resumed with the analysis: it fails
    it, and the rollout stays held (no-rollback is remembered) with the failed measurements reported."""
    env.create_ready(STABLE)
    mf, spec, rep = tmp_path / "new.yaml", tmp_path / "analysis.yaml", tmp_path / "resume.json"
    mf.write_text(yaml.safe_dump(env.manifest(SLOWER)))
    spec.write_text(yaml.safe_dump(SPEC))
    common = ["-n", "default", "--kubeconfig", str(env.sim.kubeconfig)]
    assert main(["rollout", "run", "lws/llama", *common, "--manifest", str(mf), "--stages", "1,100%",
                 "--no-rollback", "--hook", "false"]) == 1
    # bad input is refused before anything is written
    assert main(["rollout", "resume", "lws/llama", *common, "--prometheus", "local"]) == 2
    assert main(["rollout", "resume", "lws/llama", *common, "--analysis", str(tmp_path / "none.yaml"),
                 "--prometheus", "local"]) == 2
    with LoadGenerator(LoadSpec(model=MODEL, rate=40, seed=4, max_tokens=(2, 4)), env.endpoints):
        rc = main(["rollout", "resume", "lws/llama", *common, "--analysis", str(spec),
                   "--prometheus", "local", "--report", str(rep)])
    report = json.loads(rep.read_text())
    assert rc == 1, report["stages"]
    first = report["stages"][0]
    assert [m["phase"] for m in first["analysis"]] == ["failed", "failed"], first
    assert "analysis failed" in first["hooks"][-1]


def test_rollout_load_sends_the_traffic_the_analysis_judges(env: Env, tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    """`rollout run --load RPS` (issue 23: `rollout --analysis` sent none): seeded traffic to the LWS's
    serving leader pods for the rollout's length, so an equally fast release's analysis has requests
    to judge and passes; without traffic every window is empty (no data) and the stage rolls back."""
    env.create_ready(STABLE)
    mf, spec, rep = tmp_path / "new.yaml", tmp_path / "analysis.yaml", tmp_path / "report.json"
    mf.write_text(yaml.safe_dump(env.manifest(SAME)))
    spec.write_text(yaml.safe_dump(SPEC))
    common = ["rollout", "run", "lws/llama", "-n", "default", "--kubeconfig", str(env.sim.kubeconfig),
              "--manifest", str(mf), "--stages", "1,100%", "--analysis", str(spec), "--prometheus", "local"]
    # bad input first, nothing written
    assert main([*common, "--load", "0"]) == 2
    assert main([*common, "--load-url", "http://127.0.0.1:1"]) == 2
    assert "--load-url: only used with --load" in capsys.readouterr().err
    rc = main([*common, "--load", "40", "--report", str(rep)])
    out = capsys.readouterr().out
    report = json.loads(rep.read_text())
    assert rc == 0 and report["result"] == "succeeded", report["stages"]
    phases = [m["phase"] for m in report["stages"][0]["analysis"]]
    assert "inconclusive" not in phases and phases.count("successful") >= 2, phases
    assert re.search(r"load: \d+ requests sent, \d+ ok", out), out


@pytest.mark.parametrize("extra", [["pair/x"], ["lws/x", "--strategy", "blue-green", "--manifest", "m.yaml"]])
def test_load_needs_a_gateway_for_pairs_and_blue_green(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                      extra: list[str]) -> None:
    """A pair's requests need prefill before decode and a blue-green's the route's weights: --load
    sends to the pods directly only for an LWS rolled in place."""
    rc = main(["rollout", "run", *extra, "--kubeconfig", str(tmp_path / "none"), "--load", "5"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and err[0].startswith("error: --load-url: give --load-url")


class _Kube:
    """The two reads the hook makes of an LWS: its pods and its leader StatefulSet's revision."""

    def __init__(self, revisions: list[str]) -> None:
        self.pods = [{"metadata": {"name": f"llama-{i}", "namespace": "default", "labels": {
            L.NAME: "llama", L.WORKER_INDEX: "0", L.TEMPLATE_REVISION_HASH: rev}},
            "spec": {"containers": [{"name": "e", "ports": [{"containerPort": 8000}]}]},
            "status": {"phase": "Running", "podIP": f"127.9.0.{i + 1}"}} for i, rev in enumerate(revisions)]

    def list(self, _res: object, _ns: str, label_selector: str = "") -> tuple[list[dict[str, Any]], str]:
        return self.pods, "1"

    def get(self, _res: object, _ns: str, _name: str) -> dict[str, Any]:
        return {"metadata": {"labels": {L.TEMPLATE_REVISION_HASH: "new"}}}


class _Prometheus:
    """Records the scrapes the hook waits for, and says they never came."""

    def __init__(self) -> None:
        self.waited: list[set[tuple[str, str]]] = []

    def sync_from_pods(self, pods: list[dict[str, Any]], namespace: str | None = None) -> list[Any]:
        return serving_targets(pods)

    def wait_for_targets(self, pods: set[tuple[str, str]]) -> bool:
        self.waited.append(pods)
        return False


def test_a_stage_with_no_stable_pod_left_skips_the_analysis_without_waiting_for_scrapes() -> None:
    """At 100% no stable pod is left to compare with: the hook says so at once instead of first
    waiting for Prometheus to discover and scrape the new pods (up to ~6 s each time)."""
    spec = AnalysisSpec.model_validate(SPEC)
    ctx = HookContext(kind=L.LWS_KIND, namespace="default", name="llama", stage=2, stages=2, target_groups=2)
    prom = _Prometheus()
    done = analysis_hook(spec, _Kube(["new", "new"]), "http://prom", prom)(ctx)  # type: ignore[arg-type]
    assert isinstance(done, HookResult) and done.ok and "analysis skipped at stage 2" in done.detail, done
    assert prom.waited == []
    # the control: with a stable pod serving the stage is analysed, after the new pod's scrapes
    mixed = analysis_hook(spec, _Kube(["new", "old"]), "http://prom", prom)(ctx)  # type: ignore[arg-type]
    assert isinstance(mixed, HookResult) and not mixed.ok and "did not scrape" in mixed.detail, mixed
    assert prom.waited == [{("llama-0", "new"), ("llama-1", "old")}]
