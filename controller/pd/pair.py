"""Coordinated rollout of a prefill/decode pair rendered as two LWS (``pdMode: lws-pair``).

Both roles move through the same stage fractions. At each stage **decode goes first** (so every
updated prefill group finds an updated decode group to hand off to), then prefill, each gated on its
own equality. Throughout, the ready prefill:decode ratio must stay within one group of the target
ratio (the max-skew gate, :func:`skew`): a stage does not pass while the skew is above one, and the
largest skew seen is reported. Rollback goes in reverse order: prefill first, then decode.

Each LWS keeps its own persisted state, so a restarted coordinator resumes each role at its own
stage: a role that already passed stage k is not moved again until the other has caught up.

``together`` (the all-at-once switch chosen when the roles' revisions cannot hand KV off to each other,
``compat.py``): each stage lowers both roles' partitions before either is gated, so both roles'
new groups come up at once and the time revisions mix is as short as the switch itself.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable

from lwsflow.controller.api import labels as L
from lwsflow.controller.api.wire import Obj
from lwsflow.controller.clock import Clock
from lwsflow.controller.errors import InvalidInput
from lwsflow.controller.kube.client import Kube
from lwsflow.controller.kube.events import EventRecorder
from lwsflow.controller.kube.resources import LWS
from lwsflow.controller.rollout import gate, state
from lwsflow.controller.rollout.engine import (
    FAILED,
    PAUSED,
    ROLLED_BACK,
    SUCCEEDED,
    Outcome,
    Rollout,
    RolloutOptions,
    Wiring,
    finish,
)
from lwsflow.controller.rollout.report import RolloutReport
from lwsflow.controller.rollout.stages import resolve_stages, scale_fraction
from lwsflow.controller.rollout.target import Follower

log = logging.getLogger("lwsflow.rollout.pd")
ROLES = ("decode", "prefill")  # the order each stage moves in


def skew(ready_prefill: int, ready_decode: int, replicas_prefill: int, replicas_decode: int) -> float:
    """How far the ready ratio is from the target, in groups of whichever role is closer to fixing it.

    ``min(|p - ratio*d|, |d - p/ratio|)``: 0 when exactly on ratio, 1 when moving one group of
    either role restores it. E.g. target 6:2 with decode at 1 ready reads 1 (one decode group off).
    """
    if replicas_prefill <= 0 or replicas_decode <= 0:
        return 0.0
    ratio = replicas_prefill / replicas_decode
    return round(min(abs(ready_prefill - ratio * ready_decode),
                     abs(ready_decode - ready_prefill / ratio)), 6)


def _switching(obj: Obj) -> bool:
    """``obj`` is in the middle of an all-at-once switch (``compat.py``)."""
    st = state.RolloutState.from_object(obj)
    return (st.active and st.stages == "100%" and gate.max_surge(obj) == gate.replicas(obj) > 0
            and gate.max_unavailable(obj) == 0)


def find_pair(kube: Kube, namespace: str, pair: str) -> dict[str, Obj]:
    """The pair's two LWS by ``lwsflow.io/pd-pair=<pair>`` and their ``lwsflow.io/role`` label."""
    items, _ = kube.list(LWS, namespace, label_selector=f"{L.PD_PAIR}={pair}")
    return pair_of(items, namespace, pair)


def pair_of(items: list[Obj], namespace: str, pair: str) -> dict[str, Obj]:
    """The pair's two LWS among ``items`` (those labelled ``lwsflow.io/pd-pair=<pair>``), by role."""
    out = {((o["metadata"].get("labels") or {}).get(L.ROLE) or ""): o for o in items}
    if set(ROLES) - out.keys():
        raise InvalidInput(f"pair {namespace}/{pair}: need one LWS labelled {L.ROLE}=prefill and one "
                           f"=decode with {L.PD_PAIR}={pair}, found roles {sorted(out)}", field="target")
    return {r: out[r] for r in ROLES}


