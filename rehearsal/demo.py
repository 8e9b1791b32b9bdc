"""``lwsflow demo``: the whole release flow on a fresh machine, with no cluster, in a few minutes.

1. Start the local stack (``local_run.start_stack``): the embedded cluster with the catalog's
   GPU pools and stand-in engines behind an HTTPS Kubernetes API on 127.0.0.1, a ``docker-registry``
   and a bare GitOps repository holding the catalog, the engine build context and the overlays.
2. Install the in-cluster controller: overlays/controller's RBAC, a RolloutPolicy per model (the
   catalog's stages; a manual gate before the last stage of one model) and two ``lwsflow controller
   run --leader-elect`` processes with the ServiceAccount's token (``demo_controller``).
3. For each model, run the real ``deploy-model`` pipeline through the kfp local runner: build and push
   the image, render + pin, build overlays, promote to the catalog's first environment, rollout (in
   controller mode: the overlay is applied as Argo CD would, frozen by the partition, and the
   controller stages it; the demo passes the manual gate with ``kubectl lwsflow promote``), smoke
   test, promote to the next environment (the catalog's own order). Print a summary table and draw
   the rollouts' timeline.
4. Show a request's path through the stand-in llm-d router for a P/D model (the demo's catalog copy
   turns ``llmd:`` on for vLLM P/D models: InferencePool, HTTPRoute, routing sidecar on decode pods)
   and run the smoke test's gateway checks through it.
5. Release a bad image for one model: ready, but 40% slower at p95 TTFT (its image's behaviour
   profile). Readiness passes; the analysis its RolloutPolicy runs after each stage (``lwsflow analysis
   run`` against a real Prometheus, new revision against stable, traffic through the router) fails at
   the first stage and the controller rolls back; the demo checks the cluster is still on the good
   revision and the next environment was not promoted.
6. With ``--keep`` (``Keep``), leave the embedded cluster, the controller and the dashboard up after
   the checks, until Ctrl-C, so the rollouts can still be looked at and steered.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import signal
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table

from lwsflow.components import gitwork
from lwsflow.controller.api import labels as L
from lwsflow.controller.api.objects import container_images
from lwsflow.controller.errors import InvalidInput
from lwsflow.controller.kube.client import Kube
from lwsflow.controller.yamlio import parse_yaml_documents
from lwsflow.rehearsal import demo_controller
from lwsflow.rehearsal.local_run import (
    ANSI,
    LocalStack,
    PipelineRun,
    commit_engine_context,
    run_deploy_model,
)
from lwsflow.sim.config import IMAGE_PROFILE_LABEL, ImageProfile

if TYPE_CHECKING:
    from lwsflow.components.catalog import Catalog

# Wide enough for the summary table when the output is a log file rather than a terminal.
console = Console(highlight=False, width=None if sys.stdout.isatty() else 132)
BAD_CONTEXT = "images/engine-slower"
VERBOSE = [False]  # set by run_demo(verbose=...): show the runner's whole output
GOOD_TTFT_S = 0.045  # every stand-in engine's TTFT unless its image's profile says otherwise
SLOWER_FACTOR = 1.4  # the bad release: ready, 40% slower TTFT (`demo --bad-release`'s help says so)
SLOWER = ImageProfile(ttft_s=round(GOOD_TTFT_S * SLOWER_FACTOR, 4))
GATEWAY = "inference-gateway"  # the Gateway the demo's llm-d HTTPRoutes attach to
LOAD_RATE = 5.0  # analysis traffic through the router, requests per second (TTFTs are fixed: few suffice)
# The analysis's timescale in wall seconds (Prometheus's clock): the window each p95 is taken over. The
# demo's tests shorten it (tests/pipelines/e2e/test_demo.py); `lwsflow demo` keeps 5 s, which a person
# can follow.
ANALYSIS_WINDOW_S = 5.0


def analysis_spec(window_s: float) -> dict[str, Any]:
    """The analysis the analysed model's policy runs after each stage (a command check): p95 TTFT of the
    new revision against the stable one over the same window, no more than 10% worse. The stand-in
    engines serve vLLM's metric names whatever the engine. The first measurement waits a second more
    than the window, so it covers only time the new pods served (5 s: measured at 6 s and 8 s)."""
    interval = max(1, round(window_s * 0.4))
    return {"window": f"{window_s:g}s", "metrics": [{
        "name": "ttft-p95", "initialDelay": f"{window_s + 1:g}s", "interval": f"{interval}s", "count": 2,
        "failureLimit": 0, "inconclusiveLimit": 1,
        "provider": {"prometheus": {"query": (
            'histogram_quantile(0.95, sum by (le) (rate(vllm:time_to_first_token_seconds_bucket'
            '{namespace="{{namespace}}",lws="{{lws}}",revision="{{revision}}"}[{{window}}])))')}},
        "compare": {"mode": "relative", "tolerance": 10}}]}


def load_rate(window_s: float) -> float:
    """Requests per second of analysis traffic: as many per window as 5 s windows at ``LOAD_RATE`` get."""
    return round(LOAD_RATE * max(1.0, 5.0 / window_s), 1)


@dataclass
class Keep:
    """``--keep``: after its checks the demo keeps the embedded cluster, the controller and the
    dashboard up until ``stop`` is set (Ctrl-C or SIGTERM); ``up`` is set once they are kept, with
    ``dashboard_url`` and ``kubeconfig`` filled in, so a caller waits on it rather than on time."""

    stop: threading.Event = field(default_factory=threading.Event)
    up: threading.Event = field(default_factory=threading.Event)
    dashboard_url: str = ""
    kubeconfig: str = ""


@dataclass
class ModelResult:
    """One row of the summary table."""

    model: str
    ok: bool
    image: str = ""
    digest: str = ""
    commit: str = ""  # the target promotion on main (or the source one if it stopped earlier)
    stages: str = ""
    smoke: str = ""
    makespan_s: float = 0.0
    failed_task: str = ""
    wall_s: float = 0.0


def _result(run: PipelineRun) -> ModelResult:
    r = run.reports
    roll, smoke = r.get("rollout", {}), r.get("smoke", {})
    passed_stages = len({s["index"] for s in roll.get("stages", []) if s.get("result") == "passed"})
    checks = [c for c in smoke.get("checks", []) if not c.get("skipped")]
    ok_checks = sum(1 for c in checks if c.get("passed"))
    envs = r.get("render", {})  # the source and target environments the pipeline resolved
    commit = (r.get(f"promote-{envs.get('target') or 'none'}") or r.get(f"promote-{envs.get('env')}")
              or {}).get("commit", "")
    started, ended = roll.get("started"), roll.get("ended")
    return ModelResult(
        model=run.model, ok=run.succeeded, image=r.get("build-image", {}).get("reference", ""),
        digest=r.get("build-image", {}).get("digest", ""), commit=commit,
        stages=f"{passed_stages}/{roll.get('stagesTotal') or len(roll.get('targets', []))}" if roll else "-",
        smoke=(f"{'pass' if smoke.get('passed') else 'FAIL'} {ok_checks}/{len(checks)}" if smoke else "-"),
        makespan_s=(ended - started) if started and ended else 0.0, failed_task=run.failed_task,
        wall_s=run.wall_s)


def _table(results: list[ModelResult], title: str) -> Table:
    t = Table(title=title, title_justify="left")
    for col in ("model", "result", "digest", "commit", "stages passed", "smoke", "makespan (virtual)",
                "wall"):
        t.add_column(col)
    for x in results:
        t.add_row(x.model, "[green]ok[/]" if x.ok else f"[red]failed at {x.failed_task}[/]",
                  x.digest[:19] if x.digest else "-", x.commit[:12] or "-", x.stages, x.smoke,
                  f"{x.makespan_s / 60:.1f} min" if x.makespan_s else "-", f"{x.wall_s:.0f}s")
    return t


class _Progress(io.TextIOBase):
    """What the demo shows of a pipeline run: task starts and ends, step logs, errors (not kfp's
    executor-input dumps, tracebacks and HTTP logs; ``--verbose`` shows everything)."""

    _KEEP = re.compile(r"^\s*\[(build-image|render|build-overlays|promote|rollout|smoke-test)\]|"
                       r"Executing task|finished with status")
    # The last line of a failed task's traceback, e.g. "lwsflow.controller.errors.OperationFailed: msg".
    _ERROR = re.compile(r"^(?:[\w.]+\.)?(OperationFailed|InvalidInput|\w*Error): (.+)\Z")

    def __init__(self, sink: Any, show_failure: bool = True) -> None:
        # show_failure=False: the caller prints its own verdict line (the bad release)
        self._sink, self._buf, self._show_failure, self._task = sink, "", show_failure, ""

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        self._buf += text
        *lines, self._buf = self._buf.split("\n")
        for line in lines:
            plain = re.sub(r"^\d\d:\d\d:\d\d\.\d+ - \w+ - ", "", ANSI.sub("", line)).strip()
            task = re.search(r"Executing task '([\w-]+)'", plain)
            self._task = task.group(1) if task else self._task
            error = self._ERROR.match(plain)
            if error:  # one clean line naming the task, not the exception's module path
                kind, message = error.groups()
                expected = kind in ("OperationFailed", "InvalidInput")
                if self._show_failure or not expected:
                    self._sink.write(f"[{self._task or '?'}] {'failed' if expected else kind}: {message}\n")
            elif self._KEEP.search(plain):
                self._sink.write(plain + "\n")
        self._sink.flush()
        return len(text)


def _deploy(stack: LocalStack, out: Path, model: str, tag: str, context: str, label: str,
            show_failure: bool = True) -> PipelineRun:
    console.rule(f"[bold]deploy-model {model} ({label})")
    stack.mark(f"{model} {label}")
    if not VERBOSE[0]:
        show = _Progress(sys.stdout, show_failure)
        with contextlib.redirect_stdout(show), contextlib.redirect_stderr(show):
            return _run(stack, out, model, tag, context, label)
    return _run(stack, out, model, tag, context, label)


def _run(stack: LocalStack, out: Path, model: str, tag: str, context: str, label: str) -> PipelineRun:
    return run_deploy_model(model=model, repo_url=stack.repo.url,
                            image=f"{stack.registry.host}/lwsflow/{tag}",
                            report_dir=out / "reports" / label / model, pipeline_root=out / "kfp",
                            kubeconfig=str(stack.kubeconfig), image_context=context)


def _main_file(stack: LocalStack, path: str) -> str:
    with gitwork.checkout(stack.repo.url) as work:
        return (work / path).read_text()


def _live_image(stack: LocalStack, manifest_path: Path) -> tuple[str, list[str]]:
    """(namespace/name of the rolled-out object, the images its live pod templates carry)."""
    docs = parse_yaml_documents(manifest_path.read_text())
    obj = next(d for d in docs if d.get("kind") in ("LeaderWorkerSet", "DisaggregatedSet"))
    kind_key = ("leaderworkersets.leaderworkerset.x-k8s.io" if obj["kind"] == "LeaderWorkerSet"
                else "disaggregatedsets.disaggregatedset.x-k8s.io")
    meta = obj["metadata"]
    live = stack.cluster.get(kind_key, meta["name"], meta.get("namespace", "default")) or {}
    return f"{meta.get('namespace')}/{meta['name']}", sorted(set(container_images(live)))


def _bad_release(stack: LocalStack, out: Path, good: ModelResult, source_env: str,
                 target_env: str, controller: bool = False,
                 analysed: Analysed | None = None) -> tuple[bool, dict[str, Any], PipelineRun]:
    """Release an image for ``good.model`` that is ready but 40% slower at p95 TTFT; True when the
    analysis caught it at the first stage and the rollback held."""
    model = good.model
    target_path = f"overlays/{target_env or source_env}/{model}/kustomization.yaml"
    target_before = _main_file(stack, target_path)
    dev_path = f"overlays/{source_env}/{model}/kustomization.yaml"
    dev_before = _main_file(stack, dev_path)
    commit_engine_context(stack.repo, BAD_CONTEXT, "v2-slower", profile=SLOWER)
    console.print(f"[yellow]bad release:[/] {model} from {BAD_CONTEXT}; its image carries the label "
                  f"{IMAGE_PROFILE_LABEL}={SLOWER.model_dump_json(exclude_defaults=True)}, which the "
                  "embedded cluster reads through the registry by digest: its pods become ready, but answer "
                  f"{(SLOWER.ttft_s or 0) * 1000:g} ms to the first token where the stable release takes "
                  f"{GOOD_TTFT_S * 1000:g} ms (40% slower at p95)")
    with _traffic(stack, analysed):
        run = _deploy(stack, out, model, f"{model}:v2", BAD_CONTEXT, "bad-release",
                      show_failure=False)  # _verdict says how it ended, in one line
    res = _result(run)
    roll = run.reports.get("rollout", {})
    manifest = out / "reports" / "bad-release" / model / f"manifest-{source_env}.yaml"
    target, live_images = _live_image(stack, manifest) if manifest.is_file() else ("?", [])
    checks = {
        "pipeline failed at rollout": run.failed_task == "rollout",
        "rollout rolled back": roll.get("result") == "rolled-back" or bool(roll.get("rollbacks")),
        "cluster on the old revision": bool(live_images) and live_images == [good.image],
        f"{target_env or 'nothing'} not promoted": _main_file(stack, target_path) == target_before,
        f"{source_env} pin reverted in git": _main_file(stack, dev_path) == dev_before,
        "smoke test and promotion skipped":
            not {"smoke", f"promote-{target_env or 'none'}"} & run.reports.keys(),
    }
    if controller:  # the GitOps path: no step drove it, the policy's verdict is the controller's
        checks["rolled back by the in-cluster controller"] = (roll.get("mode") == "controller"
                                                              and roll.get("result") == "rolled-back")
    if analysed is not None:  # readiness passed; the analysis failed the first stage
        message = str(roll.get("message", ""))
        checks["readiness passed, analysis failed at stage 1"] = bool(
            re.match(r"(rolled back: )?stage 1 ", message) and "analysis failed" in message)
    detail = {"model": model, "target": target, "failed_task": run.failed_task,
              "rollout_result": roll.get("result"), "rollout_message": roll.get("message", ""),
              "live_images": live_images, "good_image": good.image, "bad_image": res.image, "checks": checks}
    console.print(_table([res], "bad release"))
    console.print(_verdict(run))
    for name, ok in checks.items():
        console.print(f"  {'[green]✓[/]' if ok else '[red]✗[/]'} {name}")
    return all(checks.values()), detail, run


def _verdict(run: PipelineRun) -> str:
    """One line on how a release ended: ``bad release: rolled back at stage 1: <reason>``."""
    roll = run.reports.get("rollout", {})
    if run.succeeded:
        return "bad release: not caught, it deployed"
    if roll.get("result") == "rolled-back":
        failed = [s.get("index") for s in roll.get("stages", []) if s.get("result") == "failed"]
        reasons = [rb.get("reason", "") for rb in roll.get("rollbacks", []) if isinstance(rb, dict)]
        reason = next((r for r in reasons if r), roll.get("message", "")).removeprefix("rolled back: ")
        where = f" at stage {failed[0]}" if failed else ""
        return f"bad release: rolled back{where}: {re.sub(r'^stage [0-9]+ ', '', reason)}"
    last = next((ln for ln in reversed(run.error.splitlines()) if ln.strip()), "") if run.error else ""
    return f"bad release: failed at {run.failed_task}: {last or 'see the step logs'}"


def _pictures(stack: LocalStack, out: Path, released: list[str], bad_model: str | None) -> bool:
    """``stages.png`` and ``timeline.png`` from what the cluster recorded (``lwsflow report``'s code);
    False (the demo fails) when they would not show every released model's stages and the rollback."""
    from lwsflow.rehearsal import demo_pictures

    paths, checks, empty = demo_pictures.draw(stack.kubeconfig, out, released, bad_model)
    if empty:
        console.print(f"[red]pictures: nothing to draw[/] ({empty}); no stages.png or timeline.png written")
    for picture in paths:
        console.print(f"picture: {picture}")
    for name, ok in checks.items():
        console.print(f"  {'[green]✓[/]' if ok else '[red]✗[/]'} {name}")
    return bool(paths) and all(checks.values())


@dataclass
class Analysed:
    """The model whose RolloutPolicy runs the analysis (and gets the bad release), with its traffic."""

    model: str
    namespace: str
    served: str  # the served model id the analysis traffic asks for
    spec_path: Path
    traffic: list[dict[str, int]] = field(default_factory=list)  # per release: sent, ok, errors, lost


@contextlib.contextmanager
def _traffic(stack: LocalStack, analysed: Analysed | None) -> Iterator[None]:
    """Seeded OpenAI traffic through the stand-in router while a release of the analysed model runs:
    the analysis needs requests on both revisions (the EPP spreads them by load)."""
    if analysed is None or stack.router is None:
        yield
        return
    from lwsflow.components.loadgen import LoadGenerator, LoadSpec

    url = stack.router.url
    # not streamed: a non-streaming answer's TTFT is the engine profile's, where a stream's is the
    # wall time it took, which a busy 2-core machine stretches at random (p95 of ~25 samples swings)
    load = LoadGenerator(LoadSpec(model=analysed.served, rate=load_rate(ANALYSIS_WINDOW_S), seed=7,
                                  max_tokens=(2, 4), prompt_words=(4, 24), stream_share=0.0),
                         lambda: [url]).start()
    try:
        yield
    finally:
        stats = load.stop()
        analysed.traffic.append({"sent": stats.sent, "ok": stats.ok, "errors": stats.errors,
                                  "lost": stats.lost})
        codes = ", ".join(f"{k or 'no answer'}: {v}" for k, v in sorted(stats.by_status.items()))
        console.print(f"analysis traffic: {stats.sent} requests through the router ({codes})")


def _with_llmd(catalog: Path, cat: Catalog, workdir: Path) -> tuple[Path, Catalog, list[str]]:
    """The demo's copy of the catalog with llm-d routing (``llmd:``) on for its vLLM P/D models, which
    renders their InferencePool and HTTPRoute and puts the routing sidecar on their decode pods;
    (path, catalog, the models it turned on). The catalog given is never changed."""
    from lwsflow.components.catalog import load_catalog
    from lwsflow.controller.yamlio import dump_yaml, load_yaml_documents

    doc = load_yaml_documents(catalog)[0]
    routed = [m.name for m in cat.models if m.disaggregated and m.engine == "vllm" and m.llmd is None]
    if not routed:
        return catalog, cat, []
    for m in doc.get("models") or []:
        if m.get("name") in routed:
            m["llmd"] = {"gateway": GATEWAY}
    workdir.mkdir(parents=True, exist_ok=True)
    path = workdir / "catalog-llmd.yaml"
    path.write_text(dump_yaml(doc))
    return path, load_catalog(path), routed


def run_demo(*, out: Path, catalog: Path, models: list[str], bad_release: bool = True,
             speed: float = 600.0, seed: bool = True, verbose: bool = False, keep: Keep | None = None) -> int:
    """The demo; returns the exit code (0 when every release deployed and the bad one was caught).
    With ``keep``, everything stays up after the checks until ``keep.stop`` is set."""
    from lwsflow.components.catalog import load_catalog
    from lwsflow.rehearsal.local_run import seed_cluster, start_stack

    t0 = time.monotonic()
    VERBOSE[0] = verbose
    out = out.resolve()  # kfp runs steps in other working directories: every path handed on is absolute
    cat = load_catalog(catalog)
    known = [m.name for m in cat.models]
    chosen = models or known
    for m in chosen:
        if m not in known:
            raise InvalidInput(f"unknown model {m!r} (known: {', '.join(known)})", field="models")
    out.mkdir(parents=True, exist_ok=True)
    console.print(f"[bold]lwsflow demo[/]: {len(chosen)} model(s) from {catalog}; artifacts in {out}")
    catalog, cat, routed = _with_llmd(catalog, cat, out / "work")
    routed = [m for m in routed if m in chosen]
    stack = start_stack(out / "work", catalog, speed=speed, loaded=cat,
                        engine_options={"ttft_s": GOOD_TTFT_S}, router=True, prometheus=bad_release)
    ctl: demo_controller.Controllers | None = None
    dash = None
    try:
        console.print(f"embedded cluster {stack.api.base_url} (x{speed:g} virtual time, "
                      f"{len(stack.cluster.config.pools)} pools), registry {stack.registry.host}, "
                      f"git {stack.repo.url}; kubeconfig {stack.kubeconfig}")
        from lwsflow.dashboard import serve

        dash = serve(str(stack.kubeconfig), namespace=None)  # open while the demo runs (docs/dashboard.md)
        console.print(f"dashboard {dash.url} (`lwsflow dashboard -A`: the rollouts live; open it now; "
                      + ("it stays up after the demo until Ctrl-C)" if keep else "it stops with the demo, "
                         "`--keep` keeps it)"))
        console.print(f"stand-in llm-d router {stack.router.url} (proxy + EPP over the cluster's "
                      "InferencePools)" + (f", Prometheus {stack.prometheus.url} (scrapes the analysed "
                                           "model's pods every second)" if stack.prometheus else ""))
        if routed:
            console.print(f"llm-d routing on for {', '.join(routed)} (the demo's catalog copy sets llmd: "
                          f"{{gateway: {GATEWAY}}}): InferencePool + HTTPRoute rendered, llm-d's routing "
                          "sidecar on the decode pods (8000, vLLM behind it on 8200)")
        envs = [e.name for e in cat.environments]
        source, target = envs[0], (envs[1] if len(envs) > 1 else "")
        console.print(f"environments in the catalog's order: {' → '.join(envs)}; releases go to {source}, "
                      + (f"then promote to {target}" if target else
                         f"and promote nowhere ({source} is the catalog's only environment)"))
        if seed:
            took = seed_cluster(stack, source, chosen)
            console.print(f"{source} runs the currently pinned release of {len(chosen)} model(s) "
                          f"(ready after {took / 60:.1f} min of cluster time); now releasing new images")
        analysed: Analysed | None = None
        if seed:
            ctl, analysed = _start_controller(stack, out, source, chosen, cat, bad_release)
        real = sys.stdout  # the promoter says what it ran while a pipeline's output is filtered
        promoter = (demo_controller.Promoter(Kube.connect(str(stack.kubeconfig)), stack.kubeconfig,
                                             lambda text: print(text, file=real, flush=True))
                    if ctl is not None else None)
        with promoter or contextlib.nullcontext():
            code = _releases(stack, out, chosen, source, target, bad_release, t0, ctl, promoter, analysed,
                             routed, cat)
        if keep is not None:
            _keep_up(keep, stack, dash.url, ctl is not None, speed)
        return code
    finally:
        if ctl is not None:
            ctl.stop()
        if dash is not None:
            dash.stop()
        stack.close()


def _keep_up(keep: Keep, stack: LocalStack, dashboard_url: str, controller: bool, speed: float) -> None:
    """Hold everything up until ``keep.stop`` (Ctrl-C, SIGTERM, or a caller) after saying how to reach it."""
    keep.dashboard_url, keep.kubeconfig = dashboard_url, str(stack.kubeconfig)
    console.print(f"[bold]--keep:[/] dashboard {dashboard_url}, "
                  + ("the in-cluster controller, " if controller else "")
                  + f"the embedded cluster {stack.api.base_url} (x{speed:g} virtual time) stay up until "
                  f"Ctrl-C; in another terminal: export KUBECONFIG={stack.kubeconfig}, then "
                  "`kubectl lwsflow get -A` or `kubectl get lws -A`")
    main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, lambda *_: keep.stop.set()) if main else None
    keep.up.set()
    try:
        with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C is how a kept demo ends
            keep.stop.wait()
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    console.print("--keep: stopping the dashboard, the controller and the embedded cluster")


