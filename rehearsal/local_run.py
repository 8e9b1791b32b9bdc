"""Run ``deploy-model`` on this machine through the kfp local runner, against local stand-ins.

The pipeline definition that compiles to ``pipelines/dist`` is the one that executes: kfp's
``SubprocessRunner(use_venv=False)`` runs each lightweight component as a subprocess of this Python
(lwsflow and kfp are installed here, nothing is pip-installed). What a cluster would provide comes
from local stand-ins: a GitOps repository (a bare git repo), a registry (``docker-registry``) and a
Kubernetes API (the embedded cluster, reached through a kubeconfig).
"""

from __future__ import annotations

import functools
import json
import re
import shutil
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lwsflow.components import gitwork
from lwsflow.controller.errors import InvalidInput
from lwsflow.controller.yamlio import parse_yaml_documents

if TYPE_CHECKING:
    from lwsflow.components.catalog import Catalog
    from lwsflow.sim.config import ImageProfile

_PLACEHOLDER = "bHdzZmxvdy1kZW1vLXBsYWNlaG9sZGVy"  # base64 "lwsflow-demo-placeholder", not a secret
ANSI = re.compile(r"\x1b\[[0-9;]*m")
# The image the demo deploys: FROM scratch (no base can be pulled offline), one engine config file.
# Its io.lwsflow.sim.profile label tells the embedded cluster how the image behaves (a bad release
# never becomes ready); the cluster reads it through the registry by digest (``image_source``).
ENGINE_CONTEXT = "images/engine"
CONTAINERFILE = """\
FROM scratch
COPY engine.json /etc/lwsflow/engine.json
LABEL org.opencontainers.image.title="lwsflow stand-in engine" org.opencontainers.image.source="lwsflow"
LABEL {label}='{profile}'
"""


@dataclass(frozen=True)
class GitopsRepo:
    """A bare repository (the remote every step clones) and the seed clone that created it."""

    url: str
    seed: Path


def write_engine_context(folder: Path, release: str, broken: bool = False,
                         profile: ImageProfile | None = None) -> None:
    """A build context for the stand-in engine image; ``release`` changes its content (and digest).
    Its label carries ``profile`` (how the image behaves), or a never-ready one when ``broken``."""
    from lwsflow.sim.config import IMAGE_PROFILE_LABEL, ImageProfile

    folder.mkdir(parents=True, exist_ok=True)
    label = (profile or ImageProfile(ready=not broken)).model_dump_json(exclude_defaults=True)
    (folder / "Containerfile").write_text(CONTAINERFILE.format(label=IMAGE_PROFILE_LABEL, profile=label))
    cfg = {"release": release, "engine": "stand-in"}
    (folder / "engine.json").write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")


def image_source(registry_host: str) -> Callable[[str], ImageProfile | None]:
    """What the embedded cluster asks about an image it has not seen (``Cluster.image_sources``):
    the ImageProfile in the image's label, read through the local registry; None for other hosts or
    an image without the label."""
    from lwsflow.components.images import image_labels
    from lwsflow.sim.config import IMAGE_PROFILE_LABEL, ImageProfile

    def profile(image: str) -> ImageProfile | None:
        if not image.startswith(f"{registry_host}/") or "@" not in image:
            return None
        label = image_labels(image, timeout=5.0).get(IMAGE_PROFILE_LABEL)
        return ImageProfile.from_label(label, source=image) if label else None

    return profile


def init_gitops_repo(root: Path, catalog: Path, release: str = "v1", *,
                     loaded: Catalog | None = None) -> GitopsRepo:
    """Create ``root/gitops.git`` with the catalog, the engine build context and the rendered overlays.

    ``loaded``: ``catalog`` already parsed by the caller, so it is not loaded a second time.
    """
    from lwsflow.components.catalog import load_catalog
    from lwsflow.components.overlays import render_to

    cat = loaded if loaded is not None else load_catalog(catalog)  # refuse a bad catalog before any git work
    root = root.resolve()  # the remote URL must not depend on the working directory of later steps
    bare, seed = root / "gitops.git", root / "gitops"
    for p in (bare, seed):
        if p.exists():
            shutil.rmtree(p)
    gitwork.git("init", "--quiet", "--bare", "--initial-branch=main", str(bare))
    gitwork.git("init", "--quiet", "--initial-branch=main", str(seed))
    env = gitwork.git_env()
    gitwork.git("config", "user.name", env["GIT_AUTHOR_NAME"], cwd=seed)
    gitwork.git("config", "user.email", env["GIT_AUTHOR_EMAIL"], cwd=seed)
    shutil.copyfile(catalog, seed / "catalog.yaml")
    write_engine_context(seed / ENGINE_CONTEXT, release)
    render_to(cat, seed / "overlays")
    gitwork.commit_all(seed, "lwsflow: catalog, engine image context, rendered overlays")
    gitwork.git("remote", "add", "origin", str(bare), cwd=seed)
    gitwork.git("push", "--quiet", "-u", "origin", "main", cwd=seed)
    return GitopsRepo(url=str(bare), seed=seed)


