"""The executor of a staged LWS rollout: ``run`` -> ``_step`` -> ``_gate`` -> ``_apply``.

It asks the pure planner (:mod:`lwsflow.controller.rollout.planner`) what to do, does it through
:mod:`lwsflow.controller.kube`, and persists progress on the LWS in the same write that makes it (state
annotations and the partition move together), so a controller killed between any two requests and
started again resumes at the right stage: never skipping a gate, never redoing a passed stage.

Every wait is a watch with a deadline in the cluster's clock (:mod:`lwsflow.controller.clock`), never a
tight poll. The engine does not know whether it talks to a real cluster or the embedded one.
"""

from __future__ import annotations

import copy
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from lwsflow.controller.api import labels as L
from lwsflow.controller.api.phases import Result
from lwsflow.controller.api.wire import Obj
from lwsflow.controller.clock import Clock
from lwsflow.controller.errors import Conflict
from lwsflow.controller.kube.client import Kube
from lwsflow.controller.kube.events import EventRecorder
from lwsflow.controller.rollout import gate, kueue_hold, planner, stagelog, state
from lwsflow.controller.rollout.hooks import Hook, HookContext, run_hook
from lwsflow.controller.rollout.kinds import KindStrategy, LwsKind, rest_patch
from lwsflow.controller.rollout.options import RolloutOptions
from lwsflow.controller.rollout.outcome import (
    ABORTED,
    FAILED,
    INCONCLUSIVE_REASON,
    PAUSED,
    PAUSED_INCONCLUSIVE,
    ROLLED_BACK,
    SUCCEEDED,
    Interrupted,
    Outcome,
    QuotaHeld,
    Replan,
    StageFailed,
)
from lwsflow.controller.rollout.patches import deep_merge
from lwsflow.controller.rollout.report import RolloutReport, StageRecord
from lwsflow.controller.rollout.retry import ConflictBackoff
from lwsflow.controller.rollout.rollback import Rollback
from lwsflow.controller.rollout.stages import partition_for
from lwsflow.controller.rollout.target import Follower, Target

log = logging.getLogger("lwsflow.rollout")


class _Pending:
    """An observation that decides nothing yet."""


_PENDING = _Pending()

__all__ = ["ABORTED", "FAILED", "PAUSED", "PAUSED_INCONCLUSIVE", "ROLLED_BACK", "SUCCEEDED", "Interrupted",
           "LwsRollout", "Outcome", "Rollout", "RolloutOptions", "Wiring", "finish"]


@dataclass(frozen=True)
class Wiring:
    """What a caller plugs into one executor beside its target and options (all optional): where its
    Events and its report go (a pair's two roles share them), the role it drives in a pair, a callback
    at each step (tests stop a rollout there), a reason to hold the gate (the pair's max-skew) and the
    informer to follow instead of watching the API (the in-cluster controller)."""

    recorder: EventRecorder | None = None
    report: RolloutReport | None = None
    role: str = ""
    on_step: Callable[[str], None] | None = None
    extra_guard: Callable[[Obj], str | None] | None = None  # a reason to hold, or None
    follower: Follower | None = None


