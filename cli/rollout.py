"""`lwsflow rollout`: staged, gated rollouts of an LWS, a P/D pair or a DisaggregatedSet.

    lwsflow rollout run lws/NAME|pair/NAME|ds/NAME -n NS [--manifest FILE] [--stages 1,25%,50%,100%]
        [--bake 5m] [--deadline 30m] [--kubeconfig PATH] [--report FILE] [--no-rollback] [--retry]
        [--auto-budget] [--on-quota-shortage refuse|inPlace] [--smoke] [--hook CMD] [--probe URL]
        [--analysis SPEC --prometheus URL|local [--on-inconclusive pause|rollback]]
        [--pd-probe [--on-incompatible refuse|all-at-once]]
        [--strategy partition|blue-green] [--weights 10,50,100]
    lwsflow rollout pause|status TARGET -n NS
    lwsflow rollout resume TARGET -n NS [--report FILE] [--smoke] [--hook CMD] [--probe URL]
        [--analysis SPEC --prometheus URL|local]
    lwsflow rollout promote TARGET -n NS [the options of resume]
    lwsflow rollout abort TARGET -n NS [--report FILE]

``lwsflow rollout TARGET ...`` (no subcommand) is ``rollout run TARGET ...``. Every subcommand checks
all of its arguments before its first request that writes.

Exit codes: 0 rolled out, 1 rolled back / failed / paused / aborted, 2 bad input, 3 paused because a
stage's analysis decided nothing (``onInconclusive: pause``, the default): ``promote`` passes that stage
and continues, ``abort`` rolls back, ``resume`` measures again.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shlex
import sys
from typing import TYPE_CHECKING, Annotated, Any

import typer
from typer.core import TyperGroup

from lwsflow.cli.app import app

if TYPE_CHECKING:
    from collections.abc import Iterator

    from typer._click import Context

    from lwsflow.controller.kube.client import Kube
    from lwsflow.controller.rollout.engine import RolloutOptions
    from lwsflow.controller.rollout.hooks import Hook
    from lwsflow.controller.rollout.session import Target

ACTIONS = ("run", "pause", "resume", "promote", "abort", "status")
_HELP = ("-h", "--help")


class _RolloutGroup(TyperGroup):
    """``rollout TARGET ...`` and ``rollout -n NS TARGET ...`` (the forms the docs used before the
    subcommands) mean ``rollout run``; anything else that is not a subcommand gets a one-line hint."""

    def parse_args(self, ctx: Context, args: list[str]) -> list[str]:
        from lwsflow.controller.errors import InvalidInput

        first = args[0] if args else ""
        if args and first not in self.commands and first not in _HELP:
            if "/" not in first and not first.startswith("-"):
                raise InvalidInput(f"unknown subcommand {first!r}; use `lwsflow rollout "
                                   f"{'|'.join(ACTIONS)} TARGET`", field="rollout")
            if len(args) > 1 and args[1] in ACTIONS:
                raise InvalidInput(f"the action comes first: `lwsflow rollout {args[1]} {first}`",
                                   field="rollout")
            args = ["run", *args]
        return super().parse_args(ctx, args)


rollout_app = typer.Typer(
    cls=_RolloutGroup, no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,
    context_settings={"help_option_names": list(_HELP)},
    help="Roll out in partition stages gated on readiness equality; pause, resume, abort or show one. "
    "`lwsflow rollout TARGET ...` is short for `lwsflow rollout run TARGET ...`.")
app.add_typer(rollout_app, name="rollout")

# Options every subcommand shares, and the ones only `run` (and `resume`) take.
Target_ = Annotated[str | None, typer.Argument(metavar="TARGET", show_default=False,
                                               help="lws/NAME, pair/NAME or ds/NAME")]
Namespace = Annotated[str, typer.Option("--namespace", "-n")]
Kubeconfig = Annotated[str | None, typer.Option(help="default: $KUBECONFIG, else in-cluster")]
Report = Annotated[str | None, typer.Option(help="write the JSON report here")]
Smoke = Annotated[bool, typer.Option("--smoke", help="smoke-test the target after each stage")]
Hooks = Annotated[list[str] | None, typer.Option("--hook", help="command after each stage (exit 0 passes)")]
Probes = Annotated[list[str] | None, typer.Option("--probe", help="URL probed after each stage (2xx passes)")]
Analysis = Annotated[str | None, typer.Option(help="analysis spec (file or vllm/sglang template) after "
                                              "each stage")]
PrometheusOpt = Annotated[str | None, typer.Option("--prometheus", help="Prometheus URL for --analysis, or "
                                                   "'local' to run one here (scripts/setup installs it)")]
OnInconclusive = Annotated[str | None, typer.Option(
    "--on-inconclusive", help="when a stage's analysis decides nothing (too little traffic): pause for "
    "`promote` / `abort` (exit 3) or rollback [default: the spec's onInconclusive, pause]")]
# Only `run` takes a manifest; the others accept the option hidden, to refuse it by name (exit 2)
# instead of click's generic "no such option" or, as before, silently ignoring it.
NoManifest = Annotated[str | None, typer.Option("--manifest", hidden=True)]


@rollout_app.command("run")
def run(
    target: Target_ = None,
    namespace: Namespace = "default",
    manifest: Annotated[str | None, typer.Option(help="new manifest (omit: GitOps applied it)")] = None,
    stages: Annotated[str, typer.Option(help="groups after each stage")] = "1,25%,50%,100%",
    bake: Annotated[str, typer.Option(help="per-stage bake while equality holds")] = "0s",
    deadline: Annotated[str, typer.Option(help="per-stage progress deadline")] = "30m",
    kubeconfig: Kubeconfig = None,
    report: Report = None,
    no_rollback: Annotated[bool, typer.Option("--no-rollback", help="on failure leave it paused")] = False,
    retry: Annotated[bool, typer.Option("--retry", help="roll out again a manifest that failed")] = False,
    auto_budget: Annotated[bool, typer.Option("--auto-budget",
                                              help="if the plan does not fit the GPUs: the "
                                              "first smaller budget that does")] = False,
    on_quota_shortage: Annotated[str, typer.Option(
        "--on-quota-shortage", help="an LWS with Kueue's queue label whose surge groups its ClusterQueue "
        "cannot admit: refuse, or inPlace (roll with the surge the quota admits, none at worst)")]
    = "refuse",
    smoke: Smoke = False,
    hook: Hooks = None,
    probe: Probes = None,
    analysis: Analysis = None,
    prometheus: PrometheusOpt = None,
    on_inconclusive: OnInconclusive = None,
    pd_probe: Annotated[bool, typer.Option("--pd-probe", help="pair/ds: before revisions mix, hand KV off "
                                           "new prefill -> old decode and the reverse (a canary group per "
                                           "role)")] = False,
    on_incompatible: Annotated[str | None, typer.Option(
        "--on-incompatible", help="with --pd-probe, when the revisions cannot hand off: refuse (default) "
        "or all-at-once (each role in one step, capacity checked)")] = None,
    strategy: Annotated[str, typer.Option(help="partition (stages of groups in place) or blue-green (a "
                                           "second LWS, P/D pair or DS, traffic moved by HTTPRoute weights)")]
    = "partition",
    weights: Annotated[str | None, typer.Option(help="blue-green: green's traffic percent per stage "
                                                "[default: 10,50,100]")] = None,
    load: Annotated[float | None, typer.Option("--load", help="send this many requests a second of seeded "
                                               "traffic while the rollout runs, so --analysis has "
                                               "requests to judge (docs/analysis.md)")] = None,
    load_url: Annotated[str | None, typer.Option("--load-url", help="where --load sends: the model's "
                                                 "gateway (default for an LWS: its serving leader pods; "
                                                 "a pair, a DS and blue-green need one)")] = None,
) -> int:
    """Start a rollout (or continue the one in progress after a crash).

    A DisaggregatedSet has no partition: its rollout is one gated stage and cannot be paused
    (abort rolls it back).
    """
    from lwsflow.controller.api.duration import parse_duration
    from lwsflow.controller.errors import InvalidInput
    from lwsflow.controller.rollout.engine import RolloutOptions
    from lwsflow.controller.rollout.quota import check_on_shortage
    from lwsflow.controller.rollout.stages import parse_stage_spec

    tgt = _target("run", target, namespace)
    check_on_shortage(on_quota_shortage)
    weight_list = _strategy(tgt, strategy, weights, stages, auto_budget, manifest)
    parse_stage_spec(stages)
    opts = RolloutOptions(stages=stages, bake_s=parse_duration(bake, "bake"),
                          deadline_s=parse_duration(deadline, "deadline"),
                          no_rollback=no_rollback,
                          retry=retry)
    if opts.deadline_s <= 0:
        raise InvalidInput("must be greater than 0", field="deadline")
    _add_hooks(opts, tgt, kubeconfig, smoke, hook, probe)
    spec = _analysis_spec(analysis, prometheus, on_inconclusive)  # validated before anything is written
    _check_load(load, load_url, tgt, strategy)
    _pd_probe_options(opts, tgt, manifest, pd_probe, on_incompatible)
    kube, clock = _connect(kubeconfig)
    if pd_probe:
        from lwsflow.components.pd_probe import pd_probe as make_probe

        opts.pd_probe = make_probe(kube)
    with _load(load, load_url, kube, tgt), _analysis(spec, prometheus, kube, kubeconfig, tgt, opts):
        return _roll(kube, clock, tgt, opts, report, manifest=manifest, auto_budget=auto_budget,
                     strategy=strategy, weights=weight_list, on_quota_shortage=on_quota_shortage)


def _check_load(load: float | None, url: str | None, tgt: Target, strategy: str) -> None:
    from lwsflow.controller.errors import InvalidInput

    if load is None:
        if url is not None:
            raise InvalidInput("only used with --load", field="--load-url")
        return
    if not load > 0:
        raise InvalidInput(f"must be greater than 0, got {load:g}", field="--load")
    if url is None and (tgt.kind != "lws" or strategy == "blue-green"):
        raise InvalidInput("give --load-url (the model's gateway): only an LWS rolled in place is sent "
                           "to its pods directly (a pair needs prefill before decode, blue-green the "
                           "route's weights)", field="--load-url")
    if url is not None and not url.startswith(("http://", "https://")):
        raise InvalidInput(f"must be an http(s) URL, got {url!r}", field="--load-url")


@contextlib.contextmanager
def _load(load: float | None, url: str | None, kube: Kube, tgt: Target) -> Iterator[None]:
    """Seeded traffic (``components.loadgen``) for the rollout's duration; nothing without ``load``.
    The model is the target's pods' served-model annotation."""
    if load is None:
        yield
        return
    from lwsflow.components.loadgen import LoadGenerator, LoadSpec, ServingPods
    from lwsflow.controller.api import labels as L
    from lwsflow.controller.errors import InvalidInput
    from lwsflow.controller.kube.resources import POD

    label = {"lws": L.NAME, "pair": L.PD_PAIR, "ds": L.DS_NAME}[tgt.kind]
    pods = ServingPods(lambda: kube.list(POD, tgt.namespace, label_selector=f"{label}={tgt.name}")[0])
    model = pods.model()
    if not model:
        raise InvalidInput(f"no pod of {tgt} carries {L.SERVED_MODEL} (the model to ask for)", field="--load")
    gen = LoadGenerator(LoadSpec(model=model, rate=load, seed=0),
                        (lambda: [url]) if url else pods)
    with gen:
        yield
    lost = f", {gen.stats.lost} lost to replaced pods" if gen.stats.lost else ""
    print(f"load: {gen.stats.sent} requests sent, {gen.stats.ok} ok, {gen.stats.errors} failed{lost}")


@contextlib.contextmanager
def _analysis(spec: Any, prometheus: str | None, kube: Kube, kubeconfig: str | None, tgt: Target,
              opts: RolloutOptions) -> Iterator[None]:
    """Add the analysis hook to ``opts`` (with a local Prometheus for ``--prometheus local``) for the
    duration of the rollout; nothing when ``spec`` is None."""
    if spec is None:
        yield
        return
    from lwsflow.components.analysis_hook import analysis_hook
    from lwsflow.components.analysis_smoke import smoke_measure
    from lwsflow.components.prometheus import start_prometheus
    from lwsflow.controller.kube.resources import POD

    local = start_prometheus() if prometheus == "local" else None
    try:
        if local is not None:
            local.follow(lambda: kube.list(POD, tgt.namespace)[0])
        opts.hooks.append(analysis_hook(spec, kube, local.url if local else prometheus, local,
                                        smoke=smoke_measure(kubeconfig)))
        yield
    finally:
        if local is not None:
            local.stop()


def _pd_probe_options(opts: RolloutOptions, target: Target, manifest: str | None, probe: bool,
                      on_incompatible: str | None) -> None:
    from lwsflow.controller.errors import InvalidInput
    from lwsflow.controller.pd.compat import DS_NEEDS_MANIFEST, ON_INCOMPATIBLE

    if on_incompatible is not None:
        if on_incompatible not in ON_INCOMPATIBLE:
            raise InvalidInput(f"must be one of {', '.join(ON_INCOMPATIBLE)}, got {on_incompatible!r}",
                               field="--on-incompatible")
        if not probe:
            raise InvalidInput("only used with --pd-probe", field="--on-incompatible")
        opts.on_incompatible = on_incompatible
    if probe and target.kind == "lws":
        raise InvalidInput("only for P/D targets (pair/NAME or ds/NAME): an LWS has no hand-off to probe",
                           field="--pd-probe")
    if probe and target.kind == "ds" and manifest is None:
        raise InvalidInput(DS_NEEDS_MANIFEST,
                           field="--pd-probe")


def _strategy(tgt: Target, strategy: str, weights: str | None, stages: str, auto_budget: bool,
              manifest: str | None) -> list[int] | None:
    """Check ``--strategy`` and what goes with it; blue-green's weight stages, else None."""
    from lwsflow.controller.bluegreen.plan import DEFAULT_WEIGHTS, parse_weights
    from lwsflow.controller.errors import InvalidInput
    from lwsflow.controller.rollout import session

    session.check_strategy(strategy, tgt)
    if strategy != "blue-green":
        if weights is not None:
            raise InvalidInput("only used with --strategy blue-green", field="--weights")
        return None
    if stages != "1,25%,50%,100%":
        raise InvalidInput("blue-green moves traffic, not groups: use --weights", field="--stages")
    if auto_budget:
        raise InvalidInput("blue-green runs both revisions at full size: no budget to choose",
                           field="--auto-budget")
    if manifest is None:
        raise InvalidInput("blue-green needs the new revision of every role", field="--manifest")
    return parse_weights(weights or DEFAULT_WEIGHTS)


