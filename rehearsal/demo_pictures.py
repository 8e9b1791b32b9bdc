"""The demo's pictures, drawn from what the cluster recorded (``lwsflow report``'s code), and the demo's
check that they show what happened: every released model's stages, the bad release's rollback.

Nothing here reads a pipeline's own report: the in-cluster controller drives the rollouts, so the
cluster's records (policy status history, stage logs, Events) are the only ones that see them all.
"""

from __future__ import annotations

import json
from pathlib import Path

from lwsflow import report as pictures
from lwsflow.controller.kube.client import Kube
from lwsflow.report import records
from lwsflow.report.records import Trace


def label(traces: list[Trace], bad_model: str | None) -> list[Trace]:
    """Lanes named by model (the targets carry the model's name); the bad model's last rollout is the
    bad release when it was rolled back."""
    for t in traces:
        t.label = t.name
    if bad_model:
        mine = [t for t in traces if t.name == bad_model]
        if len(mine) > 1:
            mine[-1].label = f"{bad_model} (bad release)"
    return traces


def checks(traces: list[Trace], released: list[str], bad_model: str | None) -> dict[str, bool]:
    """What the pictures must show (the demo fails when one is missing, rather than draw less)."""
    shown = pictures.drawable(traces)
    out = {f"stages.png: {m}'s stages recorded and drawn":
           any(t.name == m and t.outcome == "Succeeded" and t.stages
               and all(s.result == "passed" for s in t.stages) for t in shown)
           for m in released}
    if bad_model:
        bad = [t for t in shown if t.label == f"{bad_model} (bad release)"]
        out[f"stages.png: {bad_model}'s bad release failed a stage and was rolled back"] = bool(bad) and \
            bad[0].rollback is not None and any(s.result == "failed" for s in bad[0].stages)
    return out


def draw(kubeconfig: Path, out: Path, released: list[str],
         bad_model: str | None) -> tuple[list[Path], dict[str, bool], str]:
    """(pictures written, checks, why nothing was drawn or ""); ``records.json``: what they were drawn
    from (``pictures.records.load`` reads it back)."""
    traces = label(pictures.collect(Kube.connect(str(kubeconfig))), bad_model)
    out.mkdir(parents=True, exist_ok=True)
    (out / "records.json").write_text(json.dumps(records.dump(traces), indent=1) + "\n")
    found = checks(traces, released, bad_model)
    try:
        return pictures.render(traces, out, title="lwsflow demo"), found, ""
    except pictures.NothingToDraw as exc:
        for name in ("stages.png", "timeline.png"):  # never leave an older run's picture behind
            (out / name).unlink(missing_ok=True)
        return [], found, str(exc)