def _analysis_target(cat: Catalog, env: str, chosen: list[str],
                     planned: list[tuple[str, str, list[str], str, str]]) -> tuple[str, str] | None:
    """(model, namespace) the bad release goes to: the first LeaderWorkerSet rolled out in more than one
    stage (stage 1 leaves stable pods to compare with) whose served model no other chosen model serves
    (the router picks the pool by the request's model)."""
    served = {m: cat.for_environment(m, env).model for m in chosen}
    for target, ns, stages, _, _ in planned:
        kind, name = target.split("/", 1)
        if kind == "lws" and len(stages) > 1 and list(served.values()).count(served.get(name, "")) == 1:
            return name, ns
    return None


def _inference_pool(model: str, namespace: str, port: int) -> dict[str, Any]:
    """What a platform team's llm-d install has for an aggregated model: a pool over its leader pods."""
    return {"apiVersion": "inference.networking.k8s.io/v1", "kind": "InferencePool",
            "metadata": {"name": model, "namespace": namespace},
            "spec": {"selector": {"matchLabels": {"lwsflow.io/model": model,
                                                  "leaderworkerset.sigs.k8s.io/worker-index": "0"}},
                     "targetPorts": [{"number": port}],
                     "endpointPickerRef": {"name": f"{model}-epp", "port": {"number": 9002}}}}


