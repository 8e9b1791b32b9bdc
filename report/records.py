"""What a cluster recorded of its staged rollouts, as traces the pictures draw.

Three sources, most detailed first, so the pictures never depend on who drove a rollout:

1. a RolloutPolicy's ``status.history``: every ended rollout's stage timings (``policy/timings.py``);
2. the target's ``rollout.lwsflow.io/stage-log`` annotation: the last rollout, whoever drove it
   (``lwsflow rollout``, the pipeline step, the in-cluster controller), also while it runs;
3. the target's Events (``StageStarted``, ``StagePassed``, ``StageFailed``, ``RollbackStarted``,
   ``RolledBack``): a rollout made by a controller that kept no stage log; they have no gate time,
   so its stages are drawn without the wait/bake split.

Events also give every trace its markers (the timeline picture labels them where they happened). An
Event belongs to the rollout its ``rollout.lwsflow.io/id`` annotation names (``kube/events.py``), else
the one its message names, else the one before it on the same object; only the targets' own Events
count (the in-cluster controller repeats some on the RolloutPolicy: they would be drawn twice).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

from lwsflow.controller.api import labels as L
from lwsflow.controller.errors import NotFound
from lwsflow.controller.kube.client import Kube
from lwsflow.controller.kube.events import ROLLOUT_ID
from lwsflow.controller.kube.resources import DS, EVENT, LWS, ROLLOUT_POLICY, Resource
from lwsflow.controller.policy import timings
from lwsflow.controller.rollout import state

MARKED = ("RolloutStarted", "StageStarted", "StagePassed", "StageFailed", "AnalysisRun", "RollbackStarted",
          "RolledBack", "RolloutSucceeded", "RolloutAborted", "PromotionReceived")
_KIND_RES = {"LeaderWorkerSet": LWS, "DisaggregatedSet": DS}
_SHORT = {"LeaderWorkerSet": "lws", "DisaggregatedSet": "ds", "LeaderWorkerSetPair": "pair"}


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
    gated: list[int] = field(default_factory=list)  # stages (from 1) behind a manual gate (``pause``)

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


_OUTCOME: dict[str, str] = {state.SUCCEEDED: "Succeeded", state.ROLLED_BACK: "RolledBack",
                            state.FAILED: "Failed", state.ABORTED: "Aborted"}


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


Event = tuple[float, str, str]  # (time, reason, message)
Owned = list[tuple[str, Event]]  # (the rollout id it belongs to, or "", the event)
_NAMED = re.compile(r"\brollout ([0-9a-f]{12})\b")  # the engine's and the controller's wording
_ENDS = {"RolloutSucceeded": "Succeeded", "RolledBack": "RolledBack", "RollbackFailed": "Failed",
         "RolloutAborted": "Aborted"}


def _rv(ev: dict[str, Any]) -> int:
    rv = str((ev.get("metadata") or {}).get("resourceVersion") or "")
    return int(rv) if rv.isdigit() else 0


def owned_events(items: list[dict[str, Any]]) -> dict[str, Owned]:
    """The rollout Events among ``items`` (one namespace's) by the name of the target object they are
    about, in the order they were created, each with the rollout it belongs to: its annotation's, else
    the one its message names, else the one of the Event before it on that object, unless that one ended
    its rollout (then none: ``_attach`` places it by time). Creation order is the
    resourceVersion's (one counter for the cluster), not the timestamps: two processes that drove
    consecutive rollouts estimate the cluster's clock apart, and Events keep whole seconds. Events about
    another kind (the controller's on the RolloutPolicy, which repeat the target's) are left out; one
    whose object has no kind (a target read from a list) is kept."""
    by_name: dict[str, list[tuple[int, float, str, Event]]] = {}
    for ev in items:
        about = ev.get("involvedObject") or {}
        if ev.get("reason") not in MARKED or about.get("kind") not in (*_KIND_RES, None, ""):
            continue
        meta = ev.get("metadata") or {}
        t = rfc3339(ev.get("firstTimestamp") or ev.get("eventTime") or meta.get("creationTimestamp"))
        if t is not None:
            event = (t, str(ev["reason"]), str(ev.get("message") or ""))
            rid = str((meta.get("annotations") or {}).get(ROLLOUT_ID) or "")
            by_name.setdefault(str(about.get("name") or ""), []).append((_rv(ev), t, rid, event))
    out: dict[str, Owned] = {}
    for name, evs in by_name.items():
        owner = ""
        for *_order, rid, e in sorted(evs, key=lambda x: (x[0], x[1])):
            named = _NAMED.search(e[2])
            owner = rid or (named.group(1) if named else owner)
            out.setdefault(name, []).append((owner, e))
            owner = "" if e[1] in _ENDS else owner
    return out


def _events(kube: Kube, ns: str) -> dict[str, Owned]:
    items, _ = kube.list(EVENT, ns)
    return owned_events(items)


def _attach(trace: Trace, evs: Owned, until: float) -> None:
    """The rollout's Events: those it owns (``owned_events``), and those no rollout owns (older Events
    whose rollout's start Event is gone) from its start until the next rollout of the target."""
    if trace.started is None:
        return
    trace.events = sorted(e for owner, e in evs if owner == trace.rollout_id
                          or (not owner and trace.started - 1.0 <= e[0] < until))
    if not trace.stages and trace.events:
        _from_events(trace)


def attach_events(traces: list[Trace], events: dict[str, dict[str, Owned]]) -> None:
    """Give each trace (oldest first) its Events: ``events`` by namespace, as ``owned_events``."""
    for i, t in enumerate(traces):
        evs = events.get(t.namespace, {})
        later = [u.started for u in traces[i + 1:] if (u.namespace, u.name) == (t.namespace, t.name)]
        _attach(t, [e for n in sorted({t.name, *t.objects}) for e in evs.get(n, [])],
                (later[0] or float("inf")) if later else float("inf"))


def _earlier(traces: list[Trace], events: dict[str, dict[str, Owned]]) -> list[Trace]:
    """The rollouts of the traces' targets that only Events remember (a newer rollout overwrote the stage
    log, and no policy kept a history: ``lwsflow rollout`` run twice)."""
    known = {(t.namespace, t.name, t.rollout_id) for t in traces}
    out: list[Trace] = []
    for t in [t for t in traces if t.source == "annotations"]:
        for name in {t.name, *t.objects}:
            owned = events[t.namespace].get(name, [])
            for rid, (at, reason, _m) in owned:
                if reason != "RolloutStarted" or not rid or (t.namespace, t.name, rid) in known:
                    continue
                known.add((t.namespace, t.name, rid))
                ends = [(e[0], _ENDS[e[1]]) for owner, e in owned if owner == rid and e[1] in _ENDS]
                out.append(Trace(t.namespace, t.kind, t.name, rid, ends[0][1] if ends else "Unknown",
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


def _list(kube: Kube, res: Resource, namespace: str | None) -> list[dict[str, Any]]:
    """The objects of a kind; none where the cluster does not serve it (no RolloutPolicy CRD: a cluster
    without the in-cluster controller; no DisaggregatedSet CRD)."""
    try:
        items, _ = kube.list(res, namespace)
    except NotFound:
        return []
    return items


def collect(kube: Kube, namespace: str | None = None, only: list[str] | None = None) -> list[Trace]:
    """Every recorded rollout in ``namespace`` (None: all), oldest first; ``only``: policy names, or
    targets as ``lws/NAME``, ``ds/NAME``, ``pair/NAME`` (a policy's target, or one no policy owns)."""
    wanted = set(only or [])
    traces: list[Trace] = []
    covered: set[tuple[str, str]] = set()
    policies = _list(kube, ROLLOUT_POLICY, namespace)
    for p in policies:
        meta, ref = p["metadata"], (p.get("spec") or {}).get("targetRef") or {}
        ns, kind, name = meta["namespace"], str(ref.get("kind")), str(ref.get("name"))
        objs = _targets(kube, p)
        covered.update((ns, o["metadata"]["name"]) for o in objs)
        covered.add((ns, name))
        if wanted and not {meta["name"], f"{_SHORT.get(kind, '?')}/{name}"} & wanted:
            continue
        mine = [_from_timings(ns, kind, name, str(h.get("id")), str(h.get("outcome")), h.get("started"),
                              h.get("finished"), h, "status")
                for h in (p.get("status") or {}).get("history") or []]
        now = _from_annotations(ns, kind, name, objs) if objs else None
        if now is not None and all(t.rollout_id != now.rollout_id for t in mine):
            mine.append(now)
        gated = [k for k, st in enumerate((p.get("spec") or {}).get("stages") or [], start=1)
                 if isinstance(st, dict) and st.get("pause") is not None]
        for t in mine:
            _finish(t, objs)
            t.gated = list(gated)
        traces += mine
    for res, short, kind in ((LWS, "lws", "LeaderWorkerSet"), (DS, "ds", "DisaggregatedSet")):
        for o in _list(kube, res, namespace):
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
    attach_events(traces, events)
    return traces


def _finish(t: Trace, objs: list[dict[str, Any]]) -> None:
    t.objects = [o["metadata"]["name"] for o in objs]
    t.gpus_per_group = sum(gpus_per_group(o) for o in objs[:1]) if objs else 0
    t.replicas = max((s.replicas for s in t.stages), default=0) or \
        max((int((o.get("spec") or {}).get("replicas") or 0) for o in objs), default=0)


def drawable(traces: list[Trace]) -> list[Trace]:
    """The traces with at least one stage recorded (the pictures draw nothing for the others)."""
    return [t for t in traces if any(s.started is not None or s.ended is not None for s in t.stages)]


def dump(traces: list[Trace]) -> list[dict[str, Any]]:
    """The traces as JSON-ready dicts (the demo keeps them beside its pictures)."""
    return [asdict(t) for t in traces]


def load(items: list[dict[str, Any]]) -> list[Trace]:
    """The inverse of :func:`dump`."""
    out = []
    for d in items:
        d = dict(d)
        d["stages"] = [Stage(**s) for s in d.get("stages") or []]
        d["rollback"] = tuple(d["rollback"]) if d.get("rollback") else None
        d["events"] = [tuple(e) for e in d.get("events") or []]
        d["gated"] = list(d.get("gated") or [])
        out.append(Trace(**d))
    return out
