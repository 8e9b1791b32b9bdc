"""The stages picture: one lane per rollout (and P/D role), one bar per stage, each lane from its own start.

A stage's bar runs from its start to its end, hatched up to the moment its gate passed (waiting for
readiness), solid after (bake and checks); a dotted line marks a hold between two stages (a manual
gate, a pause); failed stages are red; a rollback is an orange bar from its
start to the moment the previous template was back on every group, with an X where it started and the
word "rollback" beside it. The rollouts ran one after another: each lane starting at its own zero lets
their shapes compare. Every drawn artist carries a ``gid`` (``stage:LANE:INDEX:wait|bake``,
``rollback:LANE``) so tests and the dashboard can find what was drawn.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING

from lwsflow.pipelines.pictures.records import Trace, drawable

if TYPE_CHECKING:
    from matplotlib.figure import Figure

COLORS = {"passed": "#2e7d32", "failed": "#c62828", "running": "#9e9e9e"}
ROLLBACK = "#ef6c00"


class NothingToDraw(Exception):
    """No rollout recorded a stage: a picture would be empty."""


def lanes(traces: list[Trace]) -> list[tuple[str, Trace, str]]:
    """(label, trace, role) per lane, in the traces' order (decode before prefill: decode moves first)."""
    out = []
    for t in drawable(traces):
        roles = sorted({s.role for s in t.stages}, key=lambda r: (r != "decode", r))
        for role in roles:
            out.append((f"{t.title} {role}".strip(), t, role))
    return out


def stages_figure(traces: list[Trace], title: str = "staged rollouts") -> Figure:
    """The figure (raises :class:`NothingToDraw` when no trace recorded a stage)."""
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    rows = lanes(traces)
    if not rows:
        raise NothingToDraw("no rollout recorded a stage (no stage log on the targets, no history on "
                            "the RolloutPolicies, no rollout Events)")
    fig = Figure(figsize=(11, 0.5 * len(rows) + 1.6))
    ax = fig.add_subplot()
    span = 0.0
    holds = []
    for y, (label, t, role) in enumerate(rows):
        t0 = t.started or min(s.started or s.ended or 0.0 for s in t.stages)
        mine = sorted((s for s in t.stages if s.role == role), key=lambda s: s.index)
        for prev, nxt in itertools.pairwise(mine):  # held between stages: a manual gate, a pause
            if prev.ended is not None and nxt.started is not None and nxt.started - prev.ended > 1.0:
                holds.append((y, (prev.ended - t0) / 60, (nxt.started - t0) / 60,
                              f"hold:{label}:{nxt.index}"))
        for s in mine:
            start = s.started if s.started is not None else s.ended
            if start is None:
                continue
            end = s.ended if s.ended is not None else (t.ended or start)
            # no gate time: a failed stage waited for its gate to the end; a stage rebuilt from Events
            # (no gate recorded) is drawn whole
            gate = s.gate_passed if s.gate_passed is not None else (end if s.result == "failed" else start)
            color = COLORS.get(s.result, COLORS["running"])
            a, g, e = (start - t0) / 60, (gate - t0) / 60, (end - t0) / 60
            span = max(span, e)
            if g > a:
                wait = ax.barh(y, g - a, left=a, height=0.6, color=color, alpha=0.35, hatch="///",
                               edgecolor=color, linewidth=0)
                wait.patches[0].set_gid(f"stage:{label}:{s.index}:wait")
            if e > g or g <= a:
                bake = ax.barh(y, max(e - g, 0.0), left=g, height=0.6, color=color, alpha=0.9,
                               edgecolor="white", linewidth=0.6)
                bake.patches[0].set_gid(f"stage:{label}:{s.index}:bake")
            ax.text(a, y - 0.36, f"{s.index}", fontsize=7, va="bottom", ha="left", color="0.25")
        if t.rollback is not None:  # a pair rolls both roles back: on each lane
            rb0 = (t.rollback[0] - t0) / 60
            rb1 = ((t.rollback[1] or t.ended or t.rollback[0]) - t0) / 60
            span = max(span, rb1)
            bar = ax.barh(y, max(rb1 - rb0, 0.0), left=rb0, height=0.6, color=ROLLBACK, alpha=0.9)
            bar.patches[0].set_gid(f"rollback:{label}")
            (mark,) = ax.plot([rb0], [y], marker="X", color="black", markersize=9, linestyle="none")
            mark.set_gid(f"rollback-mark:{label}")
            ax.annotate("rollback", (rb1, y), xytext=(4, 0), textcoords="offset points", fontsize=7,
                        va="center")
    for y, a, b, gid in holds:  # drawn once the span is known: a hold shorter than 1% of it is noise
        if b - a > span * 0.01:
            (held,) = ax.plot([a, b], [y, y], color="0.35", linestyle=":", linewidth=1.5)
            held.set_gid(gid)
            ax.text((a + b) / 2, y - 0.1, "held", fontsize=7, ha="center", va="bottom", color="0.35")
    ax.set_yticks(range(len(rows)), [r[0] for r in rows], fontsize=8)
    ax.set_ylim(len(rows) - 0.4, -0.6)
    ax.set_xlim(0, span * 1.12 + 0.05)
    ax.set_xlabel("minutes of cluster time since each rollout started (numbers: the stage)")
    ax.grid(axis="x", alpha=0.3)
    ax.set_title(title, fontsize=11, loc="left")
    handles = [Patch(facecolor=COLORS["passed"], alpha=0.35, hatch="///", edgecolor=COLORS["passed"],
                     label="waiting for the readiness gate"),
               Patch(facecolor=COLORS["passed"], alpha=0.9, label="bake + checks (stage passed)"),
               Patch(facecolor=COLORS["failed"], alpha=0.9, label="stage failed"),
               Patch(facecolor=ROLLBACK, alpha=0.9, label="rollback to the previous template"),
               Line2D([], [], marker="X", color="black", linestyle="none", label="rollback started"),
               Line2D([], [], color="0.35", linestyle=":", linewidth=1.5,
                      label="held between stages (manual gate, pause)")]
    fig.legend(handles=handles, loc="lower center", ncol=3, fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.6 / fig.get_figheight(), 1, 1))
    return fig