def commit_engine_context(repo: GitopsRepo, folder: str, release: str, broken: bool = False,
                          profile: ImageProfile | None = None) -> str:
    """Add another build context (e.g. a bad release) to main; returns the commit."""
    gitwork.git("pull", "--quiet", "--ff-only", cwd=repo.seed)
    write_engine_context(repo.seed / folder, release, broken, profile)
    gitwork.commit_all(repo.seed, f"engine image context {folder} ({release})")
    gitwork.git("push", "--quiet", "origin", "main", cwd=repo.seed)
    return gitwork.head(repo.seed)


@dataclass
class PipelineRun:
    """The outcome of one local deploy-model run: status, the failed task, and each step's report."""

    model: str
    succeeded: bool
    failed_task: str = ""
    error: str = ""
    wall_s: float = 0.0
    reports: dict[str, Any] = field(default_factory=dict)


def _reports(folder: Path) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for p in sorted(folder.glob("*.json")):
        try:
            out[p.stem] = json.loads(p.read_text())
        except (OSError, ValueError):
            continue
    return out


def run_deploy_model(*, model: str, repo_url: str, image: str, report_dir: Path, pipeline_root: Path,
                     kubeconfig: str = "", stages: str = "", image_context: str = ENGINE_CONTEXT,
                     source_env: str = "", target_env: str = "",
                     catalog: str = "catalog.yaml") -> PipelineRun:
    """Execute the kfp pipeline ``deploy-model`` locally; a failed task is reported, not raised."""
    from kfp import local

    from lwsflow.pipelines.deploy_model import deploy_model

    if not model:
        raise InvalidInput("empty model name", field="model")
    if report_dir.exists():
        shutil.rmtree(report_dir)  # a previous run's reports must not pass for this run's
    report_dir.mkdir(parents=True)
    pipeline_root.mkdir(parents=True, exist_ok=True)
    local.init(runner=local.SubprocessRunner(use_venv=False), pipeline_root=str(pipeline_root),
               raise_on_error=True)
    t0 = time.monotonic()
    run = PipelineRun(model=model, succeeded=True)
    try:
        with warnings.catch_warnings():
            # The runner warns that our base image is not a "python" image and that display names
            # are ignored locally: both expected here (the image only matters in a cluster).
            warnings.filterwarnings("ignore", message=".*base image", category=RuntimeWarning)
            warnings.filterwarnings("ignore", message=".*no effect in the current local runner")
            deploy_model(model=model, repo_url=repo_url, image=image, catalog=catalog,
                         image_context=image_context, source_env=source_env, target_env=target_env,
                         stages=stages, kubeconfig=kubeconfig, report_dir=str(report_dir))
    except RuntimeError as exc:  # kfp local: "Pipeline ... status FAILURE. Inner task failed: X"
        text = ANSI.sub("", str(exc))
        m = re.search(r"Inner task failed: '?([\w-]+)", text)
        run.succeeded, run.failed_task, run.error = False, (m.group(1) if m else "?"), text
    run.wall_s = time.monotonic() - t0
    run.reports = _reports(report_dir)
    return run


# -- the local stack: embedded cluster + API server, registry, GitOps repo -------------------------------

@dataclass
class LocalStack:
    """Everything a local deploy-model run talks to; ``close()`` stops it all."""

    cluster: Any
    api: Any
    engines: Any
    registry: Any
    repo: GitopsRepo
    kubeconfig: Path
    speed: float
    timeline: Any = None  # lwsflow.sim.timeline.Timeline: every LWS/DS over cluster time
    sim: Any = None  # lwsflow.sim.testing.EmbeddedCluster: the cluster, its API server and engines
    router: Any = None  # lwsflow.sim.router.Router: the stand-in llm-d path over the cluster's pools
    prometheus: Any = None  # lwsflow.components.prometheus.Prometheus following the serving pods

    def mark(self, label: str) -> None:
        """A labelled vertical line on the timeline picture at the cluster's current time."""
        if self.timeline is not None:
            self.timeline.mark(self.cluster.now(), label)

    def close(self) -> None:
        _stop_all(*(s.stop for s in (self.prometheus,) if s is not None),
                  *(r.close for r in (self.router,) if r is not None), self.sim.close, self.registry.stop)


def _stop_all(*stops: Callable[[], object]) -> None:
    for stop in stops:
        try:
            stop()
        except Exception:  # best effort: one failing stop must not leak the others
            continue


