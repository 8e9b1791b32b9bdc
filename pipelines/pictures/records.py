"""What a cluster recorded of its staged rollouts, as traces the pictures draw.

Three sources, most detailed first, so the pictures never depend on who drove a rollout:

1. a RolloutPolicy's ``status.history``: every ended rollout's stage timings (``policy/timings.py``);
2. the target's ``rollout.lwsflow.io/stage-log`` annotation: the last rollout, whoever drove it
   (``lwsflow rollout``, the pipeline step, the in-cluster controller), also while it runs;
3. the target's Events (``StageStarted``, ``StagePassed``, ``StageFailed``, ``RollbackStarted``,
   ``RolledBack``): a rollout made by a controller that kept no stage log; they have no gate time,
   so its stages are drawn without the wait/bake split.

Events also give every trace its markers (the timeline picture labels them where they happened).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from lwsflow.controller.api import labels as L
from lwsflow.controller.kube.client import Kube
from lwsflow.controller.kube.resources import DS, EVENT, LWS, ROLLOUT_POLICY, Resource
from lwsflow.controller.policy import timings
from lwsflow.controller.rollout import state

MARKED = ("RolloutStarted", "StageStarted", "StagePassed", "StageFailed", "AnalysisRun", "RollbackStarted",
          "RolledBack", "RolloutSucceeded", "RolloutAborted", "PromotionReceived")
_KIND_RES = {"LeaderWorkerSet": LWS, "DisaggregatedSet": DS}


@dataclass
class Stage:
    """One stage of one role: times in epoch seconds of the cluster's clock."""

    index: int
    role: str
    groups: int
    started: float | None
    gate_passed: float | None
    ended: float | None
    result: str  # passed | failed | running
    replicas: int = 0
    min_ready: int | None = None


@dataclass
class Trace:
    """One rollout of one target, as recorded."""

    namespace: str
    kind: str  # LeaderWorkerSet, DisaggregatedSet, LeaderWorkerSetPair
    name: str
    rollout_id: str
    outcome: str  # Succeeded, RolledBack, Failed, Aborted, Running
    started: float | None
    ended: float | None
    source: str  # status | annotations | events
    stages: list[Stage] = field(default_factory=list)
    rollback: tuple[float, float | None] | None = None
    events: list[tuple[float, str, str]] = field(default_factory=list)  # (time, reason, message)
    gpus_per_group: int = 0
    replicas: int = 0
    label: str = ""  # how the pictures name it (default: the target's name)
    objects: list[str] = field(default_factory=list)  # the objects its Events are about

    @property
    def title(self) -> str:
        return self.label or self.name


def rfc3339(text: Any) -> float | None:
    """Epoch seconds of the annotations' form (microseconds) or the API's (seconds)."""
    if not isinstance(text, str) or not text:
        return None
    got = state.epoch(text)
    if got is not None:
        return got
    try:
        return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()
    except ValueError:
        return None


def _gpus(spec: dict[str, Any]) -> int:
    total = 0
    for c in spec.get("containers") or []:
        res = c.get("resources") or {}
        want = str({**(res.get("limits") or {}), **(res.get("requests") or {})}.get(L.GPU_RESOURCE, 0))
        total += int(want) if want.isdigit() else 0
    return total


def gpus_per_group(obj: dict[str, Any]) -> int:
    """GPUs one group of the target's current template asks for (a DS: the sum over its roles)."""
    spec = obj.get("spec") or {}
    tmpls = [r.get("spec", {}).get("leaderWorkerTemplate") or {} for r in spec.get("roles") or []] \
        or [spec.get("leaderWorkerTemplate") or {}]
    total = 0
    for t in tmpls:
        size = int(t.get("size") or 1)
        worker = _gpus((t.get("workerTemplate") or {}).get("spec") or {})
        lead = t.get("leaderTemplate")
        leader = _gpus(lead.get("spec") or {}) if isinstance(lead, dict) else worker
        total += leader + worker * (size - 1)
    return total


def _stage(rec: dict[str, Any]) -> Stage:
    return Stage(int(rec.get("stage") or 0), str(rec.get("role") or ""), int(rec.get("groups") or 0),
                 rfc3339(rec.get("started")), rfc3339(rec.get("gatePassed")), rfc3339(rec.get("ended")),
                 str(rec.get("result") or "running"), int(rec.get("replicas") or 0), rec.get("minReady"))


