"""`lwsflow demo`, the README's first command, for one model: release, then a bad release."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from lwsflow.cli import main
from lwsflow.rehearsal import demo


@pytest.fixture(autouse=True)
def _short_analysis_windows(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 35: the analysis measures over 3 s windows instead of the demo's 5 s (its traffic raised to
    put as many requests in each): the same two measurements per stage, each a few seconds sooner."""
    monkeypatch.setattr(demo, "ANALYSIS_WINDOW_S", 3.0)


def test_demo_releases_shows_the_llmd_path_then_analysis_catches_a_slower_release(
        tmp_path: Path, example_catalog: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issues 17 and 18: a P/D model's request goes proxy -> EPP -> the decode pod's routing sidecar ->
    prefill -> KV -> decode with the pods named, and the smoke gateway checks pass through the router;
    the bad release is ready but 40% slower at p95 TTFT: readiness passes, the analysis its policy runs
    (real Prometheus, traffic through the router) fails stage 1 and the controller rolls back."""
    code = main(["demo", "--out", str(tmp_path), "--models", "llama-70b-pd,qwen-7b",
                 "--catalog", str(example_catalog)])
    out = capsys.readouterr().out
    summary = json.loads((tmp_path / "summary.json").read_text())
    pd, good = summary["models"]
    assert pd["ok"] and pd["smoke"].startswith("pass"), out
    assert good["ok"] and good["stages"] == "2/2" and good["smoke"].startswith("pass"), out
    assert good["digest"].startswith("sha256:") and good["makespan_s"] > 0
    # the llm-d request path, pods named, through the decode pod's own (rendered) sidecar
    path = summary["request_path"]
    assert path["checks"] == {k: True for k in path["checks"]}, path
    assert any(k.startswith("smoke gateway-pd: ") for k in path["checks"]), path
    assert re.fullmatch(r"llm-dev/llama-70b-pd-.+-decode-0", path["served_by"]["decode"]), path
    assert re.fullmatch(r"llm-dev/llama-70b-pd-.+-prefill-0", path["served_by"]["prefill"]), path
    assert path["headers"]["x-lwsflow-decode-endpoint"].endswith(":8000")  # the sidecar; vLLM on 8200
    assert "proxy   → EPP of InferencePool llm-dev/llama-70b-pd" in out
    assert "llm-d routing on for llama-70b-pd" in out
    # the slower release: ready, caught by the analysis at stage 1, rolled back by the controller
    bad = summary["bad_release"]
    assert bad["model"] == "qwen-7b"
    assert bad["checks"] == {k: True for k in bad["checks"]}, bad
    assert bad["checks"]["readiness passed, analysis failed at stage 1"]
    assert bad["live_images"] == [good["image"]]
    plain_mode = (tmp_path / "summary.json").stat().st_mode & 0o777  # what an ordinary write gets
    for picture in ("timeline.png", "stages.png"):
        assert (tmp_path / picture).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert (tmp_path / picture).stat().st_mode & 0o777 == plain_mode, picture  # not mkstemp's 0600
    assert not list(tmp_path.glob(".*.tmp"))
    # drawn from the cluster's records (the controller drove the rollouts): issue 27
    assert summary["pictures"] is True
    assert "✓ stages.png: qwen-7b's bad release failed a stage and was rolled back" in out
    assert "cluster on the old revision" in out
    assert ("bad release: rolled back at stage 1: hook failed: lwsflow: exit 1 analysis failed: "
            "ttft-p95=failed") in " ".join(out.split())
    assert "lwsflow.controller.errors" not in out and "Traceback" not in out
    # the GitOps path (issue 16): the controller's RBAC, a policy with a manual gate before the last
    # stage and the analysis check, two leader-elected replicas with the ServiceAccount's token
    assert ("rolloutpolicy llm-dev/qwen-7b → LeaderWorkerSet/qwen-7b: stages 1 → ⏸ 100% (⏸ a manual gate: "
            "kubectl lwsflow promote) + analysis after each stage") in " ".join(out.split())
    assert "system:serviceaccount:lwsflow-system:lwsflow-controller" in out
    assert re.search(r"dashboard http://127\.0\.0\.1:\d+/\s", out), out  # open while the demo runs
    reports = tmp_path / "reports"
    for release in ("release", "bad-release"):
        roll = json.loads((reports / release / "qwen-7b" / "rollout.json").read_text())
        assert roll["mode"] == "controller" and roll["policy"] == "qwen-7b", roll
    ctl = summary["controller"]
    assert ctl["leaders"] >= 1, ctl  # a replica took the Lease (the other stood by, or took over)
    assert "$ kubectl lwsflow promote qwen-7b -n llm-dev\n" in out
    assert [(p["policy"], p["stage"], p["rc"]) for p in ctl["promoted"]] == [("llm-dev/qwen-7b", "2", "0")]
    logs = "\n".join(ctl["log_lines"])
    assert "waits for promotion of stage 2" in logs and "succeeded" in logs, logs
    assert "llm-dev/qwen-7b: rolled back: stage 1 hook failed: lwsflow: exit 1 analysis failed" in logs, logs
    # an API refusal reads "403 Forbidden"; ports and hashes may hold "403"
    assert "orbidden" not in logs, logs
    assert code == 0


def test_demo_on_a_new_dev_prod_catalog_promotes_in_its_own_order(
        tmp_path: Path, example_catalog: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issues 13.1, 13.2, 13.9: a catalog a new user writes (tag-only images, ``[dev, prod]``):
    render works, releases go dev -> prod (no `staging` assumed), the first promotion releases the
    model in prod, and the bad release is caught by what its image says, not by its name."""
    from lwsflow.controller.yamlio import dump_yaml, load_yaml_documents

    doc = load_yaml_documents(example_catalog)[0]
    for m in doc["models"]:
        m["image"] = m["image"].split("@")[0]
    doc["environments"] = [{"name": "dev", "namespace": "llm-dev"}, {"name": "prod", "namespace": "llm-prod"}]
    catalog = tmp_path / "catalog.yaml"
    catalog.write_text(dump_yaml(doc))
    code = main(["demo", "--out", str(tmp_path / "out"), "--models", "llama-8b", "--catalog", str(catalog)])
    out = capsys.readouterr().out
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    good = summary["models"][0]
    assert good["ok"], out
    reports = tmp_path / "out" / "reports" / "release" / "llama-8b"
    assert json.loads((reports / "render.json").read_text())["target"] == "prod"
    assert json.loads((reports / "promote-prod.json").read_text())["commit"] == good["commit"]
    assert "staging" not in out
    bad = summary["bad_release"]
    assert bad["checks"] == {k: True for k in bad["checks"]}, bad
    assert "prod not promoted" in bad["checks"] and "dev pin reverted in git" in bad["checks"]
    assert "-broken" not in bad["bad_image"]  # no name pattern decides
    assert json.loads((reports / "rollout.json").read_text())["mode"] == "controller"
    assert bad["checks"]["rolled back by the in-cluster controller"]
    assert code == 0