def _analysis_spec(path: str | None, prometheus: str | None, on_inconclusive: str | None = None) -> Any:
    from pathlib import Path

    from lwsflow.controller.analysis.spec import load_spec
    from lwsflow.controller.errors import InvalidInput

    if path is None:
        if prometheus:
            raise InvalidInput("only used with --analysis", field="--prometheus")
        if on_inconclusive is not None:
            raise InvalidInput("only used with --analysis", field="--on-inconclusive")
        return None
    if on_inconclusive not in (None, "pause", "rollback"):
        raise InvalidInput(f"must be pause or rollback (got {on_inconclusive!r})", field="--on-inconclusive")
    spec = load_spec(Path(path))
    if on_inconclusive is not None:
        spec = spec.model_copy(update={"on_inconclusive": on_inconclusive})
    if not prometheus and any(m.provider.prometheus and not m.provider.prometheus.address
                              for m in spec.metrics):
        raise InvalidInput("the analysis has prometheus metrics; give --prometheus URL or 'local'",
                           field="--prometheus")
    return spec


@rollout_app.command("pause")
def pause(target: Target_ = None, namespace: Namespace = "default", kubeconfig: Kubeconfig = None,
          manifest: NoManifest = None) -> int:
    """Stop the rollout in progress at its next step; `resume` continues it."""
    from lwsflow.controller.rollout import session

    tgt = _target("pause", target, namespace, manifest)
    kube, clock = _connect(kubeconfig)
    session.set_flags(kube, clock.now(), tgt, paused=True)
    print(f"{tgt}: pause requested; the controller stops at its next step, mid-stage "
          "included: the partition stays where it is (groups it already released still "
          "update) and no further stage starts until `resume`", flush=True)
    return 0


