"""The six deploy-model steps as plain typed functions with structured outputs.

Each step is a thin adapter over library functions (``components`` and ``controller``; never the
CLI in ``pipelines``, which sits above this package). The kfp components and hera templates call
exactly these functions, so what runs locally is what runs in a cluster. Steps share nothing but the
GitOps repository (``repo_url``) and the cluster, as pods in a real pipeline do:

    build_image ─▶ render (release branch) ─▶ build_overlays ─▶ promote (release → main = source)
        ─▶ rollout (what main says for source) ─▶ smoke_test ─▶ promote (source → target)

The environments follow the catalog's own order: ``source`` defaults to its first environment and
``target`` to the one after ``source`` (none when ``source`` is the last: the release promotes
nowhere and says so). ``render`` resolves them and hands them on as outputs.

Every step logs what it does on stderr and writes its report as JSON under ``report_dir`` when given.
"""

from __future__ import annotations

import hashlib
import json
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lwsflow.components import gitwork, images
from lwsflow.components.atomic import write_file_atomic
from lwsflow.controller.api.phases import Result
from lwsflow.controller.errors import InvalidInput, OperationFailed
from lwsflow.controller.yamlio import parse_yaml_documents

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

OVERLAYS = "overlays"
RELEASE_BRANCH_PREFIX = "lwsflow/release-"
API_TOKEN_ENV = "LWSFLOW_API_TOKEN"


def log(step: str, message: str) -> None:
    print(f"[{step}] {message}", file=sys.stderr, flush=True)


def _write_report(report_dir: str, name: str, data: dict[str, Any]) -> str:
    if not report_dir:
        return ""
    path = Path(report_dir) / f"{name}.json"
    write_file_atomic(path, (json.dumps(data, indent=2, sort_keys=True) + "\n").encode())
    return str(path)


def _in_repo(work: Path, path: str) -> Path:
    """Paths given to steps are relative to the repository unless absolute (a local run)."""
    p = Path(path)
    return p if p.is_absolute() else work / p


