"""Image pins and promotion as git commits: ``set_image`` (a fresh build into an environment) and
``promote`` (one environment's pin into the next).

Both follow one protocol, so a failure anywhere leaves the repository as it was:

1. refuse a path that is not a git work tree, a dirty tree (tracked or untracked changes), an
   unknown model or environment, a malformed digest, a source overlay that does not build;
2. compute the target overlay's new ``kustomization.yaml`` and build + validate it in a scratch
   copy of the two folders it reads (``base/<model>`` and ``<env>/<model>``);
3. only then replace the file (atomically) and make exactly one commit naming model, digest, source
   and target;
4. with ``push``: push to the branch's upstream; a rejected push (someone else pushed first) is
   fetched, rebased, re-validated and retried a bounded number of times; never forced. A rebase
   conflict (both changed the same overlay) is aborted and reported, leaving the local commit for a
   person to look at.

The first pin of a model into a digests-only environment (prod) also lists the model in that
environment's aggregate ``<env>/kustomization.yaml``, which held it back until then (see
``overlays``); both files change in the one commit.

Promotion carries only what should travel between environments: the digest pin (``images:``
entries with their ``newName``) and the rendered revision annotation. Namespace, replicas and
rollout settings stay the target environment's own.
"""

from __future__ import annotations

import random
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lwsflow.components.atomic import write_file_atomic
from lwsflow.components.kustomize import build_model_overlay, env_models, environments
from lwsflow.components.overlays import (
    DIGEST,
    KUSTOMIZATION,
    RENDERED_REVISION,
    ImageRef,
    aggregate_file,
    aggregate_order,
    base_image_refs,
    existing_pins,
    held_reason,
    listed_models,
    read_kustomization,
    safe_path,
    set_pins,
)
from lwsflow.components.proc import GIT_TIMEOUT_S, run_bounded
from lwsflow.controller.errors import InvalidInput, OperationFailed
from lwsflow.controller.yamlio import dump_yaml

MAX_PUSH_ATTEMPTS = 8


@dataclass(frozen=True)
class GitChange:
    """The outcome of a set-image or promote: the commit (None when nothing had to change)."""

    commit: str | None
    head: str
    model: str
    env: str
    digest: str
    path: str
    pushed: bool = False
    push_attempts: int = 0


# -- git plumbing --------------------------------------------------------------------------------------