def _from_timings(ns: str, kind: str, name: str, rid: str, outcome: str, started: Any, ended: Any,
                  recorded: dict[str, Any], source: str) -> Trace:
    rb = rfc3339(recorded.get("rollbackStarted"))
    return Trace(ns, kind, name, rid, outcome, rfc3339(started), rfc3339(ended), source,
                 [_stage(s) for s in recorded.get("stages") or []],
                 (rb, rfc3339(recorded.get("rollbackFinished"))) if rb is not None else None)


_OUTCOME = {state.SUCCEEDED: "Succeeded", state.ROLLED_BACK: "RolledBack", state.FAILED: "Failed",
            state.ABORTED: "Aborted"}


def _from_annotations(ns: str, kind: str, name: str, objs: list[dict[str, Any]]) -> Trace | None:
    sts = [state.RolloutState.from_object(o) for o in objs]
    st = next((s for s in sts if s.id), None)
    if st is None:
        return None
    outcome = "Running" if any(s.active for s in sts) else _OUTCOME.get(st.phase, st.phase or "Running")
    ended = None if outcome == "Running" else max(s.updated for s in sts)
    return _from_timings(ns, kind, name, st.id, outcome, st.started, ended, timings.timings(objs),
                         "annotations")


_STAGE_NO = re.compile(r"^stage (\d+)")


def _from_events(trace: Trace) -> None:
    """Stages (without gate times) and the rollback rebuilt from the trace's Events."""
    stages: dict[int, Stage] = {}
    rb: float | None = None
    rb_end: float | None = None
    for t, reason, message in trace.events:
        m = _STAGE_NO.match(message)
        k = int(m.group(1)) if m else 0
        if reason == "StageStarted" and k:
            groups = re.search(r"(\d+) groups to update", message)
            stages[k] = Stage(k, "", int(groups.group(1)) if groups else 0, t, None, None, "running")
        elif reason in ("StagePassed", "StageFailed") and k in stages:
            stages[k].ended, stages[k].result = t, "passed" if reason == "StagePassed" else "failed"
        elif reason == "RollbackStarted":
            rb = t
        elif reason == "RolledBack":
            rb_end = t
    trace.stages = sorted(stages.values(), key=lambda s: s.index)
    trace.rollback = (rb, rb_end) if rb is not None else None
    trace.source = "events"


def _events(kube: Kube, ns: str) -> dict[str, list[tuple[float, str, str]]]:
    """The rollout Events of namespace ``ns`` by involved object name, in time order."""
    items, _ = kube.list(EVENT, ns)
    out: dict[str, list[tuple[float, str, str]]] = {}
    for ev in items:
        if ev.get("reason") not in MARKED:
            continue
        t = rfc3339(ev.get("firstTimestamp") or ev.get("eventTime") or
                    (ev.get("metadata") or {}).get("creationTimestamp"))
        if t is not None:
            name = str((ev.get("involvedObject") or {}).get("name") or "")
            out.setdefault(name, []).append((t, str(ev["reason"]), str(ev.get("message") or "")))
    for evs in out.values():
        evs.sort()
    return out


def _attach(trace: Trace, evs: list[tuple[float, str, str]], until: float) -> None:
    """The events from the rollout's start (Events have whole seconds) until the next rollout of the
    target started (its last Events come after the write that ended it)."""
    if trace.started is None:
        return
    # whole seconds: the next rollout's first Events may fall in this window; those name their id
    other = re.compile(rf"\brollout (?!{re.escape(trace.rollout_id)})[0-9a-f]{{12}}\b")
    trace.events = [e for e in evs if trace.started - 1.0 <= e[0] < until and not other.search(e[2])]
    if not trace.stages and trace.events:
        _from_events(trace)


_STARTED = re.compile(r"^rollout ([0-9a-f]{12}):")
_ENDS = {"RolloutSucceeded": "Succeeded", "RolledBack": "RolledBack", "RollbackFailed": "Failed",
         "RolloutAborted": "Aborted"}


def _earlier(traces: list[Trace], events: dict[str, dict[str, list[tuple[float, str, str]]]]) -> list[Trace]:
    """The rollouts of the traces' targets that only Events remember (a newer rollout overwrote the stage
    log, and no policy kept a history: ``lwsflow rollout`` run twice)."""
    known = {(t.namespace, t.name, t.rollout_id) for t in traces}
    out: list[Trace] = []
    for t in [t for t in traces if t.source == "annotations"]:
        for name in {t.name, *t.objects}:
            for at, reason, message in events[t.namespace].get(name, []):
                m = _STARTED.match(message)
                if reason != "RolloutStarted" or m is None or (t.namespace, t.name, m.group(1)) in known:
                    continue
                known.add((t.namespace, t.name, m.group(1)))
                ends = [(e_at, _ENDS[r]) for e_at, r, msg in events[t.namespace].get(name, [])
                        if r in _ENDS and e_at >= at and m.group(1) in msg]
                out.append(Trace(t.namespace, t.kind, t.name, m.group(1), ends[0][1] if ends else "Unknown",
                                 at, ends[0][0] if ends else None, "events", objects=list(t.objects),
                                 gpus_per_group=t.gpus_per_group, replicas=t.replicas))
    return out


