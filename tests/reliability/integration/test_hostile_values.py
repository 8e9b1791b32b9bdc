"""Hostile values, one parametrized case each, through the real CLI (`plan`, `render`, `validate`,
`set-image`, `promote`): the expected exit code and a one-line message naming the field (or the
file, for input that is not a document at all), no traceback, and nothing written.
"""

from __future__ import annotations

import copy
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from reliability.cli_harness import assert_refused, run_cli, snapshot, snapshot_changes, write_yaml
from reliability.strategies import example_catalog_doc, workload_docs

Doc = dict[str, Any]
DIGEST = "sha256:" + "0" * 64


def _set(path: tuple[Any, ...], value: Any) -> Callable[[Doc], Doc]:
    def edit(doc: Doc) -> Doc:
        node = doc
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value
        return doc

    return edit


M0, M3 = ("models", 0), ("models", 3)  # llama-8b (aggregated) and llama-70b-pd (disaggregated)

# (id, edit of examples/catalog.yaml, text the one error line must contain)
CATALOG_CASES: list[tuple[str, Callable[[Doc], Doc], str]] = [
    ("model-name-uppercase", _set((*M0, "name"), "Llama-8B"), "name"),
    ("model-name-underscore", _set((*M0, "name"), "llama_8b"), "name"),
    ("model-name-path-escape", _set((*M0, "name"), "../../etc"), "name"),
    ("model-name-newline", _set((*M0, "name"), "llama\nrm -rf"), "name"),
    ("model-name-too-long", _set((*M0, "name"), "a" * 41), "name"),
    ("model-name-trailing-newline", _set((*M0, "name"), "llama-8b\n"), "name"),
    ("stage-trailing-newline", _set((*M0, "rollout", "stages"), ["100%\n"]), "stages"),
    ("namespace-not-dns", _set(("namespace",), "kube_system"), "namespace"),
    ("env-name-path-escape", _set(("environments", 0, "name"), "../../tmp"), "name"),
    ("env-namespace-not-dns", _set(("environments", 0, "namespace"), "../llm"), "namespace"),
    ("pool-name-slash", _set(("nodePools", 0, "name"), "h100/x8"), "name"),
    ("secret-name-not-dns", _set((*M0, "hfTokenSecret", "name"), "HF Token"), "hfTokenSecret.name"),
    ("secret-key-space", _set((*M0, "hfTokenSecret", "key"), "the token"), "hfTokenSecret.key"),
    ("replicas-huge", _set((*M0, "replicas"), 10**30), "replicas"),
    ("replicas-negative", _set((*M0, "replicas"), -1), "replicas"),
    ("replicas-yaml-yes", _set((*M0, "replicas"), True), "replicas"),
    ("replicas-fractional", _set((*M0, "replicas"), 2.5), "replicas"),
    ("prefill-replicas-negative", _set((*M3, "prefill", "replicas"), -2), "prefill.replicas"),
    ("override-replicas-negative", _set(("environments", 0, "overrides", "llama-405b", "replicas"), -3),
     "replicas"),
    ("nodes-huge", _set(("nodePools", 0, "nodes"), 10**100), "nodes"),
    ("parameters-inf", _set((*M0, "parametersB"), float("inf")), "parametersB"),
    ("parameters-nan", _set((*M0, "parametersB"), float("nan")), "parametersB"),
    ("gpu-memory-negative", _set(("nodePools", 0, "gpuMemoryGiB"), -80), "gpuMemoryGiB"),
    ("max-model-len-int64", _set((*M0, "maxModelLen"), 2**63), "maxModelLen"),
    ("port-out-of-range", _set((*M0, "port"), 65536), "port"),
    ("stage-percent-150", _set((*M0, "rollout", "stages"), [1, "150%"]), "stages"),
    ("stage-percent-0", _set((*M0, "rollout", "stages"), ["0%"]), "stages"),
    ("max-unavailable-101", _set((*M0, "rollout", "maxUnavailable"), "101%"), "maxUnavailable"),
    ("max-surge-negative-percent", _set((*M0, "rollout", "maxSurge"), "-5%"), "maxSurge"),
    ("max-surge-negative", _set((*M0, "rollout", "maxSurge"), -1), "maxSurge"),
    ("bake-not-duration", _set((*M0, "rollout", "bake"), "5 minutes"), "bake"),
    ("gpu-label-value-spaces", _set(("nodePools", 0, "gpu"), "H100 80GB!"), "gpu"),
    ("node-selector-bad-key", _set(("nodePools", 0, "nodeSelector"), {"bad key": "x"}), "nodeSelector"),
    ("node-selector-empty-prefix", _set(("nodePools", 0, "nodeSelector"), {"/gpu": "x"}), "nodeSelector"),
    ("topology-key-bad", _set(("nodePools", 0, "topologyKey"), "not a key!"), "topologyKey"),
    ("model-cache-size-not-quantity", _set(("models", 2, "modelCache", "size"), "lots"), "modelCache.size"),
    ("secret-literal-in-env", _set((*M0, "env"), [{"name": "API_KEY", "value": "hunter2"}]), "env"),
    ("reserved-lws-env", _set((*M0, "env"), [{"name": "LWS_LEADER_ADDRESS", "value": "x"}]), "env"),
    ("unknown-key-privileged", _set((*M0, "privileged"), True), "privileged"),
    ("unknown-node-pool", _set((*M0, "nodePool"), "tpu-v5"), "nodePool"),
    ("does-not-fit", _set((*M0, "parametersB"), 99_999), "nodePool"),
]