@rollout_app.command("resume")
def resume(target: Target_ = None, namespace: Namespace = "default", kubeconfig: Kubeconfig = None,
           report: Report = None, smoke: Smoke = False, hook: Hooks = None, probe: Probes = None,
           manifest: NoManifest = None, analysis: Analysis = None, prometheus: PrometheusOpt = None) -> int:
    """Continue a paused rollout with the stages, bake and deadline it was started with (a stage
    paused by an inconclusive analysis is measured again; `promote` passes it instead).

    The checks are not remembered (they may name local files): give --smoke, --hook, --probe and
    --analysis again, as with `run`.
    """
    return _continue("resume", target, namespace, kubeconfig, report, smoke, hook, probe, manifest,
                     analysis, prometheus)


@rollout_app.command("promote")
def promote(target: Target_ = None, namespace: Namespace = "default", kubeconfig: Kubeconfig = None,
            report: Report = None, smoke: Smoke = False, hook: Hooks = None, probe: Probes = None,
            manifest: NoManifest = None, analysis: Analysis = None, prometheus: PrometheusOpt = None) -> int:
    """Pass the stage a rollout is paused at because its analysis decided nothing (exit 3 of `run`),
    without measuring it again, and continue the rollout as `resume` does (same options)."""
    return _continue("promote", target, namespace, kubeconfig, report, smoke, hook, probe, manifest,
                     analysis, prometheus)


