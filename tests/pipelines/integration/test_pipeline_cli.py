"""`lwsflow pipeline compile|submit`, `build-image` and `demo` argument handling, in-process."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lwsflow.cli import main
from lwsflow.components.images import LocalRegistry
from lwsflow.pipelines.compile import DIST


def test_pipeline_compile_writes_both_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["pipeline", "compile", "--out", str(tmp_path)]) == 0
    for name in ("deploy-model.kfp.yaml", "deploy-model.argo.yaml"):
        assert (tmp_path / name).read_text() == (DIST / name).read_text()
    assert str(tmp_path / "deploy-model.argo.yaml") in capsys.readouterr().out


def test_pipeline_submit_without_an_endpoint_is_a_user_error(monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("KFP_HOST", raising=False)
    monkeypatch.delenv("ARGO_SERVER", raising=False)
    code = main(["pipeline", "submit", "--model", "m", "--repo-url", "r", "--image", "127.0.0.1:1/x:1"])
    assert code == 2
    assert "no pipeline endpoint" in capsys.readouterr().err


def test_submit_checks_the_placement_flags_like_compile(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["pipeline", "submit", "--model", "m", "--repo-url", "r", "--image", "127.0.0.1:1/x:1",
                 "--toleration", "nvidia.com/gpu"])
    assert code == 2
    assert capsys.readouterr().err.strip() == (
        "error: --toleration: 'nvidia.com/gpu': expected KEY[=VALUE]:EFFECT")


def test_submit_leaves_the_stages_to_the_catalog_unless_given() -> None:
    from lwsflow.cli.pipeline import run_arguments

    assert "stages" not in run_arguments("m", "r", "i")  # the pipeline's "" default: the catalog's stages
    assert run_arguments("m", "r", "i", " 1,50%,100% ")["stages"] == "1,50%,100%"
    # no environment assumed: the catalog's order applies unless the run names them
    assert not {"source_env", "target_env"} & run_arguments("m", "r", "i").keys()
    assert run_arguments("m", "r", "i", source_env="qa", target_env="prod") == {
        "model": "m", "repo_url": "r", "image": "i", "source_env": "qa", "target_env": "prod"}


def test_build_image_prints_the_pinned_reference(registry: LocalRegistry, build_context: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["build-image", str(build_context), "--image", f"{registry.host}/lwsflow/cli:1"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["reference"] == f"{registry.host}/lwsflow/cli@{out['digest']}"


def test_build_image_errors_are_one_line(build_context: Path, tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    with LocalRegistry() as reg:
        dead = reg.host
    assert main(["build-image", str(build_context), "--image", f"{dead}/lwsflow/x:1"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "unreachable" in err[0]
    assert main(["build-image", str(tmp_path / "missing"), "--image", f"{dead}/x:1"]) == 2
    assert "context" in capsys.readouterr().err


def test_demo_refuses_an_unknown_model(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--out", str(tmp_path), "--models", "no-such-model"]) == 2
    assert "models" in capsys.readouterr().err