class PairRollout:
    """Drives the decode and prefill LWS of one pair stage by stage (see module docstring)."""

    def __init__(self, kube: Kube, namespace: str, pair: str, opts: RolloutOptions, clock: Clock, *,
                 manifests: dict[str, Obj] | None = None,
                 on_step: Callable[[str], None] | None = None,
                 before_stage: Callable[[int], None] | None = None,
                 follower: Follower | None = None) -> None:
        self.kube, self.ns, self.pair, self.clock = kube, namespace, pair, clock
        # called before stage k (0-based) moves either role: a manual gate blocks here (RolloutPolicy)
        self.before_stage = before_stage
        live = find_pair(kube, namespace, pair)
        # an interrupted all-at-once switch resumes as one: its signature is on the objects (one stage,
        # a full surge, nothing down first), since "together" itself is not persisted
        self.together = opts.together or all(_switching(o) for o in live.values())
        manifests = manifests or {}
        reps = {r: gate.replicas(manifests.get(r) or live[r]) for r in ROLES}
        base = max(ROLES, key=lambda r: reps[r])
        other = next(r for r in ROLES if r != base)
        tb = resolve_stages(opts.stages, reps[base])
        targets = {base: tb, other: scale_fraction(tb, reps[base], reps[other])}
        self.report = RolloutReport("LeaderWorkerSetPair", namespace, pair, stages_spec=opts.stages,
                                    targets=tb)
        self.events = EventRecorder(kube, clock.now)
        self.latest: dict[str, Obj] = dict(live)
        self.replicas = reps
        self.max_skew = 0.0
        self.engines: dict[str, Rollout] = {}
        for role in ROLES:
            ropts = dataclasses.replace(opts, targets=targets[role], chain_partitions=False,
                                        defer_failure=True)
            self.engines[role] = Rollout(
                kube, namespace, live[role]["metadata"]["name"], ropts, clock,
                manifest=manifests.get(role),
                wiring=Wiring(recorder=self.events, report=self.report, role=role, on_step=on_step,
                              extra_guard=self._guard_for(role), follower=follower))
        self.n = len(tb)

    def _guard_for(self, role: str) -> Callable[[Obj], str | None]:
        def guard(obj: Obj) -> str | None:
            self.latest[role] = obj
            s = self._skew()
            return f"prefill:decode skew {s:g} > 1" if s > 1 else None
        return guard

    def _skew(self) -> float:
        ready = {r: gate.counters(self.latest[r])["readyReplicas"] for r in ROLES}
        s = skew(ready["prefill"], ready["decode"], self.replicas["prefill"], self.replicas["decode"])
        self.max_skew = max(self.max_skew, s)
        self.report.max_pd_skew = self.max_skew
        return s

    def run(self) -> Outcome:
        """Start both roles, move them stage by stage decode-first, roll back prefill-first on failure."""
        for role in ROLES:
            self.latest[role] = self.kube.get(LWS, self.ns, self.engines[role].name)
        if any(state.RolloutState.from_object(o).phase == state.ROLLING_BACK
               for o in self.latest.values()):
            return self._rollback("resuming an interrupted rollback")
        for k in range(self.n):
            if self.before_stage is not None and k > 0:
                self.before_stage(k)
            if self.together:
                for role in ROLES:  # both partitions first, then the gates
                    out = self._advance(role, k, hold=True)
                    if out is not None and out.result != SUCCEEDED:
                        return self._rollback(f"{role}: {out.message}") if out.result == FAILED \
                            else self._finish(out)
            for role in ROLES:
                out = self._advance(role, k)
                if out is not None and out.result != SUCCEEDED:
                    if out.result == FAILED:
                        return self._rollback(f"{role}: {out.message}")
                    return self._finish(out)
        return self._finish(Outcome(SUCCEEDED, f"pair {self.pair}: both roles rolled out", self.report))

    def _advance(self, role: str, k: int, hold: bool = False) -> Outcome | None:
        """Step ``role`` until it has passed stage ``k`` (None) or ended otherwise (its Outcome);
        ``hold``: only until stage ``k``'s partition is written (in front of its gate)."""
        eng = self.engines[role]
        while True:
            out = eng.step_retrying(until_stage=k, hold_gate=hold)  # a 409 re-reads and re-plans
            self.latest[role] = eng.obj
            if out is not None:
                return out
            if hold and eng.holding:
                return None
            if eng.phase() == state.RUNNING and eng.passed() > k:
                return None

    def _rollback(self, reason: str) -> Outcome:
        if self.opts_no_rollback():
            for role in ROLES:
                self.engines[role].pause(reason)
            return self._finish(Outcome(PAUSED, f"pair {self.pair} paused for a human: {reason}",
                                        self.report))
        # prefill first; a role whose rollout never started (decode failed stage 1 before prefill
        # moved) has nothing to undo, and its last finished rollout must not be "rolled back"
        todo = [role for role in reversed(ROLES) if state.RolloutState.from_object(
            self.kube.get(LWS, self.ns, self.engines[role].name)).active]
        results = [self.engines[role].rollback(reason) for role in todo]
        ok = all(r.result == ROLLED_BACK for r in results)
        return self._finish(Outcome(ROLLED_BACK if ok else FAILED,
                                    f"pair {self.pair} {'rolled back' if ok else 'rollback failed'}: "
                                    f"{reason}", self.report))

    def opts_no_rollback(self) -> bool:
        return self.engines["decode"].opts.no_rollback

    def _finish(self, out: Outcome) -> Outcome:
        return finish(Outcome(out.result, out.message, self.report), self.clock, self.kube, self.events)
