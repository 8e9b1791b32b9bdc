"""`lwsflow rollout`: staged, gated rollouts of an LWS, a P/D pair or a DisaggregatedSet.

    lwsflow rollout lws/NAME|pair/NAME|ds/NAME -n NS [--manifest FILE] --stages 1,25%,50%,100%
        [--bake 5m] [--deadline 30m] [--kubeconfig PATH] [--report FILE] [--no-rollback]
        [--auto-budget] [--smoke]
    lwsflow rollout pause|resume|status|abort TARGET -n NS

Exit codes: 0 rolled out, 1 rolled back / failed / paused / aborted, 2 bad input.
"""

from __future__ import annotations

import json
import logging
import os
import shlex
import sys
from typing import TYPE_CHECKING, Annotated

import typer

from lwsflow.pipelines.cli.app import app

if TYPE_CHECKING:
    from lwsflow.controller.rollout.hooks import Hook
    from lwsflow.controller.rollout.session import Target

ACTIONS = ("pause", "resume", "status", "abort")


@app.command(context_settings={"help_option_names": ["-h", "--help"]})
def rollout(
    target_or_action: Annotated[str, typer.Argument(
        metavar="TARGET|ACTION", help="lws/NAME, pair/NAME or ds/NAME; or pause|resume|status|abort")],
    action_target: Annotated[str | None, typer.Argument(metavar="[TARGET]",
                                                        help="the target of an action")] = None,
    namespace: Annotated[str, typer.Option("--namespace", "-n")] = "default",
    manifest: Annotated[str | None, typer.Option(help="new manifest (omit: GitOps applied it)")] = None,
    stages: Annotated[str, typer.Option(help="groups after each stage")] = "1,25%,50%,100%",
    bake: Annotated[str, typer.Option(help="per-stage bake while equality holds")] = "0s",
    deadline: Annotated[str, typer.Option(help="per-stage progress deadline")] = "30m",
    kubeconfig: Annotated[str | None, typer.Option(help="default: $KUBECONFIG, else in-cluster")] = None,
    report: Annotated[str | None, typer.Option(help="write the JSON report here")] = None,
    no_rollback: Annotated[bool, typer.Option("--no-rollback", help="on failure leave it paused")] = False,
    retry: Annotated[bool, typer.Option("--retry", help="roll out again a manifest that failed")] = False,
    auto_budget: Annotated[bool, typer.Option("--auto-budget",
                                              help="if the plan does not fit the GPUs: the "
                                              "first smaller budget that does")] = False,
    smoke: Annotated[bool, typer.Option("--smoke", help="smoke-test the target after each stage")] = False,
    hook: Annotated[list[str] | None, typer.Option(help="command after each stage (exit 0 passes)")] = None,
    probe: Annotated[list[str] | None, typer.Option(help="URL probed after each stage (2xx passes)")] = None,
) -> int:
    """Roll out in partition stages gated on readiness equality; pause, resume, status or abort one.

    A DisaggregatedSet has no partition: its rollout is one gated stage and cannot be paused
    (abort rolls it back).
    """
    from lwsflow.controller.errors import InvalidInput
    from lwsflow.controller.kube.client import Kube
    from lwsflow.controller.rollout import hooks as rhooks
    from lwsflow.controller.rollout import session
    from lwsflow.controller.rollout.engine import RolloutOptions
    from lwsflow.controller.rollout.stages import parse_duration, parse_stage_spec

    action = target_or_action if target_or_action in ACTIONS else "run"
    text = action_target if action != "run" else target_or_action
    if action == "run" and action_target is not None:
        raise InvalidInput(f"unexpected argument {action_target!r}", field="target")
    if text is None:
        raise InvalidInput(f"`rollout {action}` needs a TARGET (lws/NAME, pair/NAME or ds/NAME)",
                           field="target")
    target = session.parse_target(text, namespace)
    parse_stage_spec(stages)
    opts = RolloutOptions(stages=stages, bake_s=parse_duration(bake, "bake"),
                          deadline_s=parse_duration(deadline, "deadline"), no_rollback=no_rollback,
                          retry=retry)
    if opts.deadline_s <= 0:
        raise InvalidInput("must be greater than 0", field="deadline")
    opts.hooks.extend(rhooks.command_hook(shlex.split(h)) for h in hook or [])
    opts.hooks.extend(rhooks.http_probe(u) for u in probe or [])
    if smoke:
        opts.hooks.append(_smoke_hook(target, kubeconfig))
    _configure_logging()
    kube = Kube.connect(kubeconfig)
    clock = session.clock_for(kube)
    out = _Output()

    if action == "status":
        for row in session.status(kube, target):
            out.line(json.dumps(row, sort_keys=True))
        return 0
    if action == "pause":
        session.set_flags(kube, clock.now(), target, paused=True)
        out.line(f"{target}: pause requested; the controller stops at its next step, mid-stage "
                 "included: the partition stays where it is (groups it already released still "
                 "update) and no further stage starts until `resume`")
        return 0
    if action == "resume":
        session.set_flags(kube, clock.now(), target, paused=False)
        opts = session.options_from_state(kube, target, opts)
    if action == "abort":
        session.set_flags(kube, clock.now(), target, abort=True)
        opts = session.options_from_state(kube, target, opts)
    if manifest and action != "run":
        raise InvalidInput("--manifest only applies when starting a rollout", field="manifest")
    outcome = session.run(kube, clock, target, opts, manifest=manifest, auto_budget=auto_budget,
                          on_step=out.step, log=out.line)
    out.close()
    if report:
        outcome.report.write(report)
    out.line(f"{target}: {outcome.result}: {outcome.message}")
    return outcome.exit_code


def _smoke_hook(target: Target, kubeconfig: str | None) -> Hook:
    """The smoke test as a stage hook (lwsflow.components.smoke), so controller/ never imports components/."""
    from lwsflow.components.smoke.model import SmokeConfig
    from lwsflow.components.smoke.runner import run_smoke
    from lwsflow.controller.rollout.hooks import HookContext, HookResult

    def smoke(ctx: HookContext) -> HookResult:
        rep = run_smoke(SmokeConfig(targets=[f"{target.kind}/{target.name}"], namespace=ctx.namespace,
                                    kubeconfig=kubeconfig, revision_only=True))
        failed = ", ".join(f"{c.name}@{c.target}" for c in rep.failed())
        return HookResult(rep.passed, "smoke passed" if rep.passed else f"smoke failed: {failed}")
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
        if name.endswith(("-passed", "-partition", "started", "rollback-applied")):
            self.line(f"  {name}")

    def close(self) -> None:
        if self._status is not None:
            self._status.stop()
