"""`lwsflow report`: the rollout pictures of any cluster, from what it recorded.

    lwsflow report [POLICY|lws/NAME|ds/NAME|pair/NAME ...] [-n NS | --all-namespaces]
        [--kubeconfig PATH] --out DIR

Reads the RolloutPolicies' status history, the targets' ``rollout.lwsflow.io/stage-log`` annotations and
their Events (``lwsflow.report.records``), whoever drove the rollouts, and writes
``DIR/stages.png`` and ``DIR/timeline.png``. Exit 1 (nothing written) when no rollout recorded a stage.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from lwsflow.cli.app import app


@app.command()
def report(
    targets: Annotated[list[str] | None, typer.Argument(
        help="RolloutPolicy names, or targets lws/NAME, ds/NAME, pair/NAME (default: every recorded "
             "rollout)")] = None,
    namespace: Annotated[str, typer.Option("--namespace", "-n")] = "default",
    all_namespaces: Annotated[bool, typer.Option("--all-namespaces", "-A")] = False,
    kubeconfig: Annotated[str | None, typer.Option(help="default: $KUBECONFIG, else in-cluster")] = None,
    out: Annotated[Path, typer.Option(help="folder for stages.png and timeline.png")] = Path("."),
    title: Annotated[str, typer.Option(help="the pictures' title prefix")] = "",
) -> None:
    """Draw stages.png and timeline.png of the recorded rollouts."""
    from lwsflow import report as pictures
    from lwsflow.controller.errors import InvalidInput, OperationFailed
    from lwsflow.controller.kube.client import Kube

    for t in targets or []:
        kind, _, name = t.rpartition("/")
        if kind not in ("", "lws", "ds", "pair") or not name:
            raise InvalidInput(f"target {t!r}: expected a RolloutPolicy name, lws/NAME, ds/NAME or "
                               "pair/NAME", field="targets")
    if out.exists() and not out.is_dir():
        raise InvalidInput(f"{out} is not a folder", field="out")
    kube = Kube.connect(kubeconfig)
    traces = pictures.collect(kube, None if all_namespaces else namespace, targets or None)
    where = "all namespaces" if all_namespaces else f"namespace {namespace}"
    try:
        paths = pictures.render(traces, out, title=title)
    except pictures.NothingToDraw as exc:
        raise OperationFailed(f"nothing to draw in {where}: {exc}") from exc
    for shown in pictures.drawable(traces):
        passed = sum(1 for s in shown.stages if s.result == "passed")
        print(f"{shown.namespace}/{shown.name} rollout {shown.rollout_id[:12]}: {shown.outcome}, "
              f"{passed}/{len(shown.stages)} stage records passed"
              f"{', rolled back' if shown.rollback else ''} (from {shown.source})")
    for p in paths:
        print(f"picture: {p}")
