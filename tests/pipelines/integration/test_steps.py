"""The deploy-model steps on their own, with real buildah, registry and git (no cluster needed)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from lwsflow.components import gitwork, steps
from lwsflow.components.images import LocalRegistry
from lwsflow.controller.errors import InvalidInput, OperationFailed
from lwsflow.controller.yamlio import parse_yaml_documents

MODEL = "llama-8b"


def _show(repo_url: str, ref: str, path: str) -> str:
    with gitwork.checkout(repo_url) as work:
        gitwork.git("fetch", "--quiet", "origin", ref, cwd=work)
        return gitwork.git("show", f"FETCH_HEAD:{path}", cwd=work)


def test_build_render_validate_promote(gitops_repo, registry: LocalRegistry, tmp_path: Path) -> None:
    reports = tmp_path / "reports"
    built = steps.build_image(gitops_repo.url, "images/engine", f"{registry.host}/lwsflow/{MODEL}:v1",
                              report_dir=str(reports))
    assert built.image == f"{registry.host}/lwsflow/{MODEL}@{built.digest}"

    rendered = steps.render(gitops_repo.url, "catalog.yaml", MODEL, "dev", built.image,
                            report_dir=str(reports))
    main_before = gitwork.git("ls-remote", gitops_repo.url, "refs/heads/main").split()[0]
    assert rendered.branch == f"lwsflow/release-{MODEL}"
    kust = _show(gitops_repo.url, rendered.commit, f"overlays/dev/{MODEL}/kustomization.yaml")
    assert built.digest in kust and f"{registry.host}/lwsflow/{MODEL}" in kust

    checked = steps.build_overlays(gitops_repo.url, rendered.commit, "dev", MODEL, report_dir=str(reports))
    assert f"LeaderWorkerSet/{MODEL}" in checked.kinds
    with gitwork.checkout(gitops_repo.url, commit=rendered.commit, branch=rendered.branch) as work:
        release_manifest = steps.kustomize(work / "overlays" / "dev" / MODEL)  # what rollout applies
    assert checked.manifest_sha256 == hashlib.sha256(release_manifest.encode()).hexdigest()

    # Release -> main (dev): main fast-forwards to exactly the validated commit.
    dev = steps.promote(gitops_repo.url, MODEL, "dev", commit=rendered.commit, report_dir=str(reports))
    assert dev.commit == rendered.commit != main_before
    assert gitwork.git("ls-remote", gitops_repo.url, "refs/heads/main").split()[0] == dev.commit

    # dev -> staging through git: one more commit on main that pins the same digest in staging.
    staging = steps.promote(gitops_repo.url, MODEL, "staging", source="dev", report_dir=str(reports))
    assert staging.commit != dev.commit
    staged = _show(gitops_repo.url, staging.commit, f"overlays/staging/{MODEL}/kustomization.yaml")
    assert built.digest in staged
    with gitwork.checkout(gitops_repo.url) as work:
        built_staging = steps.kustomize(work / "overlays" / "staging" / MODEL)
    lws = next(d for d in parse_yaml_documents(built_staging) if d["kind"] == "LeaderWorkerSet")
    tpl = lws["spec"]["leaderWorkerTemplate"]
    images = [c["image"] for c in tpl.get("leaderTemplate", tpl["workerTemplate"])["spec"]["containers"]]
    assert images == [built.image]
    assert {p.name for p in reports.iterdir()} == {"build-image.json", "render.json", "build-overlays.json",
                                                   "promote-dev.json", "promote-staging.json"}
    assert json.loads((reports / "build-image.json").read_text())["digest"] == built.digest


def test_render_refuses_an_unpinned_image(gitops_repo) -> None:
    with pytest.raises(InvalidInput, match="not pinned by digest"):
        steps.render(gitops_repo.url, "catalog.yaml", MODEL, "dev", "127.0.0.1:5000/lwsflow/x:v1")


def test_promote_refuses_a_non_fast_forward_release(gitops_repo, registry: LocalRegistry) -> None:
    built = steps.build_image(gitops_repo.url, "images/engine", f"{registry.host}/lwsflow/{MODEL}:v1")
    rendered = steps.render(gitops_repo.url, "catalog.yaml", MODEL, "dev", built.image)
    # Someone else moves main meanwhile (a different model's pin): the release is not a descendant.
    other = steps.render(gitops_repo.url, "catalog.yaml", "qwen-7b", "dev", built.image)
    steps.promote(gitops_repo.url, "qwen-7b", "dev", commit=other.commit)
    with pytest.raises(OperationFailed, match="git merge failed"):
        steps.promote(gitops_repo.url, MODEL, "dev", commit=rendered.commit)


def test_build_image_step_fails_cleanly_on_a_bad_context(gitops_repo, registry: LocalRegistry) -> None:
    with pytest.raises(InvalidInput, match="not a directory"):
        steps.build_image(gitops_repo.url, "images/missing", f"{registry.host}/lwsflow/x:v1")


def test_rollout_target_from_manifests() -> None:
    lws = {"kind": "LeaderWorkerSet", "metadata": {"name": "a", "namespace": "n"}}
    pair = [{"kind": "LeaderWorkerSet", "metadata": {"name": f"p-{r}", "namespace": "n",
                                                     "labels": {"lwsflow.io/pd-pair": "p"}}}
            for r in ("prefill", "decode")]
    ds = {"kind": "DisaggregatedSet", "metadata": {"name": "d", "namespace": "n"}}
    assert steps.rollout_target([lws]) == ("lws/a", "n")
    assert steps.rollout_target(pair) == ("pair/p", "n")
    assert steps.rollout_target([{"kind": "Service", "metadata": {"name": "s"}}, ds]) == ("ds/d", "n")
    with pytest.raises(InvalidInput):
        steps.rollout_target([{"kind": "Service", "metadata": {"name": "s"}}])


def test_gitops_repo_from_a_relative_work_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              example_catalog: Path) -> None:
    """`lwsflow demo` defaults to a relative --out: the seeded remote must still be reachable."""
    from lwsflow.rehearsal.local_run import init_gitops_repo

    monkeypatch.chdir(tmp_path)
    repo = init_gitops_repo(Path("rel/work"), example_catalog)
    assert Path(repo.url).is_absolute()
    monkeypatch.chdir("/")
    assert gitwork.git("ls-remote", repo.url, "main").strip()


def test_promotion_follows_the_catalogs_environment_order() -> None:
    """Issue 13.2: no environment is assumed (no `staging`); first -> second -> ..."""
    assert steps.promotion(["dev", "prod"]) == ("dev", "prod")
    assert steps.promotion(["qa", "canary", "prod"], "canary") == ("canary", "prod")
    assert steps.promotion(["dev", "staging", "prod"], "dev", "prod") == ("dev", "prod")
    assert steps.promotion(["only"]) == ("only", "")  # one environment: promotes nowhere
    with pytest.raises(InvalidInput, match=r"source_env: unknown environment 'staging' .*dev, prod"):
        steps.promotion(["dev", "prod"], "staging")
    with pytest.raises(InvalidInput, match=r"target_env: 'dev' does not come after 'prod'"):
        steps.promotion(["dev", "prod"], "prod", "dev")


def test_single_environment_release_promotes_nowhere_and_says_so(
        tmp_path: Path, registry: LocalRegistry, capsys: pytest.CaptureFixture[str],
        example_catalog: Path) -> None:
    from lwsflow.controller.yamlio import dump_yaml, load_yaml_documents
    from lwsflow.rehearsal.local_run import init_gitops_repo

    doc = load_yaml_documents(example_catalog)[0]
    doc["environments"] = ["dev"]
    (tmp_path / "catalog.yaml").write_text(dump_yaml(doc))
    repo = init_gitops_repo(tmp_path / "git", tmp_path / "catalog.yaml")
    built = steps.build_image(repo.url, "images/engine", f"{registry.host}/lwsflow/{MODEL}:v1")
    rendered = steps.render(repo.url, "catalog.yaml", MODEL, "", built.image)
    assert (rendered.env, rendered.target) == ("dev", "")
    head = gitwork.git("ls-remote", repo.url, "refs/heads/main").split()[0]
    out = steps.promote(repo.url, MODEL, rendered.target, source=rendered.env, report_dir=str(tmp_path / "r"))
    assert (out.target, out.commit) == ("", head)  # main did not move
    assert "dev is the catalog's last environment; nothing to promote to" in capsys.readouterr().err
    report = json.loads((tmp_path / "r" / "promote-none.json").read_text())
    assert report["reason"] == "dev is the last environment"