def _continue(action: str, target: str | None, namespace: str, kubeconfig: str | None, report: str | None,
              smoke: bool, hook: list[str] | None, probe: list[str] | None, manifest: str | None,
              analysis: str | None, prometheus: str | None) -> int:
    """resume (lift the pause) or promote (accept the inconclusive stage), then roll on."""
    from lwsflow.controller.errors import InvalidInput
    from lwsflow.controller.policy import gates
    from lwsflow.controller.rollout import session, state
    from lwsflow.controller.rollout.engine import RolloutOptions

    tgt = _target(action, target, namespace, manifest)
    opts = RolloutOptions()
    _add_hooks(opts, tgt, kubeconfig, smoke, hook, probe)
    spec = _analysis_spec(analysis, prometheus)  # validated before anything is written
    kube, clock = _connect(kubeconfig)
    opts = session.options_from_state(kube, tgt, opts)  # refuses before writing when none is active
    if action == "promote":
        res, obj = session._objects(kube, tgt)[0]
        st = state.RolloutState.from_object(obj)
        if tgt.kind == "pair" or gates.inconclusive_at(st) is None:
            raise InvalidInput(f"{tgt}: not paused by an inconclusive analysis (phase {st.phase}"
                               f"{', paused' if st.paused else ''}); `resume` continues a pause",
                               field="target")
        kube.merge_patch(res, tgt.namespace, obj["metadata"]["name"],
                         gates.accept_patch(obj, st, clock.now()))
        print(f"{tgt}: stage {st.passed + 1} passed despite an inconclusive analysis", flush=True)
    else:
        session.set_flags(kube, clock.now(), tgt, paused=False)
    with _analysis(spec, prometheus, kube, kubeconfig, tgt, opts):
        return _roll(kube, clock, tgt, opts, report)


