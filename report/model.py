"""What the pictures draw, as data: pure functions from the recorded traces (``records``) to the stages
picture's lanes and the timeline picture's panels; ``stages.py`` and ``timeline.py`` only turn these
into matplotlib artists (with these ``gid``s), so tests check what is drawn here.

Every lane and panel is in its own rollout's minutes and ends where its own rollout's records end: one
long rollout never squashes the others, and an Event of another rollout never stretches an axis (the
traces' Events are assigned by rollout id, ``records.owned_events``). Each event is one mark (the
controller and the engine may both record a stage passing); "held" is drawn only before a stage behind
a manual gate (``Trace.gated``: the policy's ``pause``), where the rollout waited between two stages.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from lwsflow.report.records import Stage, Trace, drawable

_STAGE_NO = re.compile(r"\bstage (\d+)")
_SHORT = {"RolloutStarted": "start", "StageStarted": "stage {k}", "StagePassed": "{k} passed",
          "StageFailed": "{k} FAILED", "AnalysisRun": "analysis {k}", "RollbackStarted": "rollback",
          "RolledBack": "rolled back", "RolloutSucceeded": "succeeded", "RolloutAborted": "aborted",
          "PromotionReceived": "promoted"}
_PER_STAGE = {"StageStarted", "StagePassed", "StageFailed", "AnalysisRun"}
MERGE = 0.015  # marks closer than this share of the panel's width are one moment (one label)
LABEL_HOLD = 0.03  # a hold narrower than this share of its lane is drawn without the word "held"


class NothingToDraw(Exception):
    """No rollout recorded a stage: a picture would be empty."""


@dataclass(frozen=True)
class Bar:
    """A span on a lane, in minutes since the lane's rollout started."""

    gid: str  # stage:LANE:INDEX:wait|bake, rollback:LANE
    kind: str  # wait (for the readiness gate) | bake (bake and checks) | rollback
    start: float
    end: float
    result: str  # passed | failed | running; rollback for a rollback
    stage: int = 0


@dataclass(frozen=True)
class Hold:
    """The rollout waited at a manual gate between two stages."""

    gid: str  # hold:LANE:STAGE
    stage: int  # the gated stage (from 1)
    start: float
    end: float
    label: str  # "held", or "" where it is too narrow to write


@dataclass
class Lane:
    """One row of the stages picture: one role of one rollout, on that rollout's own time axis."""

    label: str
    trace: Trace
    role: str
    bars: list[Bar] = field(default_factory=list)
    holds: list[Hold] = field(default_factory=list)
    numbers: list[tuple[float, int]] = field(default_factory=list)  # (x, stage) written under a bar
    rollback_at: float | None = None  # the X where the rollback started
    xmax: float = 0.0  # the lane's axis ends here (before margins)


@dataclass(frozen=True)
class Mark:
    """Events of one moment of a panel: one vertical line, their labels joined."""

    x: float  # minutes since the rollout started
    label: str
    reasons: tuple[str, ...]


@dataclass(frozen=True)
class Series:
    gid: str
    role: str
    xs: list[float]
    ys: list[float]


@dataclass(frozen=True)
class Wait:
    gid: str
    start: float
    end: float
    failed: bool  # the gate never passed


@dataclass
class Panel:
    """One panel of the timeline picture: one rollout, on its own time axis."""

    trace: Trace
    roles: list[str]
    series: list[Series]
    waits: list[Wait]
    ready: list[tuple[int, float, float]]  # (fewest ready groups, from, to) per stage
    gpus: Series | None  # GPUs of the new revision (groups times GPUs per group)
    marks: list[Mark]
    xmin: float
    xmax: float
    ymax: float


def _roles(t: Trace) -> list[str]:
    return sorted({s.role for s in t.stages}, key=lambda r: (r != "decode", r))  # decode moves first


def _t0(t: Trace) -> float:
    return t.started or min((s.started or s.ended or 0.0 for s in t.stages), default=0.0)


def holds(t: Trace) -> list[tuple[int, float, float]]:
    """(stage, from, to) in epoch seconds where a manual gate held the rollout: from the last role's end
    of the stage before the gate to the first role's start of the gated stage."""
    out = []
    for k in sorted(set(t.gated)):
        before = [s.ended for s in t.stages if s.index == k - 1 and s.ended is not None]
        after = [s.started for s in t.stages if s.index == k and s.started is not None]
        if before and after and min(after) > max(before):
            out.append((k, max(before), min(after)))
    return out