def write_outputs(out: DataclassInstance, directory: str = "/tmp/outputs") -> None:
    """One file per output field, where an Argo template's ``valueFrom.path`` reads it."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    for k, v in asdict(out).items():
        (d / k).write_text(json.dumps(v) if isinstance(v, (bool, list, dict)) else str(v))


# -- 1. build-image -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class BuildImageOutput:
    image: str  # host/repo@sha256:...
    digest: str


def build_image(repo_url: str, context: str, image: str, report_dir: str = "") -> BuildImageOutput:
    """Build the serving image from ``context`` and push it to ``image``; output it pinned by digest.

    A relative ``context`` is a folder of the GitOps repository (cloned at main); an absolute one is
    used as it is (local runs).
    """
    log("build-image", f"building {context} -> {image}")
    if Path(context).is_absolute() or not repo_url:
        built = images.build_image(context, image)
    else:
        with gitwork.checkout(repo_url) as work:
            built = images.build_image(work / context, image)
    log("build-image", f"pushed {built.reference}")
    _write_report(report_dir, "build-image", built.to_dict())
    return BuildImageOutput(image=built.reference, digest=built.digest)


# -- 2. render ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class RenderOutput:
    commit: str  # the release commit (on the release branch), not yet on main
    branch: str
    changed: bool
    env: str = ""  # the environment the release is pinned in and rolled out to (source)
    target: str = ""  # where it is promoted once every gate passed ("": nowhere, the catalog's last)


def promotion(environments: list[str], source: str = "", target: str = "") -> tuple[str, str]:
    """``(source, target)`` in the catalog's environment order: source defaults to the first
    environment, target to the one after source ("" when source is the last)."""
    known = ", ".join(environments)
    source = source or environments[0]
    if source not in environments:
        raise InvalidInput(f"unknown environment {source!r} (the catalog's order: {known})",
                           field="source_env")
    after = environments[environments.index(source) + 1:]
    if not target:
        return source, after[0] if after else ""
    if target not in after:
        raise InvalidInput(f"{target!r} does not come after {source!r} in the catalog's environment order "
                           f"({known})", field="target_env")
    return source, target


def render(repo_url: str, catalog: str, model: str, env: str, image: str, target: str = "",
           report_dir: str = "") -> RenderOutput:
    """Render the catalog into the overlay tree; pin ``image`` (``repo@sha256:...``) for ``model`` in
    ``env`` (empty: the catalog's first environment); resolve the promotion ``target`` (see
    ``promotion``).

    The result is pushed to ``lwsflow/release-<model>`` so that validation can run before main moves.
    """
    from lwsflow.components import gitops
    from lwsflow.components.catalog import load_catalog
    from lwsflow.components.overlays import render_to

    repository, sep, digest = image.partition("@")
    if not sep:
        raise InvalidInput(f"{image!r} is not pinned by digest (repository@sha256:...)", field="image")
    branch = f"{RELEASE_BRANCH_PREFIX}{model}"
    with gitwork.checkout(repo_url) as work:
        cat = _in_repo(work, catalog)
        loaded = load_catalog(cat)
        env, target = promotion([e.name for e in loaded.environments], env, target)
        log("render", f"rendering {cat.name} into {OVERLAYS}/; environments in order "
            f"{' -> '.join(e.name for e in loaded.environments)}: release to {env}, then "
            f"{f'promote to {target}' if target else 'promote nowhere (the last environment)'}")
        changed = render_to(loaded, work / OVERLAYS)
        rendered = gitwork.commit_all(work, f"render {cat.name}: {len(changed)} file(s)")
        log("render", f"{len(changed)} file(s) changed; pinning {model} in {env} to {image}")
        gitops.set_image(model, env, digest, repo=work, overlays=OVERLAYS, image=repository)
        sha = gitwork.head(work)
        gitwork.push(work, f"HEAD:refs/heads/{branch}", force=True)  # the branch is this run's scratch
    log("render", f"release commit {sha[:12]} on {branch}")
    out = RenderOutput(commit=sha, branch=branch, changed=rendered, env=env, target=target)
    _write_report(report_dir, "render", asdict(out))
    return out


# -- 3. build-overlays --------------------------------------------------------------------------------
@dataclass(frozen=True)
class BuildOverlaysOutput:
    commit: str
    env: str
    objects: int
    kinds: list[str] = field(default_factory=list)
    manifest_sha256: str = ""


def kustomize(path: Path) -> str:
    """The built YAML of one overlay folder (Kustomize v5 through the venv's kubectl)."""
    from lwsflow.components.kustomize import kustomize_build
    from lwsflow.controller.yamlio import dump_yaml_documents

    return dump_yaml_documents(kustomize_build(path))


def build_overlays(repo_url: str, commit: str, env: str, model: str,
                   report_dir: str = "") -> BuildOverlaysOutput:
    """Build and validate ``env``'s overlays at ``commit``; describe the model's manifest."""
    from lwsflow.components.kustomize import build_model_overlay
    from lwsflow.components.kustomize import build_overlays as build_env
    from lwsflow.controller.yamlio import dump_yaml_documents

    with gitwork.checkout(repo_url, commit=commit, branch=f"{RELEASE_BRANCH_PREFIX}{model}") as work:
        log("build-overlays", f"kustomize build + validate {OVERLAYS}/{env} at {commit[:12]}")
        build_env(work / OVERLAYS, env)
        built = build_model_overlay(work / OVERLAYS, env, model)
    # the model overlay's own build, as ``kustomize()`` prints it (validation works on copies)
    text = dump_yaml_documents(built.objects)
    kinds = sorted(f"{d.get('kind')}/{d.get('metadata', {}).get('name')}" for d in built.objects)
    out = BuildOverlaysOutput(commit=commit, env=env, objects=len(built.objects), kinds=kinds,
                              manifest_sha256=hashlib.sha256(text.encode()).hexdigest())
    log("build-overlays", f"{len(kinds)} objects: {', '.join(kinds)}; images {', '.join(built.images)}")
    _write_report(report_dir, "build-overlays", asdict(out))
    return out


# -- 4. promote ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class PromoteOutput:
    commit: str  # the commit on main that carries the promotion
    target: str


def promote(repo_url: str, model: str, target: str, source: str = "", commit: str = "",
            report_dir: str = "") -> PromoteOutput:
    """Publish a promotion on main.

    ``source`` empty: ``commit`` is a validated release commit that pins ``target`` (from render); main
    fast-forwards to it (a non-fast-forward push is refused by git, never forced). Otherwise copy the
    ``source`` environment's pin to ``target`` with ``lwsflow promote --push`` (rebases on a race).
    ``target`` empty: ``source`` is the catalog's last environment; nothing is promoted, and it says so.
    """
    if source and not target:
        with gitwork.checkout(repo_url) as work:
            sha = gitwork.head(work)
        log("promote", f"{model}: {source} is the catalog's last environment; nothing to promote to")
        out = PromoteOutput(commit=sha, target="")
        _write_report(report_dir, "promote-none", {**asdict(out), "source": source,
                                                   "reason": f"{source} is the last environment"})
        return out
    if not source:
        if not commit:
            raise InvalidInput("promote without a source environment needs the release commit",
                               field="commit")
        with gitwork.checkout(repo_url) as work:
            gitwork.git("fetch", "--quiet", "origin", commit, cwd=work)
            gitwork.git("merge", "--quiet", "--ff-only", commit, cwd=work)
            gitwork.push(work, "HEAD:refs/heads/main")
            sha = gitwork.head(work)
        log("promote", f"main -> {sha[:12]} ({model} pinned in {target})")
    else:
        with gitwork.checkout(repo_url) as work:
            log("promote", f"{model}: {source} -> {target}")
            from lwsflow.components import gitops

            change = gitops.promote(model, source, target, repo=work, overlays=OVERLAYS, push=True)
            sha = change.head
        log("promote", f"{target} promoted at {sha[:12]}")
    out = PromoteOutput(commit=sha, target=target)
    _write_report(report_dir, f"promote-{target}", asdict(out))
    return out


# -- 5. rollout ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class RolloutOutput:
    target: str  # lws/NAME, pair/NAME or ds/NAME
    namespace: str
    passed: bool
    stages_passed: int
    stages_total: int
    makespan_s: float  # cluster (virtual) time from start to done
    report: str = ""


def rollout_target(docs: list[dict[str, Any]]) -> tuple[str, str]:
    """``(target, namespace)`` for the controller from a model's built manifest."""
    from lwsflow.controller.api import labels as L

    ds = [d for d in docs if d.get("kind") == L.DS_KIND]
    lws = [d for d in docs if d.get("kind") == L.LWS_KIND]
    if ds:
        meta = ds[0]["metadata"]
        return f"ds/{meta['name']}", meta.get("namespace", "default")
    if not lws:
        raise InvalidInput("the manifest has no LeaderWorkerSet or DisaggregatedSet", field="model")
    meta = lws[0]["metadata"]
    pair = meta.get("labels", {}).get(L.PD_PAIR)
    if pair and len(lws) == 2:
        return f"pair/{pair}", meta.get("namespace", "default")
    return f"lws/{meta['name']}", meta.get("namespace", "default")


def rollout(repo_url: str, commit: str, env: str, model: str, stages: str, kubeconfig: str = "",
            report_dir: str = "") -> RolloutOutput:
    """Roll out what ``env`` pins at ``commit``: the controller's partition stages with the smoke test
    as stage hook (an update), or apply-and-wait-ready (a first install). Fails after a rollback.

    Empty ``stages`` means the catalog's (the manifest's ``rollout-stages`` annotation); the bake and
    progress deadline always come from the catalog's annotations.
    """
    import tempfile

    from lwsflow.components import deploy
    from lwsflow.controller.api.duration import parse_duration
    from lwsflow.controller.kube.client import Kube

    with gitwork.checkout(repo_url, commit=commit) as work:
        text = kustomize(work / OVERLAYS / env / model)
    docs = parse_yaml_documents(text, source=f"{OVERLAYS}/{env}/{model}")
    target, namespace = rollout_target(docs)
    stages = stages or _annotation(docs, "rollout-stages")
    if not stages:
        raise InvalidInput("no stages given and the manifest has no rollout-stages annotation",
                           field="stages")
    deadline = _annotation(docs, "rollout-deadline") or "30m"
    out_dir = Path(report_dir) if report_dir else Path(tempfile.mkdtemp(prefix="lwsflow-rollout-"))
    out_dir.mkdir(parents=True, exist_ok=True)
    manifest, report = out_dir / f"manifest-{env}.yaml", out_dir / "rollout.json"
    manifest.write_text(text)
    report.unlink(missing_ok=True)  # never read a previous run's report as this one's

    kube = Kube.connect(kubeconfig or None)
    failure: Exception | None = None
    if deploy.apply_supporting(kube, docs):
        stages = "100%"
        log("rollout", f"{target} -n {namespace}: first install (nothing to stage), waiting until ready")
        try:
            installed = deploy.install(kube, docs, parse_duration(deadline, "deadline"))
            _write_report(str(out_dir), "rollout", installed)
            deploy.verify_live(kube, docs)
        except OperationFailed as exc:
            failure = exc
    else:
        replicas = min(int((d.get("spec") or {}).get("replicas") or 1) for d in deploy.workloads(docs))
        stages, dropped = deploy.feasible_stages(stages, replicas)
        if dropped:
            log("rollout", f"stages {', '.join(dropped)} dropped: no more groups than the stage before "
                f"at {replicas} replica(s)")
        from lwsflow.components import controller_mode  # incluster: a RolloutPolicy owns the target
        from lwsflow.controller.policy.wait import find_policy
        from lwsflow.controller.rollout.session import clock_for

        owner = find_policy(kube, namespace, *target.split("/", 1))
        if owner is not None:  # the in-cluster controller drives it: sync and wait for its verdict
            try:
                cdata = controller_mode.sync_and_wait(
                    kube, clock_for(kube), deploy.workloads(docs), owner,
                    # each stage's deadline, once per role of a pair (its roles move one after the
                    # other), plus two: the controller's rollback, and its resync latency at high speed
                    parse_duration(deadline, "deadline") * (len(stages.split(",")) + 2)
                    * len(deploy.workloads(docs)),
                    lambda m: log("rollout", m))
                _write_report(str(out_dir), "rollout", cdata)
                report.write_text(json.dumps(cdata))
                if cdata["result"] != "succeeded":
                    raise OperationFailed(f"rollout of {target} {cdata['result']} by the in-cluster "
                                          f"controller: {cdata['message']}")
                deploy.verify_live(kube, docs)
            except OperationFailed as exc:
                failure = exc
        else:
            log("rollout", f"{target} -n {namespace}: stages {stages}, smoke test after each stage")
            try:
                outcome = deploy.staged_rollout(
                    kube, target, namespace, manifest, stages=stages, deadline=deadline,
                    bake=_annotation(docs, "rollout-bake") or "0s",
                    hooks=[smoke_hook(target, kubeconfig)], log=lambda m: log("rollout", m))
                outcome.report.write(report)
                if outcome.exit_code != 0:
                    raise OperationFailed(f"rollout of {target} {outcome.result}: {outcome.message}")
                deploy.verify_live(kube, docs)
            except OperationFailed as exc:
                failure = exc
    data = json.loads(report.read_text()) if report.is_file() else {}
    if failure is not None and data.get("result") == Result.ROLLED_BACK:
        # The cluster is back on the old revision: put git back too, or a GitOps sync (Argo CD)
        # would re-apply the release the gate just refused.
        data["reverted"] = revert_release(repo_url, commit, f"{OVERLAYS}/{env}/{model}/kustomization.yaml",
                                          f"revert {model} in {env}: rollout rolled back")
        _write_report(str(out_dir), "rollout", data)
    out = RolloutOutput(target=target, namespace=namespace, passed=failure is None,
                        stages_passed=_stages_passed(data), stages_total=len(stages.split(",")),
                        makespan_s=_makespan(data), report=str(report))
    log("rollout", f"{'passed' if out.passed else 'FAILED'}: {out.stages_passed}/{out.stages_total} stages"
        f" in {out.makespan_s:.0f}s of cluster time")
    if failure is not None:
        raise failure
    return out


def revert_release(repo_url: str, commit: str, pin: str, message: str) -> str:
    """Revert ``commit`` on main and push, if it is the release's pin (it changed only ``pin``, and
    the environment's aggregate when that pin first released the model there); returns the revert
    commit, or "" when ``commit`` was something else (nothing reverted)."""
    aggregate = f"{pin.rsplit('/', 2)[0]}/kustomization.yaml"
    with gitwork.checkout(repo_url) as work:
        touched = gitwork.git("show", "--format=", "--name-only", commit, cwd=work).split()
        if pin not in touched or not set(touched) <= {pin, aggregate}:
            log("rollout", f"git: {commit[:12]} is not the pin of {pin} alone; nothing reverted")
            return ""
        gitwork.git("revert", "--no-edit", commit, cwd=work)
        gitwork.git("commit", "--quiet", "--amend", "-m", f"{message}\n\nThis reverts commit {commit}.",
                    cwd=work)
        gitwork.push(work, "HEAD:refs/heads/main")
        sha = gitwork.head(work)
    log("rollout", f"git: reverted {commit[:12]} on main ({sha[:12]})")
    return sha


def _annotation(docs: list[dict[str, Any]], key: str) -> str:
    """A catalog rollout setting (``lwsflow.io/<key>`` annotation) on the manifest's LWS/DS."""
    from lwsflow.controller.api import labels as L

    for d in docs:
        value = (d.get("metadata", {}).get("annotations") or {}).get(f"{L.LWSFLOW}/{key}")
        if d.get("kind") in (L.LWS_KIND, L.DS_KIND) and value:
            return str(value)
    return ""


def _stages_passed(report: dict[str, Any]) -> int:
    """Stages whose every record passed (a P/D pair has one record per role and stage)."""
    by_index: dict[int, bool] = {}
    for s in report.get("stages") or []:
        if isinstance(s, dict) and isinstance(s.get("index"), int):
            by_index[s["index"]] = by_index.get(s["index"], True) and s.get("result") == "passed"
    return sum(by_index.values())


def _makespan(report: dict[str, Any]) -> float:
    started, ended = report.get("started"), report.get("ended")
    if isinstance(started, float | int) and isinstance(ended, float | int):
        return float(ended - started)
    return 0.0


def smoke_hook(target: str, kubeconfig: str) -> Any:
    """The smoke test as the rollout's stage hook: each stage's new pods must serve before the next."""
    from lwsflow.components.smoke.report import failure_summary
    from lwsflow.controller.rollout.hooks import HookContext, HookResult

    def smoke(ctx: HookContext) -> HookResult:
        rep = _smoke(target, ctx.namespace, kubeconfig)
        return HookResult(rep.passed, f"smoke passed ({len(rep.checks)} checks)" if rep.passed
                          else failure_summary(rep))

    return smoke


def _smoke(target: str, namespace: str, kubeconfig: str) -> Any:
    import os

    from lwsflow.components.smoke.model import SmokeConfig
    from lwsflow.components.smoke.runner import run_smoke

    token = os.environ.get(API_TOKEN_ENV) or None  # from a Secret, never a parameter
    return run_smoke(SmokeConfig(targets=[target], namespace=namespace, kubeconfig=kubeconfig or None,
                                 token=token, revision_only=True))


# -- 6. smoke-test ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SmokeOutput:
    passed: bool
    checks_passed: int
    checks_total: int
    report: str = ""


def smoke_test(target: str, namespace: str, kubeconfig: str = "", report_dir: str = "") -> SmokeOutput:
    """Smoke-test the new revision's endpoints (``smoke.run_smoke``); fails when a check fails.

    The bearer token for the endpoints comes from ``$LWSFLOW_API_TOKEN`` (a Secret), never a parameter.
    """
    log("smoke-test", f"{target} -n {namespace} (new revision's pods)")
    rep = _smoke(target, namespace, kubeconfig)
    path = _write_report(report_dir, "smoke", rep.model_dump(mode="json"))
    ok = sum(1 for c in rep.checks if c.passed)
    ran = sum(1 for c in rep.checks if not c.skipped)
    out = SmokeOutput(passed=rep.passed, checks_passed=ok, checks_total=ran, report=path)
    for c in rep.failed():
        log("smoke-test", f"FAIL {c.name} {c.target}: {c.detail}")
    log("smoke-test", f"{'passed' if out.passed else 'FAILED'}: {ok}/{ran} checks")
    if not rep.passed:
        failed = rep.failed()
        why = f"{failed[0].name} on {failed[0].target}: {failed[0].detail}" if failed else "no check ran"
        raise OperationFailed(f"smoke test of {target} failed: {why}")
    return out