@pytest.mark.parametrize("edit,field", [(e, f) for _, e, f in CATALOG_CASES],
                         ids=[i for i, _, _ in CATALOG_CASES])
@pytest.mark.parametrize("command", ["plan", "render"])
def test_hostile_catalog_value(command: str, edit: Callable[[Doc], Doc], field: str, rendered_tree: Path,
                               scratch: Path) -> None:
    catalog = write_yaml(scratch / "hostile.yaml", edit(example_catalog_doc()))
    before = snapshot(rendered_tree)
    argv = ["plan", catalog] if command == "plan" else ["render", catalog, "--out", rendered_tree]

    assert_refused(run_cli(argv), field)
    assert snapshot_changes(before, snapshot(rendered_tree)) == []


# -- documents that are not documents ------------------------------------------------------------------

BILLION_LAUGHS = "a: &a [x,x,x,x,x,x,x,x,x,x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{','.join(['*' + chr(97 + i)] * 10)}]\n" for i in range(8)
)
# (id, raw file content, text the error must contain; for `validate` too unless listed below)
RAW_CASES: list[tuple[str, bytes, str]] = [
    ("billion-laughs", BILLION_LAUGHS.encode(), "too many nodes"),
    ("deeply-nested-flow", ("[" * 5000 + "]" * 5000).encode(), "nested deeper"),
    ("deeply-nested-block", "".join(f"{'  ' * i}k{i}:\n" for i in range(200)).encode() + b"x: 1\n",
     "nested deeper"),
    ("not-utf8", b"namespace: llm\nmodels: [\xff\xfe\x80]\n", "not UTF-8"),
    ("utf16-bom", "namespace: llm\n".encode("utf-16"), "not UTF-8"),
    ("nul-bytes", b"namespace: \x00llm\n", "invalid YAML"),
    ("bad-syntax", b"models: [a, b\nnodePools: {", "invalid YAML"),
    ("tab-indent", b"models:\n\t- name: x\n", "invalid YAML"),
    ("python-tag", b"!!python/object/apply:os.system ['id']\n", "invalid YAML"),
    ("empty", b"", "expected one YAML document, found 0"),
    ("two-documents", b"namespace: a\n---\nnamespace: b\n", "expected one YAML document, found 2"),
    ("top-level-list", b"- a\n- b\n", "mapping"),
    ("top-level-scalar", b"42\n", "mapping"),
]
# `validate` takes any number of documents of any kind: these are not errors there (exit code, text)
VALIDATE_DIFFERS = {
    "empty": (0, ""),
    "two-documents": (0, ""),
    "top-level-list": (2, "not a mapping but a list"),
    "top-level-scalar": (2, "not a mapping but a int"),
}


@pytest.mark.parametrize("case,content,message", RAW_CASES, ids=[i for i, _, _ in RAW_CASES])
@pytest.mark.parametrize("command", ["plan", "render", "validate"])
def test_hostile_file(command: str, case: str, content: bytes, message: str, rendered_tree: Path,
                      scratch: Path) -> None:
    path = scratch / "raw" / "input.yaml"
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(content)
    before = snapshot(rendered_tree)

    if command == "validate":
        res = run_cli(["validate", "-q", path])
        code, message = VALIDATE_DIFFERS.get(case, (2, message))
        assert res.code == code, res.out + res.err
        errors = res.err.splitlines()[:-1]  # then the summary line
        assert message in res.err and "Traceback" not in res.text and res.out == ""
        assert all(ln.startswith(f"error: {path}: ") for ln in errors), res.err
        assert len(errors) == (1 if code else 0)
    else:
        argv = ["plan", path] if command == "plan" else ["render", path, "--out", rendered_tree]
        res = run_cli(argv)
        assert_refused(res, str(path))
        assert message in res.err
    assert snapshot_changes(before, snapshot(rendered_tree)) == []


