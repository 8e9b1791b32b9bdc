"""The timeline picture: one panel per rollout, in that rollout's own minutes, with what happened when.

Per panel, drawn from the recorded stages (``records``): the groups on the new revision (blue, left axis:
each stage's groups from its start, the partition write; back to zero over a rollback), each stage's wait
for its readiness gate (hatched as in the stages picture; red where it never passed), the desired
replicas (dashed), the fewest ready groups seen in each stage (green), and the GPUs the new revision's
groups hold (red, on a right axis with red ticks: groups times the template's GPUs per group). The
rollout's Events are vertical lines labelled where they happened (events at the same moment share one
label). Each panel's axis spans its own rollout (``model.panels``: the data drawn, one mark per event,
assigned by rollout id). One legend for the figure, below the panels; the title above them.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING

from lwsflow.report.model import NothingToDraw, Panel, panels
from lwsflow.report.records import Trace
from lwsflow.report.stages import COLORS

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

GROUPS, READY, GPUS = "tab:blue", "tab:green", "tab:red"


def _panel(ax: Axes, p: Panel) -> None:
    from matplotlib.ticker import MaxNLocator

    t = p.trace
    for w in p.waits:  # each stage's wait for readiness, shaded as in the stages picture
        color = COLORS["failed" if w.failed else "passed"]
        ax.axvspan(w.start, w.end, facecolor=color, alpha=0.12, hatch="///", edgecolor=color, linewidth=0,
                   gid=w.gid)
    for series, style in zip(p.series, ("-", "--", ":"), strict=False):
        (line,) = ax.plot(series.xs, series.ys, color=GROUPS, linestyle=style, linewidth=1.8)
        line.set_gid(series.gid)
    for low, x0, x1 in p.ready:
        ax.hlines(low, x0, x1, color=READY, linewidth=3, alpha=0.7)
    if t.replicas:
        ax.axhline(t.replicas, color="0.5", linestyle="--", linewidth=1)
    ax.set_ylim(0, p.ymax)
    ax.set_xlim(p.xmin, p.xmax * 1.02 + 0.05)
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylabel("groups", color=GROUPS)
    ax.tick_params(axis="y", colors=GROUPS)
    if p.gpus is not None:
        gx = ax.twinx()
        gx.fill_between(p.gpus.xs, p.gpus.ys, color=GPUS, alpha=0.12, linewidth=0, gid=p.gpus.gid)
        gx.set_ylim(0, p.ymax * t.gpus_per_group)
        gx.yaxis.set_major_locator(MaxNLocator(integer=True))
        gx.set_ylabel("GPUs", color=GPUS)
        gx.tick_params(axis="y", colors=GPUS)
    width = max(p.xmax - p.xmin, 1e-6)
    low = False
    for k, mark in enumerate(p.marks):
        ax.axvline(mark.x, color="k", linewidth=0.7, alpha=0.35)
        # a mark close to the one before goes to the other end of the line, so labels never overlap
        low = (not low) if k and mark.x - p.marks[k - 1].x < width * 0.04 else False
        ax.annotate(mark.label, (mark.x, 0.03 if low else 0.97), xycoords=("data", "axes fraction"),
                    rotation=90, fontsize=6.5, va="bottom" if low else "top", ha="right", color="0.2",
                    gid=f"mark:{t.title}:{mark.label}")


def _clock(epoch: float | None) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%H:%M:%S") if epoch else "?"


def timeline_figure(traces: list[Trace], title: str = "rollout timelines") -> Figure:
    """The figure (raises :class:`NothingToDraw` when no trace recorded a stage)."""
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    shown = panels(traces)
    if not shown:
        raise NothingToDraw("no rollout recorded a stage")
    n = len(shown)
    height = 2.2 * n + 1.0
    fig = Figure(figsize=(11, height))
    axes = fig.subplots(n, 1, squeeze=False)[:, 0]
    for ax, p in zip(axes, shown, strict=True):
        _panel(ax, p)
        t = p.trace
        ax.set_title(f"{t.title} · {t.kind} {t.namespace}/{t.name} · rollout {t.rollout_id[:8]} · "
                     f"{t.outcome} · started {_clock(t.started)} UTC (cluster clock)", fontsize=8.5,
                     loc="left")
        ax.set_xlabel("minutes since the rollout started", fontsize=8)
        ax.grid(alpha=0.25)
    handles = [Line2D([], [], color=GROUPS, linewidth=1.8, label="groups on the new revision (left axis)"),
               Patch(facecolor=COLORS["passed"], alpha=0.2, hatch="///", edgecolor=COLORS["passed"],
                     label="waiting for the readiness gate (red: never passed)"),
               Line2D([], [], color=READY, linewidth=3, alpha=0.7, label="fewest ready groups in the stage"),
               Line2D([], [], color="0.5", linestyle="--", label="desired replicas"),
               Line2D([], [], color="k", alpha=0.35, label="event (labelled where it happened)")]
    if any(p.gpus is not None for p in shown):
        handles.insert(3, Patch(facecolor=GPUS, alpha=0.25, label="GPUs of the new revision (right axis)"))
    if any(len(p.roles) > 1 for p in shown):
        handles.insert(1, Line2D([], [], color=GROUPS, linestyle="--", label="second role (prefill)"))
    fig.suptitle(title, fontsize=11, x=0.01, ha="left")
    fig.legend(handles=handles, loc="lower center", ncol=3, fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.55 / height, 1, 1 - 0.15 / height))
    return fig