def _start_controller(stack: LocalStack, out: Path, env: str, models: list[str], cat: Catalog,
                      analysis: bool) -> tuple[demo_controller.Controllers, Analysed | None]:
    """The GitOps path: the controller's RBAC, a RolloutPolicy per model, two leader-elected replicas;
    the analysed model's policy runs ``lwsflow analysis run`` after each stage (a command check)."""
    from lwsflow.controller.kube.resources import Resource
    from lwsflow.controller.yamlio import dump_yaml

    admin = Kube.connect(str(stack.kubeconfig))
    sa_kubeconfig = out / "work" / "controller-sa.kubeconfig"
    sa = demo_controller.install_rbac(admin, stack.kubeconfig, sa_kubeconfig)
    planned = demo_controller.plan_policies(stack.repo.url, env, models)
    found = _analysis_target(cat, env, models, planned) if analysis and stack.prometheus else None
    analysed: Analysed | None = None
    checks: dict[str, list[dict[str, Any]]] = {}
    if found is not None:
        model, ns = found
        spec_path = out / "work" / "analysis.yaml"
        spec_path.write_text(dump_yaml(analysis_spec(ANALYSIS_WINDOW_S)))
        analysed = Analysed(model, ns, cat.for_environment(model, env).model, spec_path)
        # only the analysed model's serving pods: scraping every engine each second costs CPU for nothing
        selector = f"{L.NAME}={model}"
        stack.prometheus.follow(lambda: stack.cluster.store.list("pods", ns, label_selector=selector)[0])
        admin.apply(Resource("inference.networking.k8s.io", "v1", "inferencepools"),
                    _inference_pool(model, ns, cat.for_environment(model, env).port),
                    field_manager="llm-d-install")
        checks[f"lws/{model}"] = [{"name": "analysis", "command": {"timeoutSeconds": 120, "command": [
            "lwsflow", "analysis", "run", str(spec_path), "--revision", "auto", "--kubeconfig",
            str(sa_kubeconfig), "--prometheus", stack.prometheus.url]}}]
    policies = demo_controller.create_policies(admin, planned, checks)
    ctl = demo_controller.Controllers(sa, out).start(replicas=2)
    console.print("in-cluster controller: overlays/controller RBAC applied; 2 replicas of `lwsflow "
                  f"controller run --leader-elect` as system:serviceaccount:{demo_controller.SYSTEM_NS}:"
                  f"{demo_controller.SERVICE_ACCOUNT} (logs {out}/controller-*.log)")
    for p in policies:
        stages = " → ".join(("⏸ " if "pause" in s else "") + str(s["groups"]) for s in p["spec"]["stages"])
        ref = p["spec"]["targetRef"]
        console.print(f"rolloutpolicy {p['metadata']['namespace']}/{p['metadata']['name']} → "
                      f"{ref['kind']}/{ref['name']}: stages {stages}"
                      + (" (⏸ a manual gate: kubectl lwsflow promote)" if any("pause" in s for s in
                                                                            p["spec"]["stages"]) else "")
                      + (" + analysis after each stage" if any(s.get("checks") for s in p["spec"]["stages"])
                         else ""))
    if analysed is not None:
        console.print(f"analysis: after each stage {analysed.namespace}/{analysed.model}'s policy runs "
                      "`lwsflow analysis run --revision auto` (the new revision's p95 TTFT against the "
                      f"stable one's, at most 10% worse, over {ANALYSIS_WINDOW_S:g} s windows of Prometheus "
                      f"data), while {load_rate(ANALYSIS_WINDOW_S):g} req/s of seeded traffic go through the "
                      f"router to InferencePool {analysed.namespace}/{analysed.model}")
    return ctl, analysed


