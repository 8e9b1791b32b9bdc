"""`lwsflow refcluster` without the Go-built binaries: input checks, errors and the pod lifecycle stages.

The cluster itself is exercised by the conformance tier (tests/conformance, `make conformance`).
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from lwsflow.cli import main
from lwsflow.rehearsal.refcluster import binaries, kwok_stages

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture
def empty_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("LWSFLOW_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.mark.parametrize(("args", "field"), [
    (["--ready-delay", "-1"], "--ready-delay"),
    (["--never-ready", " "], "--never-ready"),
    (["--catalog", "no-such-catalog.yaml"], "--catalog"),
    (["--timeout", "0"], "--timeout"),
])
def test_up_rejects_bad_input_before_starting_anything(
        tmp_path: Path, empty_cache: Path, capsys: pytest.CaptureFixture[str], args: list[str],
        field: str) -> None:
    state = tmp_path / "state"
    assert main(["refcluster", "up", "--state-dir", str(state), *args]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and field in err, err
    assert not state.exists()


def test_up_without_a_build_names_what_is_missing(tmp_path: Path, empty_cache: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    state = tmp_path / "state"
    assert main(["refcluster", "up", "--state-dir", str(state)]) == 1
    err = capsys.readouterr().err
    assert "kube-apiserver" in err and "scripts/build-refcluster" in err, err
    assert not state.exists()


def test_kubeconfig_and_down_when_nothing_is_up(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["refcluster", "kubeconfig", "--state-dir", str(tmp_path / "s")]) == 1
    assert "no reference cluster is up" in capsys.readouterr().err
    assert main(["refcluster", "down", "--state-dir", str(tmp_path / "s")]) == 0
    assert capsys.readouterr().out.strip() == "nothing was running"


def test_down_leaves_a_folder_it_did_not_make(tmp_path: Path) -> None:
    (tmp_path / "precious").write_text("x")
    assert main(["refcluster", "down", "--state-dir", str(tmp_path)]) == 0
    assert (tmp_path / "precious").exists()


def test_build_script_and_launcher_agree_on_the_cache_folder(empty_cache: Path) -> None:
    out = subprocess.run(["bash", str(REPO / "scripts" / "build-refcluster"), "--bin-dir"], check=True,
                         capture_output=True, text=True, timeout=30)
    assert Path(out.stdout.strip()) == binaries.bin_dir()
    assert binaries.bin_dir().is_relative_to(empty_cache)
    assert set(binaries.missing()) == {*binaries.PROGRAMS, "share/lws"}


@pytest.mark.parametrize(("pattern", "image", "matches"), [
    ("*never-ready*", "registry.local/llm:never-ready-1", True),
    ("*never-ready*", "registry.local/llm:v1", False),
    ("reg.io/bad:?", "reg.io/bad:1", True),
    ("reg.io/bad:?", "regxio/bad:1", False),  # the dot is literal
    ("reg.io/bad:?", "reg.io/bad:12", False),  # anchored
])
def test_never_ready_globs_become_anchored_regexes(pattern: str, image: str, matches: bool) -> None:
    # RE2 and Python agree on this subset (escaped punctuation, .*, ., ^, $)
    assert bool(re.search(kwok_stages.glob_to_re2(pattern), image)) is matches


def test_never_ready_pods_are_kept_out_of_the_ready_stage() -> None:
    plain = {s["metadata"]["name"]: s for s in kwok_stages.stages(2.0, [])}
    bad = {s["metadata"]["name"]: s for s in kwok_stages.stages(2.0, ["*never-ready*"])}
    assert plain["lwsflow-pod-ready"]["spec"]["delay"] == {"durationMilliseconds": 2000}
    extra = bad["lwsflow-pod-ready"]["spec"]["selector"]["matchExpressions"][-1]
    assert extra["operator"] == "NotIn" and "never\\\\-ready" in extra["key"]
    assert len(plain["lwsflow-pod-ready"]["spec"]["selector"]["matchExpressions"]) == 3


def test_batch_pods_have_their_own_stages_and_run_for_their_annotated_duration() -> None:
    """A pod with the run-duration annotation (check 6's jobs) skips the serving stages: Running and
    Ready at once, Succeeded after kwok's delay read from the annotation (kwok v0.8.0 StageDelay
    ``durationFrom``), with kwok's start and finish stamps written after each status patch."""
    by_name = {s["metadata"]["name"]: s for s in kwok_stages.stages(2.0, [])}
    ann = f'.metadata.annotations["{kwok_stages.RUN_DURATION_ANNOTATION}"]'

    def has(stage: str, op: str) -> bool:
        return {"key": ann, "operator": op} in by_name[stage]["spec"]["selector"]["matchExpressions"]

    assert has("lwsflow-pod-running", "DoesNotExist")
    assert has("lwsflow-job-running", "Exists") and has("lwsflow-job-complete", "Exists")
    complete = by_name["lwsflow-job-complete"]["spec"]
    assert complete["delay"]["durationFrom"] == {"jq": {"expression": ann}}
    status, stamp = complete["next"]["patches"]
    assert status["subresource"] == "status" and "phase: Succeeded" in status["template"]
    assert kwok_stages.FINISHED_AT_ANNOTATION in stamp["template"] and stamp["root"] == "metadata"
    running = by_name["lwsflow-job-running"]["spec"]["next"]["patches"]
    assert 'status: "True"\n  type: Ready' in running[0]["template"]
    assert kwok_stages.STARTED_AT_ANNOTATION in running[1]["template"]
