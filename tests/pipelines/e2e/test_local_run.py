"""deploy-model end to end through the kfp local runner: real buildah, registry, git, HTTPS API, engines.

Slow (each run starts the local stack and seven component subprocesses), so marked ``slow``; both
still finish in well under a minute on two cores, the cluster running in virtual time.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from lwsflow.components import gitwork
from lwsflow.rehearsal.local_run import (
    LocalStack,
    commit_engine_context,
    run_deploy_model,
    seed_cluster,
)

LWS_KEY = "leaderworkersets.leaderworkerset.x-k8s.io"
MODEL = "llama-70b"  # 2 groups in dev, stages 1,100%: a real two-stage rollout


@pytest.fixture
def stack(tmp_path: Path, example_catalog: Path) -> Iterator[LocalStack]:
    from lwsflow.rehearsal.local_run import start_stack

    s = start_stack(tmp_path / "work", example_catalog, speed=600.0)
    try:
        seed_cluster(s, "dev", [MODEL])  # dev runs the catalog's current pin: the release is an update
        yield s
    finally:
        s.close()


def _live(stack: LocalStack) -> dict:
    lws = stack.cluster.get(LWS_KEY, MODEL, "llm-dev")
    assert lws is not None
    return lws


def _images(lws: dict) -> set[str]:
    tpl = lws["spec"]["leaderWorkerTemplate"]
    return {c["image"] for t in ("leaderTemplate", "workerTemplate") if t in tpl
            for c in tpl[t]["spec"]["containers"]}


def _main_file(stack: LocalStack, path: str) -> str:
    with gitwork.checkout(stack.repo.url) as work:
        return (work / path).read_text()


def test_release_runs_every_step_and_promotes(stack: LocalStack, tmp_path: Path) -> None:
    run = run_deploy_model(model=MODEL, repo_url=stack.repo.url,
                           image=f"{stack.registry.host}/lwsflow/{MODEL}:v1",
                           report_dir=tmp_path / "reports", pipeline_root=tmp_path / "kfp",
                           kubeconfig=str(stack.kubeconfig))
    assert run.succeeded, run.error
    built = run.reports["build-image"]
    # the digest is what the registry serves
    head = httpx.head(f"http://{stack.registry.host}/v2/lwsflow/{MODEL}/manifests/v1",
                      headers={"Accept": "application/vnd.oci.image.manifest.v1+json"})
    assert head.headers["Docker-Content-Digest"] == built["digest"]
    roll = run.reports["rollout"]
    assert roll["result"] == "succeeded" and roll["targets"] == [1, 2]
    assert roll["stages_spec"] == "1,100%"  # no stages parameter: the catalog's for dev
    assert [s["result"] for s in roll["stages"]] == ["passed", "passed"]
    assert run.reports["smoke"]["passed"] is True
    # the cluster runs the new image on every group, all ready
    lws = _live(stack)
    assert _images(lws) == {built["reference"]}
    assert lws["status"]["readyReplicas"] == lws["status"]["updatedReplicas"] == 2
    # dev and staging on main pin the digest; staging's commit is main's head
    assert built["digest"] in _main_file(stack, f"overlays/dev/{MODEL}/kustomization.yaml")
    assert built["digest"] in _main_file(stack, f"overlays/staging/{MODEL}/kustomization.yaml")
    head_sha = gitwork.git("ls-remote", stack.repo.url, "refs/heads/main").split()[0]
    assert run.reports["promote-staging"]["commit"] == head_sha


def test_bad_release_is_caught_by_the_gate_and_rolled_back(stack: LocalStack, tmp_path: Path) -> None:
    """The bad image has an ordinary name: the cluster learns it never becomes ready from the
    ``io.lwsflow.sim.profile`` label the build wrote, read through the registry by digest (13.9)."""
    before = _images(_live(stack))
    staging_before = _main_file(stack, f"overlays/staging/{MODEL}/kustomization.yaml")
    dev_before = _main_file(stack, f"overlays/dev/{MODEL}/kustomization.yaml")
    commit_engine_context(stack.repo, "images/engine-broken", "v2-broken", broken=True)
    run = run_deploy_model(model=MODEL, repo_url=stack.repo.url,
                           image=f"{stack.registry.host}/lwsflow/{MODEL}:v2",
                           image_context="images/engine-broken", report_dir=tmp_path / "reports",
                           pipeline_root=tmp_path / "kfp", kubeconfig=str(stack.kubeconfig))
    assert not run.succeeded and run.failed_task == "rollout"
    bad = run.reports["build-image"]["digest"]
    assert stack.cluster.config.images[bad].ready is False  # learned from the image's own label
    assert stack.cluster.config.never_ready_images == []  # no name pattern anywhere
    roll = run.reports["rollout"]
    assert roll["result"] == "rolled-back" and roll["rollbacks"]
    assert roll["stages"][0]["result"] == "failed"  # the first stage's gate caught it
    assert "smoke" not in run.reports and "promote-staging" not in run.reports
    lws = _live(stack)
    assert _images(lws) == before  # back on the old revision, every group ready
    assert lws["status"]["readyReplicas"] == lws["status"]["replicas"] == 2
    assert _main_file(stack, f"overlays/staging/{MODEL}/kustomization.yaml") == staging_before
    # git agrees with the cluster: the dev pin of the refused release was reverted on main
    assert _main_file(stack, f"overlays/dev/{MODEL}/kustomization.yaml") == dev_before
    assert roll["reverted"] == gitwork.git("ls-remote", stack.repo.url, "refs/heads/main").split()[0]