def _releases(stack: LocalStack, out: Path, chosen: list[str], source: str, target: str, bad_release: bool,
              t0: float, ctl: demo_controller.Controllers | None,
              promoter: demo_controller.Promoter | None, analysed: Analysed | None,
              routed: list[str], cat: Catalog) -> int:
    """Release every model, show the llm-d request path, then a bad release; the summary."""
    runs = []
    for m in chosen:
        with _traffic(stack, analysed if analysed is not None and analysed.model == m else None):
            runs.append(_deploy(stack, out, m, f"{m}:v1", "images/engine", "release"))
    results = [_result(r) for r in runs]
    console.print(_table(results, f"deploy-model: build → render → build-overlays → promote {source} → "
                                  f"rollout → smoke → promote {target or 'nowhere'}"))
    summary: dict[str, Any] = {"models": [asdict(x) for x in results]}
    code = 0 if all(x.ok for x in results) else 1
    ok = {x.model for x in results if x.ok}
    shown = next((m for m in routed if m in ok), None)
    if shown is not None:
        console.rule("[bold]the llm-d request path")
        path_ok, summary["request_path"] = _request_path(stack, cat, shown, source)
        code = code or (0 if path_ok else 1)
    if bad_release:
        good = (next((x for x in results if x.ok and x.model == analysed.model), None)
                if analysed is not None else None)
        if good is None:
            console.print("bad release: skipped (no released LeaderWorkerSet with a staged rollout to "
                          "analyse)")
        else:
            console.rule("[bold]a bad release")
            caught, detail, bad = _bad_release(stack, out, good, source, target,
                                               controller=ctl is not None, analysed=analysed)
            summary["bad_release"] = detail
            runs.append(bad)
            code = code or (0 if caught else 1)
    bad_model = summary["bad_release"]["model"] if "bad_release" in summary else None
    drawn = _pictures(stack, out, [x.model for x in results if x.ok], bad_model)
    summary["pictures"] = drawn
    code = code or (0 if drawn else 1)
    if ctl is not None and promoter is not None:
        summary["controller"] = _controller_summary(ctl, promoter)
    summary["wall_s"] = round(time.monotonic() - t0, 1)
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    console.print(f"done in {summary['wall_s']:.0f}s; summary {out / 'summary.json'}")
    return code


