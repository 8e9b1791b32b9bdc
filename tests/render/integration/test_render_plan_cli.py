"""`lwsflow plan`: the table, the JSON, and one-line errors with exit code 2."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from lwsflow.cli import main
from tests.render.render_helpers import EXAMPLE_CATALOG, H100, LLAMA_405B, REPO, catalog_doc, model


def _write(tmp_path: Path, doc: dict[str, Any]) -> Path:
    path = tmp_path / "catalog.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def test_table_for_people(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", str(EXAMPLE_CATALOG)]) == 0
    out = capsys.readouterr().out
    for header in ("TP", "PP", "Size", "GPUs/pod", "GPUs/replica", "Nodes", "Headroom GiB", "Room for surge"):
        assert header in out
    row = next(line for line in out.splitlines() if "llama-405b" in line and "aggregated" in line)
    cells = [c.strip() for c in row.strip("│ ").split("│")]
    assert cells[:11] == ["llama-405b", "aggregated", "h100x8", "8", "2", "2", "8", "16", "2", "32", "4"]
    assert cells[12].startswith("yes (4/16 nodes)")
    assert "llama-405b/aggregated: 405B bf16: 754.4 GiB weights + 31.5 GiB KV exceed one node" in out
    assert "pool h100x8: all models together need 9 of 16 nodes (fits)" in out


def test_json_for_machines_with_env_overrides(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", str(EXAMPLE_CATALOG), "--json", "--env", "prod"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["env"] == "prod"
    rows = {(r["model"], r["role"]): r for r in report["roles"]}
    big = rows[("llama-405b", "aggregated")]
    assert {k: big[k] for k in ("tp", "pp", "size", "gpus_per_pod", "gpus_per_replica", "gpus_total",
                                "nodes_total", "fits_with_surge")} == {
        "tp": 8, "pp": 2, "size": 2, "gpus_per_pod": 8, "gpus_per_replica": 16, "gpus_total": 32,
        "nodes_total": 4, "fits_with_surge": True}
    assert rows[("llama-8b", "aggregated")]["replicas"] == 4  # prod override
    assert {r["role"] for r in report["roles"] if r["model"] == "llama-70b-pd"} == {"prefill", "decode"}
    assert [p["pool"] for p in report["pools"]] == ["h100x8", "l40sx4"]


@pytest.mark.parametrize(("doc", "fragment"), [
    (catalog_doc(model(LLAMA_405B, architecture={"layers": 126, "attentionHeads": 128, "kvHeads": 7,
                                                 "headDim": 128})),
     "models[llama-405b].architecture: kvHeads must divide attentionHeads"),
    (catalog_doc(LLAMA_405B, pools=[{**H100, "nodes": 1}]), "models[llama-405b].nodePool: needs 754.4 GiB"),
    (catalog_doc(model(LLAMA_405B, replicas=20)), "models[llama-405b].replicas: 20 replicas"),
], ids=["invalid", "pool-too-small", "too-many-replicas"])
def test_bad_catalog_is_one_line_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                        doc: dict[str, Any], fragment: str) -> None:
    path = _write(tmp_path, doc)
    assert main(["plan", str(path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and fragment in lines[0] and str(path) in lines[0]


@pytest.mark.parametrize("doc", [
    catalog_doc({**LLAMA_405B, "replicas": "three"}),
    catalog_doc(LLAMA_405B, pools=[{**H100, "nodes": 1}]),
    catalog_doc(model(LLAMA_405B, replicas=20)),
], ids=["invalid", "pool-too-small", "too-many-replicas"])
def test_plan_and_render_print_the_same_error_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                   doc: dict[str, Any]) -> None:
    """Issue 13.5: `plan` prefixed the file to sizing errors and `render` did not. One format for
    every command: ``error: FILE: field: message``."""
    path = _write(tmp_path, doc)
    assert main(["plan", str(path)]) == 2
    plan_err = capsys.readouterr().err
    assert main(["render", str(path), "--out", str(tmp_path / "out")]) == 2
    render_err = capsys.readouterr().err
    assert plan_err == render_err and plan_err.startswith(f"error: {path}: models")
    assert not (tmp_path / "out").exists()


def test_unknown_environment_and_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", str(EXAMPLE_CATALOG), "--env", "qa"]) == 2
    assert "unknown environment 'qa'" in capsys.readouterr().err
    assert main(["plan", str(tmp_path / "none.yaml")]) == 2
    assert "no such file" in capsys.readouterr().err


def test_console_script_end_to_end() -> None:
    proc = subprocess.run([str(REPO / ".venv" / "bin" / "lwsflow"), "plan", str(EXAMPLE_CATALOG), "--json"],
                          capture_output=True, text=True, timeout=60, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    assert len(json.loads(proc.stdout)["roles"]) == 8


@pytest.mark.parametrize("command", ["plan", "render"])
def test_fp8_looking_model_id_warns_on_stderr_and_renders(tmp_path: Path, command: str,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 13.7: an id that looks pre-quantized while the catalog says 16-bit warns (not fails)."""
    doc = model(LLAMA_405B, dtype="fp8", model="org/Llama-3.1-405B-Instruct-FP8",
                image="vllm/vllm-openai:v0.11.0@sha256:" + "a" * 64)
    path = _write(tmp_path, catalog_doc(doc))
    argv = ["plan", str(path)] if command == "plan" else ["render", str(path), "--out", str(tmp_path / "o")]
    assert main(argv) == 0
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith(f"warning: {path}: models[llama-405b].model: ")
    assert "looks like a pre-quantized fp8 checkpoint" in err[0]
    if command == "render":
        docs = [d for p in (tmp_path / "o").rglob("*.yaml") for d in yaml.safe_load_all(p.read_text())]
        lws = next(d for d in docs if d and d.get("kind") == "LeaderWorkerSet")
        args = lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]["args"]
        assert "--quantization fp8" in " ".join(args)
