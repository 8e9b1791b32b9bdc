"""The soak's invariants (issue 36), checked as things happen, not at the end.

:class:`Checker` is a store subscriber (it runs under the store lock, so each change is judged with
the pods as they were at that instant) and the API server's ``request_hook`` (it sees every write and
who sent it before the write is served). Each check counts itself; a broken one is a violation line.

* ``availability-floor``: an LWS that was once fully Ready never has fewer Ready groups than
  ``replicas - maxUnavailable`` (``gate.floor``), unless a fault the soak injected (a crash, a lost
  node) took groups down since it was last fully Ready (seen at least ``RACE_S`` after the fault: a
  crashed pod still reads Ready for a moment, then its whole group is recreated);
* ``stage-ready``: when a rollout records stage k passed, stage k's groups ``[R - t_k, R)`` are all
  on the target's template and Ready (groups a fault hit in the last moments excepted: the gate read
  them Ready just before the fault);
* ``no-stage-skipped``: while a rollout runs forward its partition never goes below the next stage's;
* ``manual-gate``: the partition never leaves a manual gate's stage without the promote mark for
  that rollout and stage (on the object that carries the marks: a pair's decode LWS);
* ``no-deposed-write``: no controller replica writes once another holder of the Lease has written
  (the fencing test's rule, ``tests/rollout/integration/test_incluster_fencing.py``);
* ``rollout-outcome``: every rollout a policy's history records ends Succeeded, RolledBack, Paused or
  Aborted, with a message unless it succeeded;
* ``policy-outcome`` (at the end, by the engine): no policy left mid-rollout.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import dataclass, field

from lwsflow.controller.api import labels as L
from lwsflow.controller.policy import gates
from lwsflow.controller.rollout import gate, state
from lwsflow.sim.apiserver.faults import WRITE_VERBS, RequestInfo
from lwsflow.sim.store import DELETED, Event
from reliability.fault_helpers import _good, _ready, image_of

INVARIANTS = ("availability-floor", "stage-ready", "no-stage-skipped", "manual-gate", "no-deposed-write",
              "rollout-outcome", "policy-outcome")
OUTCOMES = frozenset({"Succeeded", "RolledBack", "Paused", "Aborted"})
AGENT = "lwsflow-controller/"  # the controller's User-Agent prefix (cli/controller.py)
RACE_S = 2.0  # wall seconds a fault may precede a gate's pass that read the group Ready before it


@dataclass
class Checker:
    lease: str  # the controllers' Lease name
    gated: dict[str, tuple[str, list[int]]] = field(default_factory=dict)  # LWS -> (marks LWS, pause stages)
    enabled: bool = True  # off: nothing is judged (the planted-violation test proves it matters)
    checks: Counter[str] = field(default_factory=Counter)
    violations: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._reported: set[tuple[str, object]] = set()
        self.pods: dict[str, dict[tuple[str, str], dict]] = {}  # LWS -> its live pods
        self.objs: dict[str, dict] = {}  # LWS name -> latest object
        self.armed: set[str] = set()  # LWS fully Ready at least once
        # LWS -> wall time of the last fault that took groups from it: exempt from the floor until seen
        # fully Ready after the fault has had time to land (a crashed pod reads Ready for a moment)
        self.exempt: dict[str, float] = {}
        self.faulted: dict[tuple[str, int], float] = {}  # (LWS, group) -> wall time of the last fault
        self.passed: dict[tuple[str, str], int] = {}  # (LWS, rollout id) -> stages passed seen
        self.outcomes: set[tuple[str, str]] = set()  # (policy, rollout id) judged
        self.phases: dict[str, dict] = {}  # policy -> its status
        self.holder, self.holder_wrote = "", False
        self.transitions = 0  # leaders the Lease has had

    def violate(self, invariant: str, what: str, key: object = None) -> None:
        """Record a violation, once per ``key`` (a state that persists is reported when it starts)."""
        with self._lock:
            if key is not None:
                if (invariant, key) in self._reported:
                    return
                self._reported.add((invariant, key))
            self.violations.append(f"{invariant}: {what}")

    def _count(self, invariant: str) -> bool:
        if self.enabled:
            self.checks[invariant] += 1
        return self.enabled

    # -- faults the soak injects ----------------------------------------------------------------------
    def hit(self, pods: list[dict]) -> None:
        """``pods`` are about to be lost or crash: their groups may fall below the floor for a while."""
        now = time.monotonic()
        for p in pods:
            labels = p["metadata"].get("labels") or {}
            name = labels.get(L.NAME, "")
            self.exempt[name] = now
            self.faulted[(name, int(labels.get(L.GROUP_INDEX, -1)))] = now

    def pods_on(self, node: str) -> list[dict]:
        return [p for pods in list(self.pods.values()) for p in list(pods.values())
                if p["spec"].get("nodeName") == node]

    # -- the store subscriber ----------------------------------------------------------------------------
    def on_event(self, ev: Event) -> None:
        kind, meta = ev.object.get("kind"), ev.object["metadata"]
        if kind == "Pod":
            owner = (meta.get("labels") or {}).get(L.NAME)
            if owner:
                pods = self.pods.setdefault(owner, {})
                if ev.type == DELETED:
                    pods.pop((meta.get("namespace", ""), meta["name"]), None)
                else:
                    pods[(meta.get("namespace", ""), meta["name"])] = ev.object
                if owner in self.objs:
                    self._floor(owner, self.objs[owner])
        elif kind == L.LWS_KIND and ev.type != DELETED:
            self.objs[meta["name"]] = ev.object
            self._lws(meta["name"], ev.object)
        elif kind == "RolloutPolicy" and ev.type != DELETED:
            self.phases[meta["name"]] = ev.object.get("status") or {}
            self._outcomes(meta["name"], ev.object.get("status") or {})
        elif kind == "RolloutPolicy":
            self.phases.pop(meta["name"], None)
        elif kind == "Lease" and meta["name"] == self.lease and ev.type != DELETED:
            holder = str((ev.object.get("spec") or {}).get("holderIdentity") or "")
            if holder != self.holder:
                self.holder, self.holder_wrote = holder, False
                self.transitions += bool(holder)

    def _groups_ready(self, name: str, obj: dict) -> set[int]:
        pods = self.pods.get(name, {})
        images = {p["spec"]["containers"][0]["image"] for p in pods.values()}
        return set().union(*(_good(name, obj, img, pods) for img in images)) if images else set()

    def _floor(self, name: str, obj: dict) -> None:
        ready = len(self._groups_ready(name, obj))
        if ready >= gate.replicas(obj):
            self.armed.add(name)
            if time.monotonic() - self.exempt.get(name, -1e9) > RACE_S:
                self.exempt.pop(name, None)
            return
        if name not in self.armed or name in self.exempt or not self._count("availability-floor"):
            return
        if ready < gate.floor(obj):
            self.violate("availability-floor", f"{name}: {ready} Ready groups of {gate.replicas(obj)}, "
                         f"floor {gate.floor(obj)} ({self._detail(name, obj)})",
                         key=(name, ready, gate.partition(obj)))

    def _detail(self, name: str, obj: dict) -> str:
        """What a violation report needs: the template, partition, rollout and each pod's state."""
        st = state.RolloutState.from_object(obj)
        pods = sorted(self.pods.get(name, {}).values(), key=lambda p: p["metadata"]["name"])
        return (f"template {image_of(obj)}, partition {gate.partition(obj)}, rollout {st.id or '-'} "
                f"{st.phase or '-'} passed {st.passed}; pods " + ", ".join(
                    f"{p['metadata']['name']} {p['spec']['containers'][0]['image']} "
                    f"{(p.get('status') or {}).get('phase')}"
                    f"{' ready' if _ready(p) else ''}"
                    f"{' terminating' if p['metadata'].get('deletionTimestamp') else ''}" for p in pods))

    def _lws(self, name: str, obj: dict) -> None:
        st = state.RolloutState.from_object(obj)
        if not st.id or not st.targets:
            return
        r, part = gate.replicas(obj), gate.partition(obj)
        key = (name, st.id)
        before = self.passed.get(key, st.passed)
        self.passed[key] = st.passed
        if st.passed > before and st.passed <= len(st.targets) and self._count("stage-ready"):
            want = set(range(r - st.targets[st.passed - 1], r))
            missing = want - _good(name, obj, image_of(obj), self.pods.get(name, {}))
            now = time.monotonic()
            missing = {g for g in missing if now - self.faulted.get((name, g), -1e9) > RACE_S}
            if missing:
                self.violate("stage-ready", f"{name} rollout {st.id}: stage {st.passed} passed while groups "
                             f"{sorted(missing)} were not Ready on {image_of(obj)}")
        if st.phase != state.RUNNING:
            return
        nxt = st.targets[min(st.passed, len(st.targets) - 1)]
        if self._count("no-stage-skipped") and part < r - nxt:
            self.violate("no-stage-skipped", f"{name} rollout {st.id}: partition {part} with {st.passed} "
                         f"stage(s) passed (next stage's partition {r - nxt})", key=(name, st.id, part))
        if name in self.gated:
            marks_of, pauses = self.gated[name]
            marks = self.objs.get(marks_of, obj)
            promoted = (marks["metadata"].get("annotations") or {}).get(gates.PROMOTED, "")
            for i in pauses:
                held = r - st.targets[i - 1] if i > 0 else r
                if self._count("manual-gate") and part < held and \
                        promoted != gates.promote_value(st.id, i + 1) and st.passed <= i:
                    self.violate("manual-gate", f"{name} rollout {st.id}: partition {part} left the gate "
                                 f"before stage {i + 1} without a promote", key=(name, st.id, i))

    def _outcomes(self, policy: str, status: dict) -> None:
        for rec in status.get("history") or []:
            key = (policy, str(rec.get("id")))
            if not rec.get("outcome") or key in self.outcomes:
                continue
            self.outcomes.add(key)
            if not self._count("rollout-outcome"):
                continue
            if rec["outcome"] not in OUTCOMES:
                self.violate("rollout-outcome", f"{policy} rollout {key[1]} ended {rec['outcome']}: "
                             f"{rec.get('message')}")
            elif rec["outcome"] != "Succeeded" and not rec.get("message"):
                self.violate("rollout-outcome", f"{policy} rollout {key[1]} ended {rec['outcome']} "
                             "without a reason")

    # -- the API server's request hook -----------------------------------------------------------------
    def on_request(self, req: RequestInfo) -> None:
        if req.verb not in WRITE_VERBS or not req.user_agent.startswith(AGENT) or \
                req.resource.startswith("leases"):
            return
        who = req.user_agent[len(AGENT):]
        with self._lock:
            if who == self.holder:
                self.holder_wrote = True
                deposed = False
            else:
                deposed = self.holder_wrote
        if self._count("no-deposed-write") and deposed:
            self.violate("no-deposed-write", f"{who} wrote {req.verb} {req.resource}/{req.name} after "
                         f"{self.holder} held the Lease and wrote")