class Rollout:
    """Drives one LeaderWorkerSet (or, with another ``strategy``, DisaggregatedSet) through the stages."""

    def __init__(self, kube: Kube, namespace: str, name: str, opts: RolloutOptions, clock: Clock, *,
                 strategy: KindStrategy | None = None, manifest: Obj | None = None,
                 wiring: Wiring = Wiring()) -> None:
        self.strategy: KindStrategy = strategy or LwsKind()
        self.opts = self.strategy.options(opts)
        # a 429's Retry-After is honoured in full while it fits the current stage's deadline
        kube = kube.with_deadline(self._stage_time_left)
        self.kube, self.ns, self.name, self.clock = kube, namespace, name, clock
        self.manifest = manifest
        self.events = wiring.recorder or EventRecorder(kube, clock.now)
        self.report = wiring.report or RolloutReport(self.strategy.kind, namespace, name)
        self.role = wiring.role
        self.extra_guard = wiring.extra_guard  # P/D max-skew: returns a reason to hold, or None
        self.t = Target(kube, self.strategy.res, namespace, name, clock, self.report, self.events,
                        wiring.role, wiring.on_step or (lambda _s: None), poll=self.strategy.poll_s,
                        follower=wiring.follower)
        self.failure = Rollback(self.t, self.strategy, self.opts)
        self.conflicts = ConflictBackoff(clock, deadline_s=self.opts.deadline_s)
        self._done_wall = time.monotonic()  # when the current stage finished (gate, bake, hooks)
        self._below_since: float | None = None  # cluster time ready groups fell below the floor
        self.holding = False  # the last step stopped in front of a gate (``hold_gate``)

    @property
    def obj(self) -> Obj:
        """The object as last read or written."""
        return self.t.obj

    def _stage_time_left(self) -> float:
        """Wall seconds a server-directed wait (a 429's Retry-After) may take: until the running
        stage's deadline, its bake included; outside a stage (starting, rolling back) the client's
        own window, so a rollback is never given up for a deadline already passed."""
        st = state.RolloutState.from_object(self.t.obj) if self.t.obj else state.RolloutState()
        started = state.epoch(st.stage_started) if st.phase == state.RUNNING else None
        if started is None:
            return self.kube.retry_window_s
        until = started + self._bake(st, st.passed) + st.deadline_s
        return self.clock.wall(until - self.clock.now())

    # -- public ------------------------------------------------------------------------------------
    def run(self) -> Outcome:
        """Run (or resume) the rollout to a final outcome."""
        self.t.checkpoint("begin")
        while True:
            out = self.step_retrying()
            if out is not None:
                return self._finish(out)

    def step_retrying(self, *, until_stage: int | None = None, hold_gate: bool = False) -> Outcome | None:
        """:meth:`step`, retried after a 409 with jittered backoff (see :mod:`.retry`).

        Someone wrote between our read and our write (or a 409 was injected): every step re-reads
        and re-plans, so trying again is safe; the backoff keeps a fight from spinning and the
        stage deadline bounds it.
        """
        while True:
            try:
                out = self.step(until_stage=until_stage, hold_gate=hold_gate)
            except Conflict as exc:
                self.conflicts.wait(exc)
                self.report.api_conflicts = self.conflicts.total
                continue
            self.conflicts.reset()
            return out

    def step(self, *, until_stage: int | None = None, hold_gate: bool = False) -> Outcome | None:
        """Do the planner's next action; an Outcome when the rollout has ended.

        ``until_stage``: return None without acting once stage ``until_stage`` (0-based) has passed
        and the next action would start another stage (used by the P/D coordinator). ``hold_gate``:
        also stop (``holding`` set) in front of that stage's gate, its partition written.
        """
        obj = self.t.read()
        st = state.RolloutState.from_object(obj)
        act = planner.next_action(st, obj, partitioned=self.strategy.has_partition)
        if st.id and st.active and not self.report.rollout_id:
            self._adopt(st)  # resuming (or running) this rollout
        log.debug("%s: %s", self.name, act)
        if until_stage is not None and st.passed > until_stage and act.kind in (
                planner.SET_PARTITION, planner.GATE, planner.DONE):
            return None
        self.holding = hold_gate and act.kind == planner.GATE and act.stage == until_stage
        if self.holding:
            return None
        if act.kind == planner.START:
            return self._start_or_end(st)
        if act.kind == planner.FINISH_START:
            self._finish_start(st)
        elif act.kind == planner.SET_PARTITION:
            self._set_partition(st, act.stage, act.partition)
        elif act.kind == planner.GATE:
            return self._run_gate(st, act.stage)
        elif act.kind == planner.DONE:
            self.t.mark(st, phase=state.SUCCEEDED, last_good=state.pack(state.template_of(self.obj)))
            self._freeze_at_rest(st)
            self.events.emit(self.obj, "RolloutSucceeded", f"rollout {st.id}: all stages passed")
            return Outcome(SUCCEEDED, f"rollout {st.id} succeeded", self.report)
        elif act.kind == planner.ROLLBACK:
            self.failure.apply(st, act.reason)
        elif act.kind == planner.ROLLBACK_WAIT:
            return self.failure.wait(st)
        elif act.kind == planner.PAUSED:
            if st.inconclusive == st.passed + 1 and st.reason.startswith(INCONCLUSIVE_REASON):
                return Outcome(PAUSED_INCONCLUSIVE, f"rollout {st.id} is paused at stage {st.passed + 1}: "
                               f"{st.reason}; promote passes the stage, abort rolls it back", self.report)
            return Outcome(PAUSED, f"rollout {st.id} is paused at stage {st.passed + 1}: {act.reason}; "
                           f"`lwsflow rollout resume` continues it", self.report)
        elif act.kind == planner.FOREIGN:
            self.t.mark(st, phase=state.ABORTED, reason=act.reason)
            self.events.emit(self.obj, "RolloutAborted", act.reason, warning=True)
            return Outcome(ABORTED, f"aborted, nothing overwritten: {act.reason}", self.report)
        elif act.kind == planner.GUARD:
            return self.failure.fail(st, act.reason)
        return None

    def passed(self) -> int:
        """Stages passed, as recorded on the object last read (for coordinators: the P/D pair)."""
        return state.RolloutState.from_object(self.obj).passed

    def phase(self) -> str:
        return state.RolloutState.from_object(self.obj).phase

    def pause(self, reason: str) -> None:
        """Record a pause for a human (``--no-rollback``) on the object."""
        self.t.mark(state.RolloutState.from_object(self.obj), paused=True, reason=reason)

    def rollback(self, reason: str) -> Outcome:
        """Roll this target back now (idempotent) and wait for equality on the old revision."""
        st = state.RolloutState.from_object(self.t.read())
        if st.phase == state.ROLLED_BACK:
            return Outcome(ROLLED_BACK, f"rolled back: {st.reason}", self.report)
        if not st.previous_template:
            self.t.mark(st, paused=True, reason=f"{reason} (no previous template recorded)")
            return Outcome(PAUSED, f"cannot roll back {self.name}: no previous template", self.report)
        if st.phase != state.ROLLING_BACK:
            self.failure.apply(st, reason)
        while True:
            out = self.step_retrying()
            if out is not None:
                return out

    # -- start -------------------------------------------------------------------------------------
    def _start_or_end(self, st: state.RolloutState) -> Outcome | None:
        """START: a rollout that already ended is reported; anything else starts."""
        if self.report.rollout_id and st.id == self.report.rollout_id:
            return self._final_from_state(st)  # our own rollout already ended
        same = st.id and st.manifest_hash == state.manifest_hash(self.manifest, self.obj)
        if same and st.phase == state.SUCCEEDED and st.target_hash == state.template_hash(
                state.template_of(self.obj)):
            # a restart after the last write of a finished rollout, or a rerun: nothing to do
            self._adopt(st)
            return Outcome(SUCCEEDED, f"rollout {st.id} already succeeded", self.report)
        if same and st.phase != state.SUCCEEDED and not self.opts.retry:
            # a controller restarted after it recorded the end must not try the same release
            # again on its own; a human asks for that with --retry
            self._adopt(st)
            out = self._final_from_state(st)
            return Outcome(out.result, f"{out.message} (same manifest; --retry tries it again)",
                           self.report)
        self._start()
        return None

    def _start(self) -> None:
        obj = self.obj
        kind = self.strategy
        cur_template = state.template_of(obj)
        replicas = gate.replicas(self.manifest or obj)
        targets = kind.stage_targets(self.opts, replicas)
        now = self.clock.now()
        old = state.RolloutState.from_object(obj)
        st = state.RolloutState(
            id=uuid.uuid4().hex[:12], phase=state.STARTING, stages=self.opts.stages, targets=targets,
            passed=0, bake_s=self.opts.bake_s, deadline_s=self.opts.deadline_s, started=state.iso(now),
            updated=state.iso(now), stage_started=state.iso(now), no_rollback=self.opts.no_rollback,
            manifest_hash=state.manifest_hash(self.manifest, obj), last_good=old.last_good,
            gitops=self.manifest is None)
        written: int | None = None
        if self.manifest is not None:
            st.previous_template = state.pack(cur_template)
            st.previous_hash = state.template_hash(cur_template)
            body = copy.deepcopy(self.manifest)
            meta = body.setdefault("metadata", {})
            meta["namespace"], meta["name"] = self.ns, self.name
            meta["resourceVersion"] = obj["metadata"]["resourceVersion"]  # nobody wrote in between
            meta.setdefault("annotations", {}).update(
                {k: v for k, v in st.annotations().items() if v is not None})
            # Freeze and change the template in one write: the LWS controller sees the new revision
            # with partition == replicas and updates no group until we lower it.
            if (freeze := kind.partition_patch(replicas)) is not None:
                body, written = deep_merge(body, freeze), replicas
            body.pop("status", None)
            self.t.obj = self.kube.apply(kind.res, body, field_manager=L.FIELD_MANAGER)
        else:
            # GitOps: the template is already applied with the partition frozen by the overlay; the
            # previous template is the last one this controller saw succeed.
            if old.last_good and state.template_hash(state.unpack(old.last_good)) != \
                    state.template_hash(cur_template):
                st.previous_template = old.last_good
                st.previous_hash = state.template_hash(state.unpack(old.last_good))
            patch: Obj = {"metadata": {"annotations": st.annotations()}}
            if (freeze := kind.partition_patch(max(gate.partition(obj), replicas))) is not None:
                patch, written = deep_merge(patch, freeze), replicas
            patch["metadata"]["resourceVersion"] = obj["metadata"]["resourceVersion"]
            self.t.obj = self.kube.merge_patch(kind.res, self.ns, self.name, patch,
                                               field_manager=L.FIELD_MANAGER)
        if written is not None:
            self.report.partitions_written.append(written)
        self._adopt(st)
        self.t.checkpoint("started")

    def _finish_start(self, st: state.RolloutState) -> None:
        target = state.template_hash(state.template_of(self.obj))
        self.t.mark(st, phase=state.RUNNING, target_hash=target, previous_hash=st.previous_hash or target)
        self.events.emit(self.obj, "RolloutStarted",
                         f"rollout {st.id}: stages {st.stages} -> groups {st.targets}, frozen at "
                         f"partition {gate.partition(self.obj)}")
        self.t.checkpoint("running")

    # -- stages ------------------------------------------------------------------------------------
    def _set_partition(self, st: state.RolloutState, k: int, partition: int) -> None:
        now = state.iso(self.clock.now())
        patch: Obj = {"metadata": {"annotations": state.RolloutState(
            stage_started=now, updated=now).annotations(("stage_started", "updated"))}}
        self.t.write(deep_merge(patch, self.strategy.partition_patch(partition) or {}))
        self.report.partitions_written.append(partition)
        rec = self._record(st, k)
        rec.started = rec.started or self.clock.now()
        self.events.emit(self.obj, "StageStarted", f"stage {k + 1}/{len(st.targets)}: partition "
                         f"{partition}, {st.targets[k]} groups to update")
        self.t.checkpoint(f"stage-{k + 1}-partition")

    def _run_gate(self, st: state.RolloutState, k: int) -> Outcome | None:
        rec = self._record(st, k)
        if rec.started is None:
            rec.started, rec.resumed = state.epoch(st.stage_started) or self.clock.now(), True
        req0 = self.kube.total_requests
        accepted = st.accepted == k + 1  # paused inconclusive, then promoted: baked and analysed already
        try:
            self._gate_and_bake(st, k, rec, bake=not accepted)
            for hook in self._hooks(k):
                res = run_hook(hook, HookContext(self.strategy.kind, self.ns, self.name, k + 1,
                                                 len(st.targets), st.targets[k], self.obj,
                                                 accepted=accepted))
                rec.hooks.append(res.detail)
                rec.analysis.extend(res.records)
                if res.records:
                    self.events.emit(self.obj, "AnalysisRun", f"stage {k + 1}: {res.detail}"[:1000],
                                     warning=not res.ok)
                if not res.ok and res.pause and not self.opts.defer_failure:
                    rec.api_requests += self.kube.total_requests - req0
                    return self._pause_inconclusive(st, k, res.detail)
                if not res.ok:
                    # the gate's figures too: a failed stage's console line says it was ready
                    raise StageFailed(f"stage {k + 1} hook failed: {res.detail} (after its readiness gate "
                                      f"passed: {rec.gate_detail})")
                self._done_wall = time.monotonic()
        except QuotaHeld as exc:
            rec.api_requests += self.kube.total_requests - req0
            return self._pause_quota(st, k, str(exc))
        except StageFailed as exc:
            rec.result, rec.ended = "failed", self.clock.now()
            rec.api_requests += self.kube.total_requests - req0
            return self.failure.fail(st, str(exc))
        except Replan:
            rec.api_requests += self.kube.total_requests - req0
            return None
        self.t.checkpoint(f"stage-{k + 1}-gate-passed")
        return self._pass_stage(st, k, rec, req0)

    def _pause_inconclusive(self, st: state.RolloutState, k: int, detail: str) -> Outcome:
        """The stage's analysis decided nothing (too little evidence): hold the stage where it is for a
        person, as ``onFailure: hold`` does, but without failing it: promote passes the stage (its
        analysis is not run again), abort rolls back, resume measures again."""
        reason = f"{INCONCLUSIVE_REASON}: stage {k + 1}: {detail}"
        self.t.mark(st, paused=True, reason=reason[:1000], inconclusive=k + 1)
        self.events.emit(self.obj, INCONCLUSIVE_REASON, f"rollout {st.id} paused at stage {k + 1}: "
                         f"{detail}"[:1000], warning=True)
        return Outcome(PAUSED_INCONCLUSIVE, f"rollout {st.id} paused at stage {k + 1}: the analysis "
                       f"decided nothing: {detail}; promote passes the stage, abort rolls it back, "
                       f"resume measures again", self.report)

    def _pass_stage(self, st: state.RolloutState, k: int, rec: StageRecord, req0: int) -> Outcome | None:
        """Record stage ``k`` passed (with the next partition, or the end, in the same write)."""
        last = k + 1 >= len(st.targets)
        now = self.clock.now()
        logged = stagelog.with_stage(state.RolloutState.from_object(self.obj).stage_log, stagelog.stage_entry(
            rec, ended=now, result="passed", replicas=gate.replicas(self.obj)))
        ann = state.RolloutState(passed=k + 1, updated=state.iso(now), stage_started=state.iso(now),
                                 stage_log=logged)
        keys: tuple[str, ...] = ("passed", "updated", "stage_started", "stage_log")
        patch: Obj = {"metadata": {"annotations": ann.annotations(keys)}}
        nxt: int | None = None
        frozen: Obj = {}
        if last:
            ann.phase, ann.last_good = state.SUCCEEDED, state.pack(state.template_of(self.obj))
            frozen = rest_patch(self.strategy, st, self.obj)
            patch = deep_merge({"metadata": {"annotations": ann.annotations((*keys, "phase", "last_good"))}},
                               frozen)
        elif self.opts.chain_partitions:
            move = self.strategy.partition_patch(partition_for(st.targets[k + 1], gate.replicas(self.obj)))
            if move is not None:
                nxt = partition_for(st.targets[k + 1], gate.replicas(self.obj))
                patch = deep_merge(patch, move)
        try:
            self.t.write(patch, expect_hash=st.target_hash)
        except Replan:
            return None
        reaction_wall = time.monotonic() - self._done_wall
        if nxt is not None:
            # the skew guard of a chained stage runs right after the move, off the critical path
            # (guards hold throughout; a skew found here rolls back before the next gate)
            skew = self.strategy.revision_skew(self.t)
            if skew:
                rec.result, rec.ended = "failed", self.clock.now()
                return self.failure.fail(state.RolloutState.from_object(self.obj),
                                         f"stage {k + 1}: leader/worker revision skew in {skew}")
        done_at = self.clock.now()
        rec.result, rec.ended = "passed", done_at
        rec.api_requests += self.kube.total_requests - req0
        self.events.emit(self.obj, "StagePassed", f"stage {k + 1}/{len(st.targets)} passed: "
                         f"{rec.gate_detail}")
        if last and frozen:
            self.report.partitions_written.append(gate.replicas(self.obj))
            self.t.settle(self.clock.now() + self.opts.deadline_s)
        if nxt is not None:
            self.report.partitions_written.append(nxt)
            nrec = self._record(st, k + 1)
            nrec.started = done_at
            # measured on the monotonic wall clock and converted: two reads of an interpolated
            # cluster clock can be off by more than the latency being measured
            rec.reaction_s = round(reaction_wall / max(self.clock.wall(1.0), 1e-9), 3)
            self.events.emit(self.obj, "StageStarted", f"stage {k + 2}/{len(st.targets)}: partition "
                             f"{nxt}, {st.targets[k + 1]} groups to update")
        self.t.checkpoint(f"stage-{k + 1}-passed")
        if last:
            self.events.emit(self.obj, "RolloutSucceeded", f"rollout {st.id}: all stages passed")
            return Outcome(SUCCEEDED, f"rollout {st.id} succeeded", self.report)
        return None

    def _gate_and_bake(self, st: state.RolloutState, k: int, rec: StageRecord, *, bake: bool = True) -> float:
        """Wait for the gate, then bake while it keeps holding; the cluster time the gate passed."""
        start = state.epoch(st.stage_started) or self.clock.now()
        deadline = start + st.deadline_s
        bake_s = self._bake(st, k) if bake else 0.0
        for _ in range(self.opts.max_regates + 1):
            passed_at = self._wait(st, k, rec, until=deadline, bake=False)
            if passed_at is None:
                self._raise_if_kueue_holds(k, "deadline")
                raise StageFailed(f"stage {k + 1} deadline ({st.deadline_s:g}s) passed: "
                                  f"{rec.gate_detail}; failing {','.join(rec.gate) and self._failing(rec)}")
            rec.gate_passed = passed_at
            if bake_s <= 0:
                return passed_at
            if self._wait(st, k, rec, until=self.clock.now() + bake_s, bake=True) is not None:
                self._done_wall = time.monotonic()
                return self.clock.now()
            deadline = max(deadline, self.clock.now() + st.deadline_s)  # re-gate after a lost equality
            self.events.emit(self.obj, "StageBakeInterrupted", f"stage {k + 1}: equality lost during "
                             f"bake ({rec.gate_detail}); waiting for the gate again", warning=True)
        raise StageFailed(f"stage {k + 1}: equality lost during bake {self.opts.max_regates + 1} times")

    def _bake(self, st: state.RolloutState, k: int) -> float:
        """Stage ``k``'s bake: the per-stage value when the caller gave one (a RolloutPolicy)."""
        bakes = self.opts.stage_bakes
        return bakes[k] if bakes is not None and k < len(bakes) else st.bake_s

    def _hooks(self, k: int) -> list[Hook]:
        per = self.opts.stage_hooks
        return [*self.opts.hooks, *(per[k] if per is not None and k < len(per) else [])]

    @staticmethod
    def _failing(rec: StageRecord) -> str:
        return ",".join(k for k, ok in rec.gate.items() if not ok) or "none"

    def _wait(self, st: state.RolloutState, k: int, rec: StageRecord, *, until: float,
              bake: bool) -> float | None:
        """Follow the object until the gate passes (``bake``: until ``until`` with the gate holding).

        Returns the cluster time of success, or None (deadline passed / equality lost in bake).
        Raises Replan when the planner wants something else (pause, abort, foreign change), and
        StageFailed when a guard trips. The watch is reopened at the floor guard's due time, so a
        dip below the floor is caught even when the object stays quiet.
        """
        floor = gate.floor(self.obj)
        self.report.see_floor(floor)
        self._below_since = None
        while True:
            wake = until
            if self._below_since is not None:
                wake = min(until, self._below_since + self.opts.floor_grace_s + 0.001)
            for obj in self.t.follow(wake):
                res = self._observe(st, k, rec, obj, floor, until=until, bake=bake)
                if not isinstance(res, _Pending):
                    return res
                if self._below_since is not None and wake >= until:
                    break  # a dip just began: reopen the watch with the guard's due time
            now = self.clock.now()
            if (dip := self._dip_past_grace(now)) is not None:
                self._raise_if_kueue_holds(k, "floor")
                raise StageFailed(f"stage {k + 1}: ready groups below the floor {floor} for {dip:.0f}s")
            if now >= until:
                return now if bake else None

    def _observe(self, st: state.RolloutState, k: int, rec: StageRecord, obj: Obj, floor: int, *,
                 until: float, bake: bool) -> float | _Pending | None:
        """One observation of the object while waiting: guards, gate; ``_PENDING`` to keep waiting."""
        self.t.obj = obj
        now = self.clock.now()
        act = planner.next_action(state.RolloutState.from_object(obj), obj,
                                  partitioned=self.strategy.has_partition)
        if act.kind != planner.GATE or act.stage != k:
            raise Replan(act.kind)
        ready = self.strategy.ready_groups(obj)
        if ready is not None:
            self.report.see_ready(ready)
            rec.min_ready_groups = ready if rec.min_ready_groups is None else min(
                rec.min_ready_groups, ready)
            if ready < floor and self._below_since is None:
                self._below_since = now
            # checked on every observation, the recovering one included: a dip that lasted longer
            # than the grace trips the guard even if it ended before we looked again
            if (dip := self._dip_past_grace(now)) is not None:
                self._raise_if_kueue_holds(k, "floor")
                raise StageFailed(f"stage {k + 1}: ready groups below the floor {floor} for "
                                  f"{dip:.0f}s (min {rec.min_ready_groups})")
            if ready >= floor:
                self._below_since = None
        g = self.strategy.gate(obj, st.targets[k])
        hold = self.extra_guard(obj) if self.extra_guard else None
        rec.gate, rec.gate_detail = dict(g.checks), g.detail + (f" hold: {hold}" if hold else "")
        if bake:
            if not g.passed:
                return None
            return now if now >= until else _PENDING
        if g.passed and hold is None:
            self._done_wall = time.monotonic()
            chained = self.opts.chain_partitions and k + 1 < len(st.targets)
            skew = "" if chained else self.strategy.revision_skew(self.t)
            if skew:
                raise StageFailed(f"stage {k + 1}: leader/worker revision skew in {skew}")
            return now
        return None if now >= until else _PENDING

    def _raise_if_kueue_holds(self, k: int, why: str) -> None:
        """Before failing a stage on its deadline or the floor guard: when Kueue holds groups of the
        target (gated pods: no quota, or preempted), that is no fault of the release
        (rollout/kueue_hold.py)."""
        held = kueue_hold.probe(self.kube, self.ns, self.obj)
        if held is not None:
            what = (f"its deadline ({self.opts.deadline_s:g}s) passed" if why == "deadline"
                    else "ready groups fell below the floor")
            raise QuotaHeld(f"stage {k + 1}: {what}: {held}")

    def _pause_quota(self, st: state.RolloutState, k: int, detail: str) -> Outcome:
        """Hold the stage for quota, as an inconclusive analysis is held: resume waits again with a
        fresh deadline, abort rolls back; nothing counts the release as failed."""
        self.t.mark(st, paused=True, reason=f"{kueue_hold.QUOTA_BLOCKED}: {detail}"[:1000])
        self.events.emit(self.obj, kueue_hold.QUOTA_BLOCKED, f"rollout {st.id} paused: {detail}"[:1000],
                         warning=True)
        return Outcome(PAUSED, f"rollout {st.id} paused at {detail}; resume waits again (a fresh "
                       "deadline), abort rolls back", self.report)

    def _dip_past_grace(self, now: float) -> float | None:
        """The floor guard: how long ready groups have been below the floor, once past the grace."""
        if self._below_since is None or now - self._below_since <= self.opts.floor_grace_s:
            return None
        return now - self._below_since

    # -- helpers -----------------------------------------------------------------------------------
    def _final_from_state(self, st: state.RolloutState) -> Outcome:
        final: dict[str, Result] = {state.SUCCEEDED: SUCCEEDED, state.ROLLED_BACK: ROLLED_BACK,
                                    state.ABORTED: ABORTED}
        res = final.get(st.phase, FAILED)
        return Outcome(res, f"rollout {st.id} {st.phase}: {st.reason}".rstrip(": "), self.report)

    def _adopt(self, st: state.RolloutState) -> None:
        r = self.report
        r.rollout_id, r.stages_spec, r.targets = st.id, st.stages, list(st.targets)
        r.started = r.started or state.epoch(st.started) or self.clock.now()

    def _record(self, st: state.RolloutState, k: int) -> StageRecord:
        part = self.strategy.stage_partition(st.targets[k], self.obj)
        return self.report.stage(k + 1, st.targets[k], part, self.role)

    def _freeze_at_rest(self, st: state.RolloutState) -> None:
        """Write the GitOps rest partition on its own (the ends that are not written with a stage)."""
        patch = rest_patch(self.strategy, st, self.obj)
        if patch and gate.partition(self.obj) < gate.replicas(self.obj):
            self.t.write(patch)
            self.report.partitions_written.append(gate.replicas(self.obj))
            self.t.settle(self.clock.now() + self.opts.deadline_s)

    def _finish(self, out: Outcome) -> Outcome:
        return finish(out, self.clock, self.kube, self.events)


LwsRollout = Rollout
"""The executor with its default strategy, a LeaderWorkerSet (the DS one: ``ds.ds_rollout``)."""


def finish(out: Outcome, clock: Clock, kube: Kube, events: EventRecorder) -> Outcome:
    """``out`` with its report closed: the end time, the API requests and the events recorded."""
    out.report.close(out.result, out.message, clock.now(), api_requests=kube.total_requests,
                     api_retries=kube.retries, events=events.recorded)
    return out
