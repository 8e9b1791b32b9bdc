"""set-image and promote on real git repositories: one commit, the expected diff, pushes that race."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from lwsflow.cli import main
from lwsflow.components.gitops import promote, set_image
from lwsflow.components.kustomize import kustomize_build
from lwsflow.components.overlays import container_images, existing_pins, read_kustomization
from lwsflow.controller.errors import InvalidInput, OperationFailed
from tests.gitops.gitops_helpers import DIGEST_A, DIGEST_B, DIGEST_C, clone, git


def _pin(repo: Path, env: str, model: str) -> dict[str, dict[str, str]]:
    return existing_pins(read_kustomization(repo / "overlays" / env / model / "kustomization.yaml"))


def _changed_lines(repo: Path, rev: str = "HEAD") -> list[str]:
    diff = git(repo, "show", "--format=", "--unified=0", rev)
    return [ln for ln in diff.splitlines() if ln[:1] in "+-" and not ln.startswith(("+++", "---"))]


def test_set_image_commits_one_validated_change(repo: Path) -> None:
    head = git(repo, "rev-parse", "HEAD")
    change = set_image("small", "dev", DIGEST_B, repo=repo, image="reg.local/lwsflow/vllm")
    assert change.commit == git(repo, "rev-parse", "HEAD") != head
    assert git(repo, "rev-list", "--count", f"{head}..HEAD") == "1"
    assert git(repo, "show", "--name-only", "--format=", "HEAD") == "overlays/dev/small/kustomization.yaml"
    assert _changed_lines(repo) == [
        "+metadata:",
        "+  annotations:",
        "+    lwsflow.io/image-pin: set-image",
        f"-  digest: {DIGEST_A}",
        "+  newName: reg.local/lwsflow/vllm",
        f"+  digest: {DIGEST_B}",
    ]
    assert "small" in git(repo, "log", "-1", "--format=%s") and DIGEST_B in git(
        repo, "log", "-1", "--format=%s"
    )
    lws = next(o for o in kustomize_build(repo / "overlays" / "dev") if o["kind"] == "LeaderWorkerSet")
    assert set(container_images(lws)) == {f"reg.local/lwsflow/vllm@{DIGEST_B}"}
    assert git(repo, "status", "--porcelain") == ""
    again = set_image("small", "dev", DIGEST_B, repo=repo, image="reg.local/lwsflow/vllm")
    assert again.commit is None and git(repo, "rev-parse", "HEAD") == change.commit


def test_promote_copies_only_the_pin_and_pushes(repo: Path, remote: Path) -> None:
    set_image("small", "staging", DIGEST_B, repo=repo, image="reg.local/vllm")
    base = git(repo, "rev-parse", "HEAD")
    change = promote("small", "staging", "prod", repo=repo, push=True)
    assert git(repo, "rev-list", "--count", f"{base}..HEAD") == "1"
    assert git(repo, "show", "--name-only", "--format=", "HEAD") == "overlays/prod/small/kustomization.yaml"
    # only the image entry moved: prod keeps its replicas, namespace and rollout settings
    assert _changed_lines(repo) == [
        "+metadata:",
        "+  annotations:",
        "+    lwsflow.io/image-pin: promote from staging",
        f"-  digest: {DIGEST_A}",
        "+  newName: reg.local/vllm",
        f"+  digest: {DIGEST_B}",
    ]
    subject = git(repo, "log", "-1", "--format=%s")
    assert all(s in subject for s in ("small", DIGEST_B, "staging", "prod"))
    assert change.pushed and git(remote, "rev-parse", "main") == change.commit
    lws = next(o for o in kustomize_build(repo / "overlays" / "prod") if o["kind"] == "LeaderWorkerSet")
    assert lws["spec"]["replicas"] == 4 and set(container_images(lws)) == {f"reg.local/vllm@{DIGEST_B}"}


def test_promote_on_the_ds_model(repo: Path) -> None:
    set_image("pd", "staging", DIGEST_C, repo=repo)
    promote("pd", "staging", "prod", repo=repo)
    assert _pin(repo, "prod", "pd") == {"lmsysorg/sglang": {"name": "lmsysorg/sglang", "digest": DIGEST_C}}
    ds = next(o for o in kustomize_build(repo / "overlays" / "prod") if o["kind"] == "DisaggregatedSet")
    assert set(container_images(ds)) == {f"lmsysorg/sglang@{DIGEST_C}"}
    assert [r["spec"]["replicas"] for r in ds["spec"]["roles"]] == [1, 3]


def test_racing_promotions_both_land(remote: Path, tmp_path: Path) -> None:
    a = clone(remote, tmp_path / "a")
    b = clone(remote, tmp_path / "b")
    set_image("small", "staging", DIGEST_B, repo=a, push=True)
    set_image("pd", "staging", DIGEST_C, repo=b, push=True)  # rejected first: rebased onto a's commit
    git(a, "pull", "-q", "--rebase")
    git(b, "pull", "-q", "--rebase")
    results: dict[str, object] = {}
    barrier = threading.Barrier(2, timeout=30)

    def run(name: str, repo: Path, model: str) -> None:
        barrier.wait()
        try:
            results[name] = promote(model, "staging", "prod", repo=repo, push=True)
        except Exception as exc:  # reported below with its message
            results[name] = exc

    threads = [
        threading.Thread(target=run, args=("a", a, "small")),
        threading.Thread(target=run, args=("b", b, "pd")),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(isinstance(r, Exception) for r in results.values()), results
    attempts = sorted(r.push_attempts for r in results.values())  # type: ignore[attr-defined]
    assert attempts[0] == 1 and attempts[1] >= 2  # the loser was rejected, rebased and retried
    final = clone(remote, tmp_path / "check")
    assert _pin(final, "prod", "small")["vllm/vllm-openai"]["digest"] == DIGEST_B
    assert _pin(final, "prod", "pd")["lmsysorg/sglang"]["digest"] == DIGEST_C
    subjects = git(final, "log", "--format=%s").splitlines()
    assert sum(s.startswith("promote ") for s in subjects) == 2
    assert sum(s.startswith("set-image ") for s in subjects) == 2


def test_sequential_push_from_a_stale_clone_is_rebased(remote: Path, tmp_path: Path) -> None:
    a = clone(remote, tmp_path / "a")
    b = clone(remote, tmp_path / "b")
    set_image("small", "dev", DIGEST_B, repo=a, push=True)
    change = set_image("pd", "dev", DIGEST_C, repo=b, push=True)
    assert change.push_attempts == 2
    final = clone(remote, tmp_path / "check")
    assert _pin(final, "dev", "small")["vllm/vllm-openai"]["digest"] == DIGEST_B
    assert _pin(final, "dev", "pd")["lmsysorg/sglang"]["digest"] == DIGEST_C


def test_conflicting_race_is_reported_never_forced(remote: Path, tmp_path: Path) -> None:
    a = clone(remote, tmp_path / "a")
    b = clone(remote, tmp_path / "b")
    first = set_image("small", "dev", DIGEST_B, repo=a, push=True)
    with pytest.raises(OperationFailed, match="does not rebase cleanly"):
        set_image("small", "dev", DIGEST_C, repo=b, push=True)
    assert git(remote, "rev-parse", "main") == first.commit  # the other promotion was not overwritten
    assert git(b, "status", "--porcelain") == ""


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("small", "dev", "sha256:abc"), "not a digest"),
        (("small", "dev", "md5:" + "a" * 64), "not a digest"),
        (("nope", "dev", DIGEST_B), "unknown model 'nope'"),
        (("small", "qa", DIGEST_B), "unknown environment 'qa'"),
    ],
)
def test_invalid_set_image_changes_nothing(repo: Path, args: tuple[str, str, str], message: str) -> None:
    head = git(repo, "rev-parse", "HEAD")
    with pytest.raises(InvalidInput, match=message):
        set_image(*args, repo=repo)
    assert git(repo, "rev-parse", "HEAD") == head and git(repo, "status", "--porcelain") == ""


def test_invalid_promotions_leave_the_repo_untouched(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    head = git(repo, "rev-parse", "HEAD")

    def untouched() -> None:
        assert git(repo, "rev-parse", "HEAD") == head
        assert git(repo, "status", "--porcelain") == ""

    cases = [
        (["promote", "small", "--from", "staging", "--to", "qa"], "unknown environment 'qa'"),
        (["promote", "ghost", "--from", "staging", "--to", "prod"], "unknown model 'ghost'"),
        (["promote", "small", "--from", "prod", "--to", "prod"], "same"),
        (["set-image", "small", "--env", "dev", "--digest", "sha256:XYZ"], "not a digest"),
    ]
    for argv, message in cases:
        assert main([*argv, "--repo", str(repo)]) == 2, argv
        err = capsys.readouterr().err
        assert message in err and len(err.strip().splitlines()) == 1
        untouched()
    # a source overlay that does not build
    broken = repo / "overlays" / "staging" / "small" / "kustomization.yaml"
    broken.write_text(broken.read_text().replace("count: 2", "count: -1"))
    git(repo, "commit", "-qam", "break staging")
    head = git(repo, "rev-parse", "HEAD")
    assert main(["promote", "small", "--from", "staging", "--to", "prod", "--repo", str(repo)]) == 2
    assert "source overlay does not build" in capsys.readouterr().err
    untouched()
    # a dirty tree
    (repo / "notes.txt").write_text("wip\n")
    assert main(["promote", "pd", "--from", "staging", "--to", "prod", "--repo", str(repo)]) == 2
    assert "uncommitted changes (notes.txt)" in capsys.readouterr().err
    assert git(repo, "rev-parse", "HEAD") == head


def test_target_that_would_not_validate_is_not_committed(repo: Path) -> None:
    prod = repo / "overlays" / "prod" / "small" / "kustomization.yaml"
    prod.write_text(prod.read_text().replace("count: 4", "count: -4"))
    git(repo, "commit", "-qam", "break prod")
    head = git(repo, "rev-parse", "HEAD")
    set_image("small", "staging", DIGEST_B, repo=repo)
    with pytest.raises(InvalidInput, match=r"prod/small.*spec.replicas"):
        promote("small", "staging", "prod", repo=repo)
    assert git(repo, "rev-list", "--count", f"{head}..HEAD") == "1"  # only the set-image
    assert git(repo, "status", "--porcelain") == ""


def test_cli_prints_the_commit(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["set-image", "small", "--env", "staging", "--digest", DIGEST_B, "--repo", str(repo)]) == 0
    assert main(["promote", "small", "--from", "staging", "--to", "prod", "--repo", str(repo)]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert out[-1] == git(repo, "rev-parse", "HEAD")
