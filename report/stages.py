"""The stages picture: one lane per rollout (and P/D role), one bar per stage, each lane from its own start
and on its own time axis (one long rollout does not squash the others).

A stage's bar runs from its start to its end, hatched up to the moment its gate passed (waiting for
readiness), solid after (bake and checks); a dotted line marks where a manual gate held the rollout
between two stages; failed stages are red; a rollback is an orange bar from its
start to the moment the previous template was back on every group, with an X where it started and the
word "rollback" beside it. What is drawn comes from ``model.lanes``; every drawn artist carries its
``gid`` (``stage:LANE:INDEX:wait|bake``, ``rollback:LANE``, ``hold:LANE:STAGE``) so tests and the
dashboard can find what was drawn.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lwsflow.report.model import NothingToDraw, lanes
from lwsflow.report.records import Trace

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["COLORS", "ROLLBACK", "NothingToDraw", "stages_figure"]
COLORS = {"passed": "#2e7d32", "failed": "#c62828", "running": "#9e9e9e"}
ROLLBACK = "#ef6c00"
ROW = 0.62  # inches per lane: its bars and its own minutes axis


def stages_figure(traces: list[Trace], title: str = "staged rollouts") -> Figure:
    """The figure (raises :class:`NothingToDraw` when no trace recorded a stage)."""
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    rows = lanes(traces)
    if not rows:
        raise NothingToDraw("no rollout recorded a stage (no stage log on the targets, no history on "
                            "the RolloutPolicies, no rollout Events)")
    height = ROW * len(rows) + 1.6
    fig = Figure(figsize=(11, height))
    axes = fig.subplots(len(rows), 1, squeeze=False)[:, 0]
    for ax, lane in zip(axes, rows, strict=True):
        for bar in lane.bars:
            if bar.kind == "rollback":
                drawn = ax.barh(0, bar.end - bar.start, left=bar.start, height=0.6, color=ROLLBACK,
                                alpha=0.9)
            elif bar.kind == "wait":
                color = COLORS.get(bar.result, COLORS["running"])
                drawn = ax.barh(0, bar.end - bar.start, left=bar.start, height=0.6, color=color, alpha=0.35,
                                hatch="///", edgecolor=color, linewidth=0)
            else:
                drawn = ax.barh(0, bar.end - bar.start, left=bar.start, height=0.6,
                                color=COLORS.get(bar.result, COLORS["running"]), alpha=0.9,
                                edgecolor="white", linewidth=0.6)
            drawn.patches[0].set_gid(bar.gid)
        for x, index in lane.numbers:
            ax.text(x, -0.36, f"{index}", fontsize=7, va="bottom", ha="left", color="0.25")
        if lane.rollback_at is not None:
            rb = next(b for b in lane.bars if b.kind == "rollback")
            (mark,) = ax.plot([lane.rollback_at], [0], marker="X", color="black", markersize=9,
                              linestyle="none")
            mark.set_gid(f"rollback-mark:{lane.label}")
            ax.annotate("rollback", (rb.end, 0), xytext=(4, 0), textcoords="offset points", fontsize=7,
                        va="center")
        for hold in lane.holds:
            (held,) = ax.plot([hold.start, hold.end], [0, 0], color="0.35", linestyle=":", linewidth=1.5)
            held.set_gid(hold.gid)
            if hold.label:
                ax.text((hold.start + hold.end) / 2, -0.1, hold.label, fontsize=7, ha="center", va="bottom",
                        color="0.35")
        ax.set_yticks([0], [lane.label], fontsize=8)
        ax.set_ylim(0.6, -0.6)
        ax.set_xlim(0, lane.xmax * 1.12 + 0.05)
        ax.tick_params(axis="x", labelsize=7, pad=1)
        ax.grid(axis="x", alpha=0.3)
    axes[-1].set_xlabel("minutes of cluster time since each rollout started, each lane on its own scale "
                        "(numbers: the stage)", fontsize=8)
    axes[0].set_title(title, fontsize=11, loc="left")
    handles = [Patch(facecolor=COLORS["passed"], alpha=0.35, hatch="///", edgecolor=COLORS["passed"],
                     label="waiting for the readiness gate"),
               Patch(facecolor=COLORS["passed"], alpha=0.9, label="bake + checks (stage passed)"),
               Patch(facecolor=COLORS["failed"], alpha=0.9, label="stage failed"),
               Patch(facecolor=ROLLBACK, alpha=0.9, label="rollback to the previous template"),
               Line2D([], [], marker="X", color="black", linestyle="none", label="rollback started"),
               Line2D([], [], color="0.35", linestyle=":", linewidth=1.5,
                      label="held at a manual gate (the stage's pause) between stages")]
    fig.legend(handles=handles, loc="lower center", ncol=3, fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.6 / height, 1, 1), h_pad=0.2)
    return fig