def _targets(kube: Kube, policy: dict[str, Any]) -> list[dict[str, Any]]:
    ns, ref = policy["metadata"]["namespace"], (policy.get("spec") or {}).get("targetRef") or {}
    if ref.get("kind") == "LeaderWorkerSetPair":
        items, _ = kube.list(LWS, ns, label_selector=f"{L.PD_PAIR}={ref.get('name')}")
        return items
    res: Resource = _KIND_RES.get(str(ref.get("kind")), LWS)
    try:
        return [kube.get(res, ns, str(ref.get("name")))]
    except Exception:  # the target is gone: its history is still on the policy
        return []


def collect(kube: Kube, namespace: str | None = None, only: list[str] | None = None) -> list[Trace]:
    """Every recorded rollout in ``namespace`` (None: all), oldest first; ``only``: policy names, or
    targets as ``lws/NAME`` / ``ds/NAME``."""
    wanted = set(only or [])
    traces: list[Trace] = []
    covered: set[tuple[str, str]] = set()
    policies, _ = kube.list(ROLLOUT_POLICY, namespace)
    for p in policies:
        meta, ref = p["metadata"], (p.get("spec") or {}).get("targetRef") or {}
        ns, kind, name = meta["namespace"], str(ref.get("kind")), str(ref.get("name"))
        objs = _targets(kube, p)
        covered.update((ns, o["metadata"]["name"]) for o in objs)
        covered.add((ns, name))
        if wanted and meta["name"] not in wanted:
            continue
        mine = [_from_timings(ns, kind, name, str(h.get("id")), str(h.get("outcome")), h.get("started"),
                              h.get("finished"), h, "status")
                for h in (p.get("status") or {}).get("history") or []]
        now = _from_annotations(ns, kind, name, objs) if objs else None
        if now is not None and all(t.rollout_id != now.rollout_id for t in mine):
            mine.append(now)
        for t in mine:
            _finish(t, objs)
        traces += mine
    for res, short, kind in ((LWS, "lws", "LeaderWorkerSet"), (DS, "ds", "DisaggregatedSet")):
        items, _ = kube.list(res, namespace)
        for o in items:
            ns, name = o["metadata"]["namespace"], o["metadata"]["name"]
            if (ns, name) in covered or (wanted and f"{short}/{name}" not in wanted):
                continue
            last = _from_annotations(ns, kind, name, [o])
            if last is not None:
                _finish(last, [o])
                traces.append(last)
    events = {ns: _events(kube, ns) for ns in sorted({t.namespace for t in traces})}
    traces += _earlier(traces, events)
    traces.sort(key=lambda t: t.started or 0.0)
    for key in {(t.namespace, t.name) for t in traces}:  # a target rolled more than once: number them
        same = [t for t in traces if (t.namespace, t.name) == key]
        for k, t in enumerate(same, start=1):
            t.label = f"{t.name} #{k}" if len(same) > 1 else ""
    for i, t in enumerate(traces):
        evs = events[t.namespace]
        later = [u.started for u in traces[i + 1:] if (u.namespace, u.name) == (t.namespace, t.name)]
        _attach(t, sorted(e for n in {t.name, *t.objects} for e in evs.get(n, [])),
                (later[0] or float("inf")) if later else float("inf"))
    return traces


def _finish(t: Trace, objs: list[dict[str, Any]]) -> None:
    t.objects = [o["metadata"]["name"] for o in objs]
    t.gpus_per_group = sum(gpus_per_group(o) for o in objs[:1]) if objs else 0
    t.replicas = max((s.replicas for s in t.stages), default=0) or \
        max((int((o.get("spec") or {}).get("replicas") or 0) for o in objs), default=0)


def drawable(traces: list[Trace]) -> list[Trace]:
    """The traces with at least one stage recorded (the pictures draw nothing for the others)."""
    return [t for t in traces if any(s.started is not None or s.ended is not None for s in t.stages)]
