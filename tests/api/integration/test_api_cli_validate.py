"""`lwsflow validate`: exit codes, one line per problem, notes for other kinds, no tracebacks."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from lwsflow.cli import main
from lwsflow.controller.api.paths import lws_file, repo_root
from lwsflow.controller.yamlio import dump_yaml_documents
from tests.api.api_examples import DS_SAMPLE, LWS_SAMPLE, example


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[str], str]:
    """(exit code, the problems without their ``error: `` prefix, stderr); stdout stays empty."""
    code = main(["validate", *args])
    out, err = capsys.readouterr()
    assert out == ""
    return code, [ln.removeprefix("error: ") for ln in err.splitlines() if ln.startswith("error: ")], err


def test_upstream_examples_directory_is_valid(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, str(lws_file("config/samples")), str(lws_file("docs/examples")))
    assert code == 0 and out == [] and "error" not in err
    assert "18 object(s) checked, 0 problem(s)" in err  # v0.9.0: 18 LWS/DS documents
    assert "skipped Service/tensorrt-service (not a LeaderWorkerSet or DisaggregatedSet)" in err
    assert "skipped HorizontalPodAutoscaler/lws-hpa" in err


def test_problems_one_line_each_with_file_object_and_path(tmp_yaml, capsys) -> None:
    bad_lws = example(LWS_SAMPLE)
    bad_lws["spec"]["leaderWorkerTemplate"]["size"] = 0
    bad_lws["spec"]["rolloutStrategy"] = {"rollingUpdateConfiguration": {"maxSurge": 0, "maxUnavailable": 0}}
    bad_ds = example(DS_SAMPLE)
    bad_ds["spec"]["roles"][0]["spec"]["rolloutStrategy"]["rollingUpdateConfiguration"]["partition"] = 1
    bad_ds["spec"]["roles"][1]["spec"]["replicaz"] = 2
    svc = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "svc"}}
    f = tmp_yaml("deploy/all.yaml", dump_yaml_documents([bad_lws, svc, bad_ds]))
    tmp_yaml("deploy/nested/ok.yml", dump_yaml_documents([example(LWS_SAMPLE)]))
    tmp_yaml("deploy/readme.txt", "not yaml: [")  # not *.yaml: ignored
    code, out, err = run(capsys, str(f.parent))
    assert code == 2
    assert out == [
        f"{f}: LeaderWorkerSet/leaderworkerset-sample: spec.leaderWorkerTemplate.size: "
        "Invalid value: 0: must be greater than or equal to 1",
        f"{f}: LeaderWorkerSet/leaderworkerset-sample: spec.rolloutStrategy.rollingUpdateConfiguration."
        "maxUnavailable: Invalid value: 0: must not be 0 when maxSurge is 0",
        f"{f}: DisaggregatedSet/disaggregatedset-3role-sample: spec.roles[0].spec.rolloutStrategy."
        "rollingUpdateConfiguration.partition: Invalid value: 1: partition is not supported in a "
        "DisaggregatedSet role (must be unset or 0)",
        f"{f}: DisaggregatedSet/disaggregatedset-3role-sample: spec.roles[1].spec.replicaz: unknown field "
        "(the API server would drop it)",
    ]
    assert f"note: {f}: skipped Service/svc" in err
    assert "3 object(s) checked, 4 problem(s)" in err


@pytest.mark.parametrize(("content", "message"), [
    ("kind: LeaderWorkerSet\nspec: [\n", "invalid YAML at line 3"),
    (b"\xff\xfe\x00kind: x\n", "not UTF-8 text"),
    ("- just\n- a list\n", "<document 1>: not a mapping but a list"),
])
def test_unreadable_input_is_one_clear_line(tmp_yaml, capsys, content: str | bytes, message: str) -> None:
    f = tmp_yaml("bad.yaml", content)
    code, out, err = run(capsys, str(f))
    assert code == 2 and len(out) == 1 and out[0].startswith(f"{f}: ") and message in out[0]
    assert "Traceback" not in err


def test_missing_file_and_wrong_api_version(tmp_yaml, capsys) -> None:
    old = example(LWS_SAMPLE)
    old["apiVersion"] = "leaderworkerset.x-k8s.io/v1alpha1"
    f = tmp_yaml("old.yaml", dump_yaml_documents([old]))
    code, out, _ = run(capsys, str(f), str(f.parent / "missing.yaml"))
    assert code == 2
    assert out == [f"{f}: LeaderWorkerSet/leaderworkerset-sample: apiVersion: unsupported apiVersion "
                   "'leaderworkerset.x-k8s.io/v1alpha1' for LeaderWorkerSet",
                   f"{f.parent / 'missing.yaml'}: no such file"]


def test_quiet_and_empty_directory(tmp_path: Path, capsys) -> None:
    code, out, err = run(capsys, "--quiet", str(tmp_path))
    assert code == 0 and out == [] and "0 object(s) checked" in err and "note:" not in err
    code, _, err = run(capsys, str(tmp_path))
    assert code == 0 and "no *.yaml or *.yml files" in err


def test_console_script_end_to_end(tmp_yaml) -> None:
    bad = example(LWS_SAMPLE)
    bad["metadata"]["name"] = "Bad"
    f = tmp_yaml("x.yaml", dump_yaml_documents([bad]))
    exe = Path(sys.executable).parent / "lwsflow"
    proc = subprocess.run([str(exe), "validate", str(f)], capture_output=True, text=True, timeout=60,
                          cwd=repo_root())
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith(f"error: {f}: LeaderWorkerSet/Bad: metadata.name: Invalid value")
    assert "Traceback" not in proc.stderr


def test_validate_errors_use_the_one_error_format(tmp_path: Path, capsys) -> None:
    """Issue 13.5: every command prints problems as ``error: FILE: ...`` lines on stderr."""
    missing = tmp_path / "missing.yaml"
    assert main(["validate", "-q", str(missing)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.splitlines() == [f"error: {missing}: no such file",
                                              "0 object(s) checked, 1 problem(s)"]
    assert main(["plan", str(missing)]) == 2
    assert capsys.readouterr().err.splitlines() == [f"error: {missing}: no such file"]


def test_template_without_containers_is_one_line_naming_the_field(tmp_yaml, capsys) -> None:
    """`containers: []` passes the CRD schema and the webhook (a real cluster admits it) but every pod
    of the template is refused, so no group ever starts: validate names the field."""
    lws = example(LWS_SAMPLE)
    lws["spec"]["leaderWorkerTemplate"]["leaderTemplate"] = {"spec": {"containers": []}}
    ds = example(DS_SAMPLE)
    ds["spec"]["roles"][1]["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"] = []
    f = tmp_yaml("empty.yaml", dump_yaml_documents([lws, ds]))
    code, out, _ = run(capsys, str(f))
    assert code == 2
    tail = ("Required value: no container, so every pod of it is refused (the API server admits the object, "
            "its StatefulSet reports FailedCreate and no group ever starts)")
    assert out == [
        f"{f}: LeaderWorkerSet/leaderworkerset-sample: spec.leaderWorkerTemplate.leaderTemplate.spec."
        "containers: " + tail,
        f"{f}: DisaggregatedSet/disaggregatedset-3role-sample: spec.roles[1].spec.leaderWorkerTemplate."
        "workerTemplate.spec.containers: " + tail,
    ]