@rollout_app.command("abort")
def abort(target: Target_ = None, namespace: Namespace = "default", kubeconfig: Kubeconfig = None,
          report: Report = None, manifest: NoManifest = None) -> int:
    """Abort the rollout in progress and roll back to the last good template (exit 1)."""
    from lwsflow.controller.rollout import session
    from lwsflow.controller.rollout.engine import RolloutOptions

    tgt = _target("abort", target, namespace, manifest)
    kube, clock = _connect(kubeconfig)
    opts = session.options_from_state(kube, tgt, RolloutOptions())
    session.set_flags(kube, clock.now(), tgt, abort=True)
    return _roll(kube, clock, tgt, opts, report)


@rollout_app.command("status")
def status(target: Target_ = None, namespace: Namespace = "default", kubeconfig: Kubeconfig = None,
           manifest: NoManifest = None) -> int:
    """Print the persisted rollout state and the live gate numbers, one JSON line per object."""
    from lwsflow.controller.rollout import session

    tgt = _target("status", target, namespace, manifest)
    kube, _clock = _connect(kubeconfig)
    for row in session.status(kube, tgt):
        print(json.dumps(row, sort_keys=True), flush=True)
    return 0


def _target(action: str, text: str | None, namespace: str, manifest: str | None = None) -> Target:
    from lwsflow.controller.errors import InvalidInput
    from lwsflow.controller.rollout import session

    if manifest is not None:
        raise InvalidInput(f"only `lwsflow rollout run` takes a manifest, not `{action}`", field="manifest")
    if text is None:
        raise InvalidInput(f"`rollout {action}` needs a TARGET (lws/NAME, pair/NAME or ds/NAME)",
                           field="target")
    return session.parse_target(text, namespace)


def _add_hooks(opts: RolloutOptions, target: Target, kubeconfig: str | None, smoke: bool,
               hooks: list[str] | None, probes: list[str] | None) -> None:
    from lwsflow.controller.rollout import hooks as rhooks

    opts.hooks.extend(rhooks.command_hook(shlex.split(h)) for h in hooks or [])
    opts.hooks.extend(rhooks.http_probe(u) for u in probes or [])
    if smoke:
        opts.hooks.append(_smoke_hook(target, kubeconfig))