def _fill_placeholder(key: str, secret: dict[str, Any]) -> None:
    """Give ``secret`` a placeholder value under ``key`` unless it has one."""
    secret["data"].setdefault(key, _PLACEHOLDER)


def start_stack(workdir: Path, catalog_path: Path, speed: float = 600.0, *,
                loaded: Catalog | None = None, engine_options: dict[str, Any] | None = None,
                router: bool = False, prometheus: bool = False) -> LocalStack:
    """Start the embedded cluster (GPU pools, stand-in engines, HTTPS API on 127.0.0.1), a registry
    and a seeded GitOps repository, all under ``workdir``; ``loaded`` as in ``init_gitops_repo``;
    ``engine_options`` for every stand-in engine (an image's profile overrides them). ``router``: the
    stand-in llm-d router over the cluster's InferencePools; ``prometheus``: a real Prometheus
    scraping every second, with no targets until the caller has it ``follow`` some pods."""
    from lwsflow.components.catalog import load_catalog
    from lwsflow.components.images import LocalRegistry
    from lwsflow.rehearsal.catalog_cluster import cluster_config_for, secret_refs
    from lwsflow.sim.testing import EmbeddedCluster

    cat = loaded if loaded is not None else load_catalog(catalog_path)
    workdir.mkdir(parents=True, exist_ok=True)
    config = cluster_config_for(cat)
    # Realtime: start the virtual clock at wall time, so kubectl's client-side ages start sensible.
    sim = EmbeddedCluster(workdir, config, speed=speed, engines=True, now0=time.time(),
                          engine_options=engine_options)
    cluster = sim.cluster
    for env in cat.environments:
        ns = env.namespace or cat.namespace
        if cluster.store.try_get("namespaces", "", ns) is None:
            cluster.store.create("namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                "metadata": {"name": ns}, "status": {"phase": "Active"}})
    # what a platform team provisions before the first sync: the Secrets the pods read (placeholders)
    for ns, name, key in secret_refs(cat):
        if cluster.store.try_get("secrets", ns, name) is None:
            cluster.store.create("secrets", {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                                             "metadata": {"name": name, "namespace": ns}, "data": {}})
        cluster.store.mutate("secrets", ns, name, functools.partial(_fill_placeholder, key))
    registry = LocalRegistry()
    timeline = _record_timeline(cluster)
    stack: LocalStack | None = None
    try:
        # the registry first: the cluster learns image behaviour from the labels the build wrote there
        registry.start()
        cluster.image_sources.append(image_source(registry.host))
        sim.start()
        repo = init_gitops_repo(workdir, catalog_path, loaded=cat)
        stack = LocalStack(cluster, sim.api, sim.engines, registry, repo, sim.kubeconfig, speed, timeline,
                           sim)
        if router:
            from lwsflow.sim.router import Router

            stack.router = Router(cluster.store, seed=0)
        if prometheus:
            from lwsflow.components.prometheus import start_prometheus

            stack.prometheus = start_prometheus(1.0, workdir / "prometheus")  # targets: prometheus.follow
    except BaseException:
        if stack is not None:
            stack.close()
        else:
            _stop_all(sim.close, registry.stop)
        raise
    return stack


SAMPLE_EVERY_S = 15.0  # cluster seconds between timeline samples (only changes are kept)


def _record_timeline(cluster: Any) -> Any:
    """Sample every workload's counters on a recurring cluster timer.

    The timer runs in the cluster's own loop, under its lock, so sampling never races the
    controllers; it reschedules itself, so it must be armed before the loop thread starts.
    """
    from lwsflow.sim.timeline import Timeline

    timeline = Timeline(start=cluster.now())

    def tick() -> None:
        timeline.sample(cluster)
        cluster.at(cluster.now() + SAMPLE_EVERY_S, tick)

    cluster.at(cluster.now() + SAMPLE_EVERY_S, tick)
    return timeline


def seed_cluster(stack: LocalStack, env: str, models: list[str], deadline_s: float = 3600.0) -> float:
    """Install what main pins for ``env`` today (what Argo CD would have synced) and wait until ready.

    Gives the pipeline's release something to roll out *over*, so it is a staged update. Returns the
    cluster seconds it took.
    """
    from lwsflow.components import deploy, steps
    from lwsflow.controller.kube.client import Kube

    docs: list[dict[str, Any]] = []
    with gitwork.checkout(stack.repo.url) as work:
        for m in models:
            docs += parse_yaml_documents(steps.kustomize(work / "overlays" / env / m), source=f"{env}/{m}")
    kube = Kube.connect(str(stack.kubeconfig))
    deploy.apply_supporting(kube, docs)
    rep = deploy.install(kube, docs, deadline_s)
    return float(rep["ended"] - rep["started"])