def test_oversized_file_is_refused_without_reading_it(scratch: Path) -> None:
    path = scratch / "huge.yaml"
    with path.open("wb") as fh:  # sparse: 17 MiB on paper, nothing on disk
        fh.truncate(17 * 1024 * 1024)
    assert_refused(run_cli(["plan", path]), "larger than 16 MiB")


@pytest.mark.parametrize("target", ["missing.yaml", "."], ids=["missing-file", "a-directory"])
def test_catalog_path_that_is_not_a_file(target: str, scratch: Path) -> None:
    res = run_cli(["plan", scratch / target])
    assert_refused(res, "no such file" if target != "." else "is a directory")


# -- output folders ------------------------------------------------------------------------------------


def test_symlinked_output_folder_is_refused(example_catalog: Path, tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    before = snapshot(tmp_path)

    assert_refused(run_cli(["render", example_catalog, "--out", tmp_path / "link"]), "symlink")
    assert snapshot_changes(before, snapshot(tmp_path)) == []


@pytest.mark.parametrize("inner", ["prod", "prod/llama-8b", "base/llama-405b"])
def test_symlink_inside_the_tree_is_not_followed(inner: str, example_catalog: Path, tmp_path: Path) -> None:
    out = tmp_path / "overlays"
    assert run_cli(["render", example_catalog, "--out", out]).code == 0
    outside = tmp_path / "outside"
    outside.mkdir()
    victim = out / inner
    shutil.rmtree(victim)
    victim.symlink_to(outside)
    before = snapshot(tmp_path)

    res = run_cli(["render", example_catalog, "--out", out])

    assert_refused(res, "symlink")
    assert snapshot_changes(before, snapshot(tmp_path)) == []
    assert list(outside.iterdir()) == []


@pytest.mark.parametrize("where", ["file", "file/below"])
def test_output_path_through_a_file_is_refused(where: str, example_catalog: Path, tmp_path: Path) -> None:
    (tmp_path / "file").write_text("not a folder\n")
    before = snapshot(tmp_path)

    assert_refused(run_cli(["render", example_catalog, "--out", tmp_path / where]), "--out")
    assert snapshot_changes(before, snapshot(tmp_path)) == []


# -- set-image and promote -----------------------------------------------------------------------------


def _git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@localhost",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@localhost"}
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True,
                          env=env, timeout=30).stdout.strip()


@pytest.fixture(scope="module")
def gitops_repo(tmp_path_factory: pytest.TempPathFactory, example_catalog: Path) -> Path:
    """A git work tree holding the example catalog's rendered overlays, committed."""
    repo = tmp_path_factory.mktemp("gitops")
    _git(repo, "init", "-q", "-b", "main")
    assert run_cli(["render", example_catalog, "--out", repo / "overlays"]).code == 0
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "render")
    return repo


GITOPS_CASES: list[tuple[str, list[str], str]] = [
    ("digest-not-sha256", ["set-image", "llama-8b", "--env", "prod", "--digest", "latest"], "digest"),
    ("digest-short", ["set-image", "llama-8b", "--env", "prod", "--digest", "sha256:abc"], "digest"),
    ("digest-trailing-newline", ["set-image", "llama-8b", "--env", "prod", "--digest", DIGEST + "\n"],
     "digest"),
    ("digest-uppercase", ["set-image", "llama-8b", "--env", "prod", "--digest", "sha256:" + "A" * 64],
     "digest"),
    ("model-path-escape", ["set-image", "../../etc", "--env", "prod", "--digest", DIGEST], "model"),
    ("env-path-escape", ["set-image", "llama-8b", "--env", "../prod", "--digest", DIGEST], "env"),
    ("env-reserved-base", ["set-image", "llama-8b", "--env", "base", "--digest", DIGEST], "env"),
    ("image-with-tag", ["set-image", "llama-8b", "--env", "prod", "--digest", DIGEST, "--image",
                        "registry.example/vllm:latest"], "image"),
    ("overlays-escape", ["set-image", "llama-8b", "--env", "prod", "--digest", DIGEST, "--overlays",
                         "../elsewhere"], "overlays"),
    ("overlays-absolute", ["set-image", "llama-8b", "--env", "prod", "--digest", DIGEST, "--overlays",
                           "/etc"], "overlays"),
    ("promote-same-env", ["promote", "llama-8b", "--from", "prod", "--to", "prod"], "to"),
    ("promote-unknown-source", ["promote", "llama-8b", "--from", "../dev", "--to", "prod"], "env"),
    ("promote-unknown-model", ["promote", "no-such-model", "--from", "dev", "--to", "prod"], "model"),
]