def git(repo: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run git in ``repo`` (bounded); a failure with ``check`` is OperationFailed with git's last line."""
    proc = run_bounded(["git", "-C", str(repo), *args], what=f"git {args[0]}", timeout=GIT_TIMEOUT_S)
    if check and proc.returncode != 0:
        msg = [ln for ln in (proc.stderr + proc.stdout).splitlines() if ln.strip()]
        raise OperationFailed(f"git {' '.join(args[:2])}: {msg[-1].strip() if msg else 'failed'}")
    return proc


def _repo_root(repo: Path) -> Path:
    proc = git(repo, "rev-parse", "--show-toplevel", check=False) if repo.is_dir() else None
    if proc is None or proc.returncode != 0:
        raise InvalidInput("not a git work tree", field="repo", source=str(repo))
    return Path(proc.stdout.strip())


def _require_clean(root: Path) -> None:
    dirty = git(root, "status", "--porcelain", "--untracked-files=all").stdout.splitlines()
    if dirty:
        raise InvalidInput(
            f"working tree has uncommitted changes ({dirty[0][3:]}"
            f"{f' and {len(dirty) - 1} more' if len(dirty) > 1 else ''}); commit or stash first",
            field="repo",
            source=str(root),
        )


def _head(root: Path) -> str:
    return git(root, "rev-parse", "HEAD").stdout.strip()


# -- overlay edits -------------------------------------------------------------------------------------


def pin_entry(name: str, digest: str, new_name: str | None = None) -> dict[str, str]:
    """An ``images:`` entry in the key order the renderer writes (so a re-render is byte-identical)."""
    entry = {"name": name}
    if new_name:
        entry["newName"] = new_name
    entry["digest"] = digest
    return entry


def _check_digest(digest: str) -> None:
    if not DIGEST.match(digest):
        raise InvalidInput(f"{digest!r} is not a digest like sha256:<64 lowercase hex>", field="digest")


def _overlay(tree: Path, env: str, model: str) -> tuple[Path, dict[str, Any]]:
    known = environments(tree)
    if env not in known:
        raise InvalidInput(f"unknown environment {env!r} (known: {', '.join(known) or 'none'})", field="env")
    models = env_models(tree, env)
    if model not in models:
        raise InvalidInput(
            f"unknown model {model!r} in {env} (known: {', '.join(models) or 'none'})", field="model"
        )
    path = safe_path(tree, f"{env}/{model}/{KUSTOMIZATION}")
    doc = read_kustomization(path)
    assert doc is not None  # env_models found it
    return path, doc


def _base_image_names(tree: Path, model: str) -> list[str]:
    """The serving image's name(s): the containers', not a native sidecar's (llm-d's routing sidecar)."""
    return sorted({ImageRef.parse(r).name for r in base_image_refs(tree, model, init_containers=False)})


def _validate_in_scratch(tree: Path, env: str, model: str, doc: dict[str, Any]) -> None:
    """Build the edited overlay in a scratch copy: the repository is not touched until it passes."""
    with tempfile.TemporaryDirectory(prefix="lwsflow-gitops-") as tmp:
        scratch = Path(tmp)
        for rel in (f"base/{model}", f"{env}/{model}"):
            shutil.copytree(safe_path(tree, rel), scratch / rel, symlinks=True)
        write_file_atomic(scratch / env / model / KUSTOMIZATION, dump_yaml(doc).encode())
        build_model_overlay(scratch, env, model)


def _aggregate_after(tree: Path, env: str, model: str, new: dict[str, Any]) -> bytes | None:
    """``<env>/kustomization.yaml`` once ``model``'s overlay is ``new``: None when it stays as it is
    (the model was listed already, or still has no digest for a digests-only environment)."""
    path = safe_path(tree, f"{env}/{KUSTOMIZATION}")
    listed = listed_models(read_kustomization(path))
    if model in listed or held_reason(env, base_image_refs(tree, model), new):
        return None
    held: dict[str, str] = {}
    models = aggregate_order(path.read_bytes())
    for m in models:
        doc = new if m == model else read_kustomization(safe_path(tree, f"{env}/{m}/{KUSTOMIZATION}"))
        reason = held_reason(env, base_image_refs(tree, m), doc)
        if reason:
            held[m] = reason
    return aggregate_file(env, models if model in models else [*models, model], held)


def _identity(root: Path) -> list[str]:
    """``-c`` options naming lwsflow as committer when git has no identity (a bare pipeline pod)."""
    if git(root, "var", "GIT_COMMITTER_IDENT", check=False).returncode == 0:
        return []
    return ["-c", "user.name=lwsflow", "-c", "user.email=lwsflow@localhost"]


def _commit(root: Path, files: dict[Path, bytes], message: str) -> str:
    originals = {path: path.read_bytes() for path in files}
    rels = [path.relative_to(root).as_posix() for path in files]
    who = _identity(root)
    try:
        for path, data in files.items():
            write_file_atomic(path, data)
        git(root, "add", "--", *rels)
        git(root, *who, "commit", "-q", "-m", message, "--", *rels)
    except OperationFailed:
        for path, original in originals.items():  # e.g. no git identity: put the files back, no trace
            write_file_atomic(path, original)
        git(root, "reset", "-q", "--", *rels, check=False)
        raise
    return _head(root)


# -- push with rebase-retry ----------------------------------------------------------------------------


def _upstream(root: Path) -> tuple[str, str]:
    proc = git(root, "rev-parse", "--abbrev-ref", "--symbolic-full-name", "@{u}", check=False)
    if proc.returncode == 0 and "/" in proc.stdout:
        remote, _, branch = proc.stdout.strip().partition("/")
        return remote, branch
    branch = git(root, "rev-parse", "--abbrev-ref", "HEAD").stdout.strip()
    return "origin", branch


def _unpushed(root: Path) -> bool:
    """HEAD has commits the upstream branch (as last fetched) does not; True when there is none."""
    remote, branch = _upstream(root)
    proc = git(root, "rev-list", "--count", f"refs/remotes/{remote}/{branch}..HEAD", check=False)
    return proc.returncode != 0 or proc.stdout.strip() != "0"


def push_with_retry(
    root: Path, revalidate: tuple[Path, str, str] | None = None, attempts: int = MAX_PUSH_ATTEMPTS
) -> int:
    """Push HEAD; on rejection fetch, rebase, re-validate and retry. Returns the attempts used."""
    remote, branch = _upstream(root)
    for attempt in range(1, attempts + 1):
        proc = git(root, "push", "-q", remote, f"HEAD:refs/heads/{branch}", check=False)
        if proc.returncode == 0:
            return attempt
        text = proc.stderr + proc.stdout
        if not any(s in text for s in ("rejected", "fetch first", "non-fast-forward")):
            raise OperationFailed(
                f"git push to {remote}/{branch} failed: {(text.strip().splitlines() or ['?'])[-1].strip()}"
            )
        git(root, "fetch", "-q", remote, branch)
        rebase = git(root, *_identity(root), "rebase", "-q", "FETCH_HEAD", check=False)
        if rebase.returncode != 0:
            git(root, "rebase", "--abort", check=False)
            raise OperationFailed(
                f"push to {remote}/{branch} was rejected and the commit does not rebase "
                "cleanly (someone changed the same overlay); nothing was forced, the local "
                "commit is kept for review"
            )
        if revalidate is not None:
            build_model_overlay(*revalidate)
        # bounded backoff with jitter: racers that retried in lockstep would collide again
        time.sleep(random.uniform(0.5, 1.5) * min(0.05 * 2**attempt, 1.0))
    raise OperationFailed(f"push to {remote}/{branch} still rejected after {attempts} attempts")


# -- the two operations --------------------------------------------------------------------------------


def _apply(
    root: Path,
    tree: Path,
    env: str,
    model: str,
    path: Path,
    new: dict[str, Any],
    digest: str,
    message: str,
    push: bool,
) -> GitChange:
    rel = path.relative_to(root).as_posix()
    data = dump_yaml(new).encode()
    if data != path.read_bytes():
        _validate_in_scratch(tree, env, model, new)
        files = {path: data}
        aggregate = _aggregate_after(tree, env, model, new)
        if aggregate is not None:
            files[safe_path(tree, f"{env}/{KUSTOMIZATION}")] = aggregate
        sha = _commit(root, files, message)
        if not push:
            return GitChange(sha, sha, model, env, digest, rel)
    elif not (push and _unpushed(root)):
        return GitChange(None, _head(root), model, env, digest, rel)
    # a new commit, or one an earlier run made but died (or lost every push race) before
    # publishing: a rerun with --push must publish it, not report "nothing to do"
    used = push_with_retry(root, revalidate=(tree, env, model))
    head = _head(root)
    return GitChange(head, head, model, env, digest, rel, pushed=True, push_attempts=used)


def _locate(repo: str | Path, overlays: str | Path) -> tuple[Path, Path]:
    root = _repo_root(Path(repo))
    if Path(overlays).is_absolute() or ".." in Path(overlays).parts:
        raise InvalidInput("must be a folder inside the repository", field="overlays", source=str(overlays))
    _require_clean(root)
    return root, safe_path(root, str(overlays))


def set_image(
    model: str,
    env: str,
    digest: str,
    *,
    repo: str | Path = ".",
    overlays: str | Path = "overlays",
    image: str | None = None,
    push: bool = False,
) -> GitChange:
    """Pin ``model``'s serving image in ``env`` to ``digest`` (from repository ``image`` when given)."""
    _check_digest(digest)
    root, tree = _locate(repo, overlays)
    path, doc = _overlay(tree, env, model)
    names = _base_image_names(tree, model)
    if len(names) != 1:
        raise InvalidInput(
            f"model {model!r} uses {len(names)} images ({', '.join(names) or 'none'}); "
            "expected exactly one serving image",
            field="model",
        )
    if image is not None and (not image or "@" in image or ImageRef.parse(image).tag):
        raise InvalidInput(f"{image!r} must be an image repository without tag or digest", field="image")
    new = set_pins(doc, [pin_entry(names[0], digest, image)], "set-image")
    ref = f"{image or names[0]}@{digest}"
    message = (
        f"set-image {model} in {env}: {ref}\n\nmodel: {model}\nenvironment: {env}\n"
        f"image: {ref}\ndigest: {digest}\n"
    )
    return _apply(root, tree, env, model, path, new, digest, message, push)


def promote(
    model: str,
    source: str,
    target: str,
    *,
    repo: str | Path = ".",
    overlays: str | Path = "overlays",
    push: bool = False,
) -> GitChange:
    """Copy ``model``'s digest pin and rendered revision from ``source`` to ``target``; one commit."""
    if source == target:
        raise InvalidInput("source and target environment are the same", field="to")
    root, tree = _locate(repo, overlays)
    _, src = _overlay(tree, source, model)
    path, doc = _overlay(tree, target, model)
    pins = list(existing_pins(src).values())
    if not pins:
        raise InvalidInput(f"{source}/{model} has no image pinned by digest to promote", field="from")
    try:
        build_model_overlay(tree, source, model)
    except InvalidInput as exc:
        raise InvalidInput(f"source overlay does not build: {exc}", field="from") from None
    new = set_pins(doc, pins, f"promote from {source}")
    revision = (src.get("commonAnnotations") or {}).get(RENDERED_REVISION)
    if revision is not None:
        new["commonAnnotations"] = {**(new.get("commonAnnotations") or {}), RENDERED_REVISION: revision}
    digests = ", ".join(p["digest"] for p in pins)
    refs = ", ".join(f"{p.get('newName', p['name'])}@{p['digest']}" for p in pins)
    message = (
        f"promote {model} {digests} from {source} to {target}\n\nmodel: {model}\nsource: {source}\n"
        f"target: {target}\nimage: {refs}\n" + (f"rendered-revision: {revision}\n" if revision else "")
    )
    return _apply(root, tree, target, model, path, new, pins[0]["digest"], message, push)
