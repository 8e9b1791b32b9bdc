"""The rollout timeline picture: one lane per model (and role), one bar per stage, in cluster time.

Each lane starts at its own rollout's start, so the shapes compare (the demo rolls models one after
another).

Drawn from the rollout reports (``lwsflow.controller.rollout.report``): a stage bar runs from its start to
its end, hatched up to the moment its gate passed (waiting for readiness), plain after (bake and
hooks). Failed stages are red; a rollback is a black marker at its time.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import Any

_COLORS = {"passed": "#2e7d32", "failed": "#c62828", "running": "#9e9e9e"}


def _lanes(reports: dict[str, dict[str, Any]]) -> list[tuple[str, dict[str, Any], list[dict[str, Any]]]]:
    lanes = []
    for model, rep in reports.items():
        roles = sorted({s.get("role", "") for s in rep.get("stages", [])}) or [""]
        for role in roles:
            stages = [s for s in rep.get("stages", []) if s.get("role", "") == role]
            lanes.append((f"{model} {role}".strip(), rep, stages))
    return lanes


def draw_timeline(reports: dict[str, dict[str, Any]], path: Path) -> Path:
    """Write the PNG to ``path`` (atomically, with the mode any file the user creates gets) and return it."""
    import matplotlib

    matplotlib.use("Agg")  # no display: files only
    import matplotlib.pyplot as plt

    lanes = _lanes(reports)
    fig, ax = plt.subplots(figsize=(11, 0.6 * len(lanes) + 1.6))
    for y, (_label, rep, stages) in enumerate(lanes):
        t0 = rep.get("started") or 0.0  # each lane from its own start: rollouts ran one after another
        for s in stages:
            if s.get("started") is None:
                continue
            start = (s["started"] - t0) / 60
            end = ((s.get("ended") or rep.get("ended") or s["started"]) - t0) / 60
            gate = ((s.get("gate_passed") or s.get("ended") or s["started"]) - t0) / 60
            color = _COLORS.get(s.get("result", "running"), "#9e9e9e")
            ax.barh(y, gate - start, left=start, color=color, alpha=0.45, hatch="//", edgecolor=color)
            ax.barh(y, max(end - gate, 0.0), left=gate, color=color, alpha=0.9)
            ax.text(start, y + 0.32, f"{s.get('index')}:{s.get('target_groups')}g", fontsize=7)
        for rb in rep.get("rollbacks", []):
            at = rb.get("at") or rb.get("started") or rep.get("ended")
            if at:
                ax.plot([(at - t0) / 60], [y], marker="X", color="black", markersize=9)
    ax.set_yticks(range(len(lanes)), [lane[0] for lane in lanes])
    ax.invert_yaxis()
    ax.set_xlabel("minutes of cluster time since the rollout started")
    ax.set_title("staged rollouts: hatched = waiting for the readiness gate, solid = bake + hooks, "
                 "X = rollback", fontsize=9)
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    # Not mkstemp: its files are 0600; an ordinary open honours the umask (0644 as a rule).
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    try:
        fig.savefig(tmp, dpi=110, format="png")
        os.replace(tmp, path)
    finally:
        plt.close(fig)
        tmp.unlink(missing_ok=True)
    return path