def _stage_bars(lane: Lane, s: Stage, t0: float) -> None:
    start = s.started if s.started is not None else s.ended
    if start is None:
        return
    end = s.ended if s.ended is not None else (lane.trace.ended or start)
    # no gate time: a failed stage waited for its gate to the end; a stage rebuilt from Events (no gate
    # recorded) is drawn whole
    gate = s.gate_passed if s.gate_passed is not None else (end if s.result == "failed" else start)
    a, g, e = (start - t0) / 60, (gate - t0) / 60, (end - t0) / 60
    if g > a:
        lane.bars.append(Bar(f"stage:{lane.label}:{s.index}:wait", "wait", a, g, s.result, s.index))
    if e > g or g <= a:
        lane.bars.append(Bar(f"stage:{lane.label}:{s.index}:bake", "bake", g, max(e, g), s.result, s.index))
    lane.numbers.append((a, s.index))


def lanes(traces: list[Trace]) -> list[Lane]:
    """The stages picture's lanes, in the traces' order (a P/D pair: a lane per role, decode first)."""
    out = []
    for t in drawable(traces):
        t0 = _t0(t)
        gates = [(k, (a - t0) / 60, (b - t0) / 60) for k, a, b in holds(t)]
        mine = []
        for role in _roles(t):
            lane = Lane(f"{t.title} {role}".strip(), t, role)
            for s in sorted((s for s in t.stages if s.role == role), key=lambda s: s.index):
                _stage_bars(lane, s, t0)
            if t.rollback is not None:  # a pair rolls both roles back: on each lane
                rb0 = (t.rollback[0] - t0) / 60
                rb1 = ((t.rollback[1] or t.ended or t.rollback[0]) - t0) / 60
                lane.bars.append(Bar(f"rollback:{lane.label}", "rollback", rb0, max(rb1, rb0), "rollback"))
                lane.rollback_at = rb0
            mine.append(lane)
        # the roles of one rollout share its scale (they compare); other rollouts have their own
        end = max([b.end for lane in mine for b in lane.bars] + [x1 for _k, _x0, x1 in gates] + [1e-6])
        for lane in mine:
            lane.xmax = end
            lane.holds = [Hold(f"hold:{lane.label}:{k}", k, x0, x1,
                               "held" if x1 - x0 >= LABEL_HOLD * end else "") for k, x0, x1 in gates]
        out += mine
    return out


def _stage_no(message: str) -> int | None:
    m = _STAGE_NO.search(message)
    return int(m.group(1)) if m else None


def mark_label(reason: str, message: str) -> str:
    k = _stage_no(message)
    return _SHORT.get(reason, reason).format(k=k if k is not None else "?")


def marks(t: Trace, width: float) -> list[Mark]:
    """One mark per event (an event recorded twice, or a stage's event again: once, the first), those of
    one moment (closer than ``MERGE`` of ``width`` minutes) joined."""
    t0 = t.started or 0.0
    seen: set[tuple[str, object]] = set()
    out: list[Mark] = []
    for at, reason, message in sorted(t.events):
        key = (reason, _stage_no(message) if reason in _PER_STAGE else None)
        if key in seen:
            continue
        seen.add(key)
        x, label = (at - t0) / 60, mark_label(reason, message)
        if out and x - out[-1].x <= max(width * MERGE, 1e-6):
            last = out[-1]
            out[-1] = Mark(last.x, f"{last.label} · {label}", (*last.reasons, reason))
        else:
            out.append(Mark(x, label, (reason,)))
    return out


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


def panels(traces: list[Trace]) -> list[Panel]:
    """The timeline picture's panels, one per rollout that recorded a stage."""
    out = []
    for t in drawable(traces):
        t0 = t.started or 0.0
        roles = _roles(t)
        series, waits, ready = [], [], []
        for role in roles:
            stages = [s for s in t.stages if s.role == role]
            xs, ys = new_revision_series(t, stages)
            series.append(Series(f"groups:{t.title}:{role}", role, xs, ys))
            for s in stages:
                if s.started is None:
                    continue
                until = s.gate_passed if s.gate_passed is not None else (
                    s.ended if s.result == "failed" else None)
                if until is not None and until > s.started:
                    waits.append(Wait(f"wait:{t.title}:{s.role}:{s.index}", (s.started - t0) / 60,
                                      (until - t0) / 60, s.result == "failed" and s.gate_passed is None))
                if s.min_ready is not None and s.ended is not None:
                    ready.append((s.min_ready, (s.started - t0) / 60, (s.ended - t0) / 60))
        gpus = None
        if t.gpus_per_group:
            first = series[0]  # a pair: the first role's groups (decode)
            gpus = Series(f"gpus:{t.title}", first.role, first.xs, [y * t.gpus_per_group for y in first.ys])
        ends = [(s.ended - t0) / 60 for s in t.stages if s.ended is not None]
        drawn = max([x for s in series for x in s.xs] + [w.end for w in waits] + ends + [1e-6])
        found = marks(t, drawn)
        xs_marks = [m.x for m in found]
        out.append(Panel(t, roles, series, waits, ready, gpus, found, min([0.0, *xs_marks]),
                         max([drawn, *xs_marks]),
                         max(t.replicas, max((s.groups for s in t.stages), default=1)) * 1.25 + 0.5))
    return out