def _hostport(value: str) -> tuple[str, int]:
    host, _, port = value.rpartition(":")
    return host, int(port) if port.isdigit() else 0


def _request_path(stack: LocalStack, cat: Catalog, model: str, env: str) -> tuple[bool, dict[str, Any]]:
    """One request through the stand-in router for a P/D model, printed hop by hop with the pods named,
    then the smoke test's gateway checks through the same router; (all ✓, what was seen)."""
    import httpx

    from lwsflow.components.smoke import SmokeConfig, run_smoke

    router = stack.router
    assert router is not None
    served_model = cat.for_environment(model, env).model
    body = {"model": served_model, "max_tokens": 8,
            "prompt": "Explain how a prefill pod hands its KV cache to a decode pod. " * 4}
    resp = httpx.post(f"{router.url}/v1/completions", json=body, timeout=30)
    h = resp.headers
    pods = dict(p.strip().split("=", 1) for p in h.get("x-lwsflow-served-by", "").split(";") if "=" in p)
    decode_at, prefill_at = h.get("x-lwsflow-decode-endpoint", ""), h.get("x-lwsflow-prefill-endpoint", "")
    kv_at = h.get("x-lwsflow-kv-source", "")
    ns, _, decode_pod = pods.get("decode", "").partition("/")
    engine = stack.engines.engines.get((ns, decode_pod)) if stack.engines else None
    engine_port = engine.port if engine is not None else 0
    route = next((r for r in reversed(router.routes) if r.model == served_model), None)
    pool = route.pool if route else "?"
    say = console.print
    say(f"POST {router.url}/v1/completions model={served_model} (~{route.tokens if route else '?'} prompt "
        f"tokens: at least {router.non_cached_tokens}, so the P/D decider disaggregates)")
    say(f"  proxy   → EPP of InferencePool {pool} (HTTPRoute {pool}, Gateway {GATEWAY})")
    say(f"  EPP     → decode {pods.get('decode', '?')} (least loaded), prefill {pods.get('prefill', '?')}")
    say(f"  proxy   → routing sidecar of the decode pod at {decode_at} (x-prefiller-host-port: {prefill_at})")
    say(f"  sidecar → prefill engine {prefill_at}: kv_transfer_params {{do_remote_decode: true}}, "
        "max_tokens 1")
    say(f"  prefill → KV held at {kv_at} (engine {h.get('x-lwsflow-kv-engine', '?')[:12]})")
    say(f"  sidecar → decode engine {_hostport(decode_at)[0]}:{engine_port} with do_remote_prefill: it pulls "
        f"the KV from {kv_at} and decodes → HTTP {resp.status_code}")
    say(f"$ lwsflow smoke --gateway-url {router.url} --model {served_model}")
    report = run_smoke(SmokeConfig(gateway_url=router.url, model=served_model, request_timeout_s=10.0,
                                   warmup_s=5.0, retries=2, deadline_s=60.0, max_tokens=4))
    checks = {f"smoke {c.name}: {c.detail}": c.passed for c in report.checks if not c.skipped}
    checks.update({
        "router disaggregated, pods named": resp.status_code == 200 and {"decode", "prefill"} <= pods.keys(),
        "KV pulled from the prefill pod the EPP chose":
            bool(prefill_at) and _hostport(kv_at)[0] == _hostport(prefill_at)[0],
        "the decode pod's own sidecar answered on the pool's port, in front of its engine":
            engine_port > 0 and _hostport(decode_at)[1] not in (0, engine_port),
    })
    for name, passed in checks.items():
        say(f"  {'[green]✓[/]' if passed else '[red]✗[/]'} {name}")
    seen = {"model": model, "served_by": pods, "checks": checks,
            "headers": {k: v for k, v in h.items() if k.startswith("x-lwsflow-")}}
    return all(checks.values()), seen


def _controller_summary(ctl: demo_controller.Controllers,
                        promoter: demo_controller.Promoter) -> dict[str, Any]:
    """What the controller replicas did, from their logs, and the promotions passed at a gate."""
    logs = ctl.logs()
    return {"leaders": len(re.findall(r"became leader", logs)), "promoted": promoter.promoted,
            "log_lines": [ln for ln in logs.splitlines()
                          if re.search(r"became leader|waits for promotion|rolled back|succeeded|403", ln)]}
