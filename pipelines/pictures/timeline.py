"""The timeline picture: one panel per rollout, in that rollout's own minutes, with what happened when.

Per panel, drawn from the recorded stages (``records``): the groups on the new revision (blue, left axis:
each stage's groups from its start, the partition write; back to zero over a rollback), each stage's wait
for its readiness gate (hatched as in the stages picture; red where it never passed), the desired
replicas (dashed), the fewest ready groups seen in each stage (green), and the GPUs the new revision's
groups hold (red, on a right axis with red ticks: groups times the template's GPUs per group). The
rollout's Events are vertical lines labelled where they happened (events at the same moment share one
label). One legend for the figure, below the panels; the title above them.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from lwsflow.pipelines.pictures.records import Stage, Trace, drawable
from lwsflow.pipelines.pictures.stages import COLORS, NothingToDraw

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

_SHORT = {"RolloutStarted": "start", "StageStarted": "stage {k}", "StagePassed": "{k} passed",
          "StageFailed": "{k} FAILED", "AnalysisRun": "analysis {k}", "RollbackStarted": "rollback",
          "RolledBack": "rolled back", "RolloutSucceeded": "succeeded", "RolloutAborted": "aborted",
          "PromotionReceived": "promoted"}
GROUPS, READY, GPUS = "tab:blue", "tab:green", "tab:red"


def marker_label(reason: str, message: str) -> str:
    m = re.match(r"^stage (\d+)", message)
    return _SHORT.get(reason, reason).format(k=m.group(1) if m else "?")


def merged_marks(t: Trace) -> list[tuple[float, str]]:
    """(minutes since the rollout started, label) per distinct moment (labels of one moment joined)."""
    t0 = t.started or 0.0
    marks: list[tuple[float, str]] = []
    span = max(((t.ended or e[0]) - t0) for e in t.events) if t.events else 0.0
    for at, reason, message in t.events:
        x = (at - t0) / 60
        label = marker_label(reason, message)
        if marks and abs(marks[-1][0] - x) <= max(span / 60 * 0.015, 1e-6):
            if label not in marks[-1][1]:
                marks[-1] = (marks[-1][0], f"{marks[-1][1]} · {label}")
        else:
            marks.append((x, label))
    return marks


def new_revision_series(t: Trace, stages: list[Stage]) -> tuple[list[float], list[float]]:
    """Minutes and groups on the new revision: a stage moves its groups when it starts (the partition
    write), a rollback takes them back by the time it ends."""
    t0 = t.started or 0.0
    xs, ys = [0.0], [0.0]
    for s in sorted(stages, key=lambda s: s.index):
        if s.started is None:
            continue
        xs += [(s.started - t0) / 60] * 2
        ys += [ys[-1], float(s.groups)]
    if t.rollback is not None:
        xs += [(t.rollback[0] - t0) / 60, ((t.rollback[1] or t.rollback[0]) - t0) / 60]
        ys += [ys[-1], 0.0]
    xs.append(max([*xs, ((t.ended - t0) / 60) if t.ended else 0.0]))
    ys.append(ys[-1])
    return xs, ys


def _waits(ax: Axes, t: Trace, stages: list[Stage]) -> None:
    """Each stage's wait for readiness, shaded as in the stages picture (red: the gate never passed)."""
    t0 = t.started or 0.0
    for s in stages:
        if s.started is None:
            continue
        until = s.gate_passed if s.gate_passed is not None else (s.ended if s.result == "failed" else None)
        if until is not None and until > s.started:
            color = COLORS["failed" if s.result == "failed" and s.gate_passed is None else "passed"]
            ax.axvspan((s.started - t0) / 60, (until - t0) / 60, facecolor=color, alpha=0.12, hatch="///",
                       edgecolor=color, linewidth=0, gid=f"wait:{t.title}:{s.role}:{s.index}")


def _clock(epoch: float | None) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%H:%M:%S") if epoch else "?"


def timeline_figure(traces: list[Trace], title: str = "rollout timelines") -> Figure:
    """The figure (raises :class:`NothingToDraw` when no trace recorded a stage)."""
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch
    from matplotlib.ticker import MaxNLocator

    shown = drawable(traces)
    if not shown:
        raise NothingToDraw("no rollout recorded a stage")
    n = len(shown)
    height = 2.2 * n + 1.0
    fig = Figure(figsize=(11, height))
    axes = fig.subplots(n, 1, squeeze=False)[:, 0]
    for ax, t in zip(axes, shown, strict=True):
        roles = sorted({s.role for s in t.stages}, key=lambda r: (r != "decode", r))
        for role, style in zip(roles, ("-", "--", ":"), strict=False):
            stages = [s for s in t.stages if s.role == role]
            _waits(ax, t, stages)
            xs, ys = new_revision_series(t, stages)
            (line,) = ax.plot(xs, ys, color=GROUPS, linestyle=style, linewidth=1.8)
            line.set_gid(f"groups:{t.title}:{role}")
            for s in stages:
                if s.min_ready is not None and s.started is not None and s.ended is not None:
                    t0 = t.started or 0.0
                    ax.hlines(s.min_ready, (s.started - t0) / 60, (s.ended - t0) / 60, color=READY,
                              linewidth=3, alpha=0.7)
        if t.replicas:
            ax.axhline(t.replicas, color="0.5", linestyle="--", linewidth=1)
        ax.set_ylim(0, max(t.replicas, max((s.groups for s in t.stages), default=1)) * 1.25 + 0.5)
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_ylabel("groups", color=GROUPS)
        ax.tick_params(axis="y", colors=GROUPS)
        if t.gpus_per_group:
            gx = ax.twinx()
            xs, ys = new_revision_series(t, t.stages if len(roles) == 1 else
                                         [s for s in t.stages if s.role == roles[0]])
            gx.fill_between(xs, [y * t.gpus_per_group for y in ys], color=GPUS, alpha=0.12, linewidth=0)
            gx.set_ylim(0, ax.get_ylim()[1] * t.gpus_per_group)
            gx.yaxis.set_major_locator(MaxNLocator(integer=True))
            gx.set_ylabel("GPUs", color=GPUS)
            gx.tick_params(axis="y", colors=GPUS)
        marks = merged_marks(t)
        width = max([x for x, _ in marks] + [ax.get_xlim()[1], 1e-6])
        low = False
        for k, (x, label) in enumerate(marks):
            ax.axvline(x, color="k", linewidth=0.7, alpha=0.35)
            # a mark close to the one before goes to the other end of the line, so labels never overlap
            low = (not low) if k and x - marks[k - 1][0] < width * 0.04 else False
            ax.annotate(label, (x, 0.03 if low else 0.97), xycoords=("data", "axes fraction"), rotation=90,
                        fontsize=6.5, va="bottom" if low else "top", ha="right", color="0.2",
                        gid=f"mark:{t.title}:{label}")
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
    if any(t.gpus_per_group for t in shown):
        handles.insert(3, Patch(facecolor=GPUS, alpha=0.25, label="GPUs of the new revision (right axis)"))
    if any(len({s.role for s in t.stages}) > 1 for t in shown):
        handles.insert(1, Line2D([], [], color=GROUPS, linestyle="--", label="second role (prefill)"))
    fig.suptitle(title, fontsize=11, x=0.01, ha="left")
    fig.legend(handles=handles, loc="lower center", ncol=3, fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.55 / height, 1, 1 - 0.15 / height))
    return fig