@pytest.mark.parametrize("argv,field", [(a, f) for _, a, f in GITOPS_CASES],
                         ids=[i for i, _, _ in GITOPS_CASES])
def test_hostile_gitops_arguments(argv: list[str], field: str, gitops_repo: Path) -> None:
    head = _git(gitops_repo, "rev-parse", "HEAD")
    before = snapshot(gitops_repo / "overlays")

    assert_refused(run_cli([*argv, "--repo", gitops_repo]), field)
    assert _git(gitops_repo, "rev-parse", "HEAD") == head
    assert _git(gitops_repo, "status", "--porcelain") == ""
    assert snapshot_changes(before, snapshot(gitops_repo / "overlays")) == []


def test_gitops_refuses_a_folder_that_is_not_a_repository(tmp_path: Path) -> None:
    res = run_cli(["set-image", "llama-8b", "--env", "prod", "--digest", DIGEST, "--repo", tmp_path])
    assert_refused(res, "repo")
    assert list(tmp_path.iterdir()) == []


# -- manifests through validate ------------------------------------------------------------------------

LWS_CASES: list[tuple[str, tuple[Any, ...], Any, str]] = [
    ("replicas-negative", ("spec", "replicas"), -1, "spec.replicas"),
    ("replicas-over-int32", ("spec", "replicas"), 2**31, "spec.replicas"),
    ("replicas-string", ("spec", "replicas"), "three", "spec.replicas"),
    ("size-zero", ("spec", "leaderWorkerTemplate", "size"), 0, "spec.leaderWorkerTemplate.size"),
    ("max-unavailable-150", ("spec", "rolloutStrategy", "rollingUpdateConfiguration", "maxUnavailable"),
     "150%", "maxUnavailable"),
    ("max-surge-negative", ("spec", "rolloutStrategy", "rollingUpdateConfiguration", "maxSurge"), -1,
     "maxSurge"),
    ("partition-negative", ("spec", "rolloutStrategy", "rollingUpdateConfiguration", "partition"), -2,
     "partition"),
    ("name-not-dns", ("metadata", "name"), "Llama_405B", "metadata.name"),
    ("name-newline", ("metadata", "name"), "a\nb", "metadata.name"),
    ("name-trailing-newline", ("metadata", "name"), "llama\n", "metadata.name"),
    ("startup-policy", ("spec", "startupPolicy"), "Whenever", "spec.startupPolicy"),
]


@pytest.mark.parametrize("path,value,field", [(p, v, f) for _, p, v, f in LWS_CASES],
                         ids=[i for i, *_ in LWS_CASES])
def test_hostile_manifest_value(path: tuple[Any, ...], value: Any, field: str, scratch: Path) -> None:
    lws = copy.deepcopy(next(o for o in workload_docs() if o["kind"] == "LeaderWorkerSet"))
    manifest = write_yaml(scratch / "lws" / "lws.yaml", _set(path, value)(lws))

    res = run_cli(["validate", "-q", manifest])

    assert res.code == 2
    lines = res.err.splitlines()[:-1]  # then the summary line
    assert lines and all(ln.startswith(f"error: {manifest}: ") for ln in lines), res.err
    assert any(field in ln for ln in lines), res.err
    assert "Traceback" not in res.text


@pytest.mark.parametrize("name", ["prefill\n", "Prefill", "pre fill", "-prefill", "p" * 64])
def test_hostile_disaggregatedset_role_name(name: str, scratch: Path) -> None:
    ds = copy.deepcopy(next(o for o in workload_docs() if o["kind"] == "DisaggregatedSet"))
    ds["spec"]["roles"][0]["name"] = name
    manifest = write_yaml(scratch / "ds" / "ds.yaml", ds)

    res = run_cli(["validate", "-q", manifest])

    assert res.code == 2
    lines = res.err.splitlines()[:-1]  # then the summary line
    assert lines and all(ln.startswith(f"error: {manifest}: ") for ln in lines), res.err
    assert any("spec.roles[0]" in ln for ln in lines), res.err
