"""The rollout pictures, drawn from what the cluster recorded (``records``): ``stages.png`` (one bar per
stage, gate wait against bake and checks, rollbacks) and ``timeline.png`` (per rollout: groups and GPUs
on the new revision, labelled events), each drawn from ``model`` (what is drawn, as plain data). Used by
``lwsflow report``, ``lwsflow demo`` and the dashboard (``png``: the bytes, nothing written)."""

from __future__ import annotations

import io
import os
import secrets
from pathlib import Path
from typing import TYPE_CHECKING

from lwsflow.report.records import Trace, collect, drawable
from lwsflow.report.stages import NothingToDraw, stages_figure
from lwsflow.report.timeline import timeline_figure

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["NothingToDraw", "Trace", "collect", "drawable", "png", "render", "stages_figure",
           "timeline_figure", "write_png"]
DPI = 100


def png(fig: Figure) -> bytes:
    """The figure as PNG bytes (matplotlib's Agg canvas: no display, no pyplot state)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI)
    return buf.getvalue()


def write_png(fig: Figure, path: Path) -> Path:
    """Write atomically, with the mode any file the user creates gets (not mkstemp's 0600)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    try:
        tmp.write_bytes(png(fig))
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def render(traces: list[Trace], out: Path, title: str = "") -> list[Path]:
    """``stages.png`` and ``timeline.png`` under ``out``; NothingToDraw (nothing written) when no rollout
    recorded a stage."""
    stages = stages_figure(traces, title=f"{title}: staged rollouts" if title else "staged rollouts")
    timeline = timeline_figure(traces, title=f"{title}: rollout timelines" if title else "rollout timelines")
    return [write_png(stages, out / "stages.png"), write_png(timeline, out / "timeline.png")]
