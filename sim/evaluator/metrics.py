"""Figures from one policy run, and the side-by-side table that compares policies.

- deadlines: jobs with a deadline, how many finished by it, how many missed (unfinished ones miss);
- wait: time spent pending before the final start (re-queues after preemption included), over the
  work that started; mean and p95;
- GPU utilisation over time (held GPUs / healthy GPUs, including GPUs held by partial groups) and
  its time-weighted mean;
- fragmentation: free GPUs stranded on partially used nodes (time-weighted mean, and as a share of
  all free GPUs): they exist, yet a whole-node job cannot use them;
- preemptions and evictions (node deletions).
"""

from __future__ import annotations

import math
from typing import Any

from lwsflow.sim.evaluator.engine import DELETED, DONE, Result

_SERIES_POINTS = 100


def _p95(values: list[float]) -> float:
    if not values:
        return 0.0
    s = sorted(values)
    return s[min(len(s) - 1, math.ceil(0.95 * len(s)) - 1)]


def _time_weighted(timeline: list[tuple[float, int, int, int]], end: float) -> tuple[float, float, float]:
    """(mean utilisation, mean stranded GPUs, mean stranded share of free GPUs) over [first, end]."""
    if not timeline:
        return 0.0, 0.0, 0.0
    area_u = area_s = area_sf = 0.0
    span = 0.0
    for (t, used, total, stranded), nxt in zip(timeline, [*timeline[1:], (end, 0, 0, 0)], strict=True):
        dt = max(0.0, nxt[0] - t)
        span += dt
        area_u += dt * (used / total if total else 0.0)
        area_s += dt * stranded
        free = total - used
        area_sf += dt * (stranded / free if free else 0.0)
    if span <= 0:
        _, used, total, stranded = timeline[-1]
        return (used / total if total else 0.0), float(stranded), 0.0
    return area_u / span, area_s / span, area_sf / span


def utilization_series(result: Result, points: int = _SERIES_POINTS) -> list[list[float]]:
    """[[t seconds, utilisation], ...], at most ``points`` samples (the step function, resampled)."""
    tl = result.timeline
    if not tl:
        return []
    t0, t1 = tl[0][0], max(result.end, tl[-1][0])
    out, i = [], 0
    for k in range(points):
        t = t0 + (t1 - t0) * k / max(1, points - 1)
        while i + 1 < len(tl) and tl[i + 1][0] <= t:
            i += 1
        _, used, total, _ = tl[i]
        out.append([round(t, 3), round(used / total if total else 0.0, 4)])
    return out


def summarize(result: Result) -> dict[str, Any]:
    """The per-policy figures printed in tables and in ``--json``."""
    batch = [j for j in result.jobs if j.kind == "job" and j.state != DELETED]  # cancelled ones aside
    with_deadline = [j for j in batch if j.deadline is not None]
    met = sum(j.met_deadline for j in with_deadline)
    waits = [j.wait for j in result.jobs if j.first_start is not None]
    util, stranded, stranded_share = _time_weighted(result.timeline, result.end)
    classes: dict[str, dict[str, int]] = {}
    for j in with_deadline:
        c = classes.setdefault(j.group, {"jobs": 0, "met": 0, "missed": 0})
        c["jobs"] += 1
        c["met" if j.met_deadline else "missed"] += 1
    return {
        "jobs": len(batch),
        "with_deadline": len(with_deadline),
        "deadlines_met": met,
        "missed": len(with_deadline) - met,
        "met_fraction": round(met / len(with_deadline), 4) if with_deadline else None,
        "finished": sum(j.state == DONE for j in batch),
        "unfinished": sum(j.state != DONE for j in batch),
        "cancelled": sum(j.kind == "job" and j.state == DELETED for j in result.jobs),
        "serving_groups": len(result.jobs) - len(batch),
        "wait_mean_s": round(sum(waits) / len(waits), 3) if waits else 0.0,
        "wait_p95_s": round(_p95(waits), 3),
        "gpu_utilization_mean": round(util, 4),
        "stranded_gpus_mean": round(stranded, 3),
        "stranded_share_of_free": round(stranded_share, 4),
        "preemptions": result.preemptions,
        "evictions": result.evictions,
        "makespan_s": round(result.end, 3),
        "events": result.events,
        "wall_s": round(result.wall_s, 4),
        "classes": classes,
        "utilization": utilization_series(result),
    }


def _human(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f}s"
    if seconds < 7200:
        return f"{seconds / 60:.1f}m"
    if seconds < 172800:
        return f"{seconds / 3600:.1f}h"
    return f"{seconds / 86400:.1f}d"


_ROWS: list[tuple[str, str, Any]] = [
    ("jobs", "jobs", str),
    ("deadlines met", "deadlines_met", str),
    ("missed", "missed", str),
    ("met %", "met_fraction", lambda v: "-" if v is None else f"{100 * v:.1f}%"),
    ("unfinished", "unfinished", str),
    ("wait mean", "wait_mean_s", _human),
    ("wait p95", "wait_p95_s", _human),
    ("GPU utilization", "gpu_utilization_mean", lambda v: f"{100 * v:.1f}%"),
    ("stranded free GPUs", "stranded_gpus_mean", lambda v: f"{v:.1f}"),
    ("stranded % of free", "stranded_share_of_free", lambda v: f"{100 * v:.1f}%"),
    ("preemptions", "preemptions", str),
    ("evictions", "evictions", str),
    ("makespan", "makespan_s", _human),
    ("events", "events", str),
    ("wall", "wall_s", lambda v: f"{v:.2f}s"),
]


def table(summaries: dict[str, dict[str, Any]]) -> str:
    """One column per policy, side by side; per-class deadline rows at the bottom."""
    rows = [["", *summaries]]
    for label, key, fmt in _ROWS:
        rows.append([label, *(fmt(s[key]) for s in summaries.values())])
    groups: list[str] = []
    for s in summaries.values():
        groups += [g for g in s["classes"] if g not in groups]
    for g in groups:
        cells = []
        for s in summaries.values():
            c = s["classes"].get(g)
            cells.append(f"{c['met']}/{c['jobs']}" if c else "-")
        rows.append([f"met: {g}", *cells])
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = [
        "  ".join(c.ljust(widths[0]) if i == 0 else c.rjust(widths[i]) for i, c in enumerate(r)) for r in rows
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(line.rstrip() for line in lines)