def _connect(kubeconfig: str | None) -> tuple[Kube, Any]:
    from lwsflow.controller.kube.client import Kube
    from lwsflow.controller.rollout import session

    _configure_logging()
    kube = Kube.connect(kubeconfig)
    return kube, session.clock_for(kube)


def _roll(kube: Kube, clock: Any, target: Target, opts: RolloutOptions, report: str | None, *,
          manifest: str | None = None, auto_budget: bool = False, strategy: str = "partition",
          weights: list[int] | None = None, on_quota_shortage: str = "refuse") -> int:
    from lwsflow.controller.rollout import session
    from lwsflow.controller.rollout.outcome import EXIT_INCONCLUSIVE

    out = _Output()
    try:
        outcome = session.run(kube, clock, target, opts, manifest=manifest, auto_budget=auto_budget,
                              on_step=out.step, log=out.line, strategy=strategy, weights=weights,
                              on_quota_shortage=on_quota_shortage)
    finally:
        out.close()
    if report:
        outcome.report.write(report)
    out.line(f"{target}: {outcome.result}: {outcome.message}")
    if outcome.exit_code == EXIT_INCONCLUSIVE:
        out.line(f"{target}: decide: `lwsflow rollout promote {target}` passes the stage, `lwsflow rollout "
                 f"abort {target}` rolls it back, `lwsflow rollout resume {target}` measures again "
                 f"(exit {EXIT_INCONCLUSIVE}: paused, the analysis decided nothing)")
    return outcome.exit_code


def _smoke_hook(target: Target, kubeconfig: str | None) -> Hook:
    """The smoke test as a stage hook (lwsflow.components.smoke), so controller/ never imports components/."""
    from lwsflow.components.smoke.model import SmokeConfig
    from lwsflow.components.smoke.report import failure_summary
    from lwsflow.components.smoke.runner import run_smoke
    from lwsflow.controller.rollout.hooks import HookContext, HookResult

    def smoke(ctx: HookContext) -> HookResult:
        # blue-green: the stage's new revision is green (ctx.name, a pair or DS), not the one rolled from
        name = ctx.name if ctx.compare else target.name
        rep = run_smoke(SmokeConfig(targets=[f"{target.kind}/{name}"], namespace=ctx.namespace,
                                    kubeconfig=kubeconfig, revision_only=True))
        return HookResult(rep.passed, "smoke passed" if rep.passed else failure_summary(rep))
    return smoke


class _JsonLines(logging.Formatter):
    """One JSON object per log record (for log pipelines)."""

    _SKIP = frozenset(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {"message"}

    def format(self, record: logging.LogRecord) -> str:
        doc = {"level": record.levelname.lower(), "logger": record.name, "msg": record.getMessage()}
        doc.update({k: v for k, v in record.__dict__.items() if k not in self._SKIP})
        return json.dumps(doc, default=str)


def _configure_logging() -> None:
    """Structured logs on stderr: ``LWSFLOW_LOG=json`` (JSON lines) or ``text``; off by default."""
    mode = os.environ.get("LWSFLOW_LOG", "")
    if not mode:
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_JsonLines() if mode == "json" else
                         logging.Formatter("%(levelname)s %(name)s %(message)s"))
    root = logging.getLogger("lwsflow")
    root.handlers[:] = [handler]
    root.setLevel(logging.INFO)
    root.propagate = False


class _Output:
    """A live rich status line on a terminal, plain lines otherwise (logs, CI, pipeline steps)."""

    def __init__(self) -> None:
        self._console = None
        self._status = None
        if sys.stdout.isatty():
            from rich.console import Console

            self._console = Console()
            self._status = self._console.status("starting rollout")
            self._status.start()

    def line(self, text: str) -> None:
        if self._console is not None:
            self._console.log(text)
        else:
            print(text, flush=True)

    def step(self, name: str) -> None:
        """Called by the engine between steps (names like ``decode:stage-2-passed``)."""
        if self._status is not None:
            self._status.update(f"rollout: {name}")
        if name.endswith(("-passed", "-partition", "started", "rollback-applied", "-ready", "-shifted",
                          "-deleted")):
            self.line(f"  {name}")

    def close(self) -> None:
        if self._status is not None:
            self._status.stop()
