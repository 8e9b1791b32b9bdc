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
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from lwsflow.controller.api import labels as L
from lwsflow.controller.clock import Clock
from lwsflow.controller.errors import Conflict
from lwsflow.controller.kube import watch as kwatch
from lwsflow.controller.kube.client import Kube
from lwsflow.controller.kube.events import EventRecorder
from lwsflow.controller.kube.resources import LWS, POD
from lwsflow.controller.rollout import gate, planner, state
from lwsflow.controller.rollout.hooks import Hook, HookContext, run_hook
from lwsflow.controller.rollout.outcome import (
    ABORTED,
    FAILED,
    PAUSED,
    ROLLED_BACK,
    SUCCEEDED,
    Interrupted,
    Outcome,
    Replan,
    StageFailed,
)
from lwsflow.controller.rollout.patches import deep_merge, partition_patch
from lwsflow.controller.rollout.report import RolloutReport, StageRecord
from lwsflow.controller.rollout.rollback import RollbackSteps
from lwsflow.controller.rollout.stages import partition_for, resolve_stages

log = logging.getLogger("lwsflow.rollout")
_PENDING = object()  # an observation that decides nothing yet

__all__ = ["ABORTED", "FAILED", "PAUSED", "ROLLED_BACK", "SUCCEEDED", "Interrupted", "LwsRollout",
           "Outcome", "RolloutOptions", "finish"]


@dataclass
class RolloutOptions:
    """How to roll: stages, per-stage bake and progress deadline (cluster seconds), guards, hooks."""

    stages: str = "1,25%,50%,100%"
    bake_s: float = 0.0
    deadline_s: float = 1800.0
    no_rollback: bool = False
    floor_grace_s: float = 60.0  # ready groups may dip below the floor this long (a crash recreating)
    max_regates: int = 3  # equality lost during bake this many times -> the stage fails
    hooks: list[Hook] = field(default_factory=list)
    # Write the next stage's partition in the same request that records a passed stage (lowest
    # reaction latency). The P/D coordinator turns it off to interleave the two roles.
    chain_partitions: bool = True
    # Group targets per stage, when the caller resolved them (P/D roles share the fractions).
    targets: list[int] | None = None
    # Report a failed stage without rolling back: the P/D coordinator orders the rollback itself.
    defer_failure: bool = False
    # Start again with a manifest whose last rollout ended rolled back / aborted / failed.
    retry: bool = False


class LwsRollout(RollbackSteps):
    """Drives one LeaderWorkerSet through the stages (see module docstring)."""

    def __init__(self, kube: Kube, namespace: str, name: str, opts: RolloutOptions, clock: Clock, *,
                 manifest: dict | None = None, recorder: EventRecorder | None = None,
                 report: RolloutReport | None = None, role: str = "",
                 on_step: Callable[[str], None] | None = None,
                 extra_guard: Callable[[dict], str | None] | None = None) -> None:
        self.kube, self.ns, self.name, self.opts, self.clock = kube, namespace, name, opts, clock
        self.manifest = manifest
        self.events = recorder or EventRecorder(kube, clock.now)
        self.report = report or RolloutReport("LeaderWorkerSet", namespace, name)
        self.role = role
        self.on_step = on_step or (lambda _s: None)
        self.extra_guard = extra_guard  # P/D max-skew: returns a reason to hold, or None
        self.obj: dict = {}
        self.res = LWS
        self._forced: set[str] = set()  # leader pod uids deleted by the forced rollback
        self._last_force = -1e18
        self._done_wall = time.monotonic()  # when the current stage finished (gate, bake, hooks)
        self._below_since: float | None = None  # cluster time ready groups fell below the floor
        self.kind = "LeaderWorkerSet"
        self.partitioned = True

    # -- public ------------------------------------------------------------------------------------
    def run(self) -> Outcome:
        """Run (or resume) the rollout to a final outcome."""
        self._checkpoint("begin")
        conflicts = 0
        while True:
            try:
                out = self.step()
            except Conflict:
                # someone wrote between our read and our write (or a 409 was injected): every step
                # re-reads and re-plans, so trying again is safe; bounded so a fight cannot spin
                conflicts += 1
                if conflicts > 50:
                    raise
                continue
            conflicts = 0
            if out is not None:
                return self._finish(out)

    def step(self, *, until_stage: int | None = None) -> Outcome | None:
        """Do the planner's next action; an Outcome when the rollout has ended.

        ``until_stage``: return None without acting once stage ``until_stage`` (0-based) has passed
        and the next action would start another stage (used by the P/D coordinator).
        """
        self.obj = self.kube.get(self.res, self.ns, self.name)
        st = state.RolloutState.from_object(self.obj)
        act = planner.next_action(st, self.obj, partitioned=self.partitioned)
        if st.id and st.active and not self.report.rollout_id:
            self._adopt(st)  # resuming (or running) this rollout
        log.debug("%s: %s", self.name, act)
        if until_stage is not None and st.passed > until_stage and act.kind in (
                planner.SET_PARTITION, planner.GATE, planner.DONE):
            return None
        if act.kind == planner.START:
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
        elif act.kind == planner.FINISH_START:
            self._finish_start(st)
        elif act.kind == planner.SET_PARTITION:
            self._set_partition(st, act.stage, act.partition)
        elif act.kind == planner.GATE:
            return self._run_gate(st, act.stage)
        elif act.kind == planner.DONE:
            self._mark(st, phase=state.SUCCEEDED, last_good=state.pack(state.template_of(self.obj)))
            self._freeze_at_rest(st)
            self.events.emit(self.obj, "RolloutSucceeded", f"rollout {st.id}: all stages passed")
            return Outcome(SUCCEEDED, f"rollout {st.id} succeeded", self.report)
        elif act.kind == planner.ROLLBACK:
            self._rollback_apply(st, act.reason)
        elif act.kind == planner.ROLLBACK_WAIT:
            return self._rollback_wait(st)
        elif act.kind == planner.PAUSED:
            return Outcome(PAUSED, f"rollout {st.id} is paused at stage {st.passed + 1}: {act.reason}; "
                           f"`lwsflow rollout resume` continues it", self.report)
        elif act.kind == planner.FOREIGN:
            self._mark(st, phase=state.ABORTED, reason=act.reason)
            self.events.emit(self.obj, "RolloutAborted", act.reason, warning=True)
            return Outcome(ABORTED, f"aborted, nothing overwritten: {act.reason}", self.report)
        elif act.kind == planner.GUARD:
            return self._fail(st, act.reason)
        return None

    # -- start -------------------------------------------------------------------------------------
    def _start(self) -> None:
        obj = self.obj
        cur_template = state.template_of(obj)
        replicas = gate.replicas(self.manifest or obj)
        targets = self.opts.targets or (resolve_stages(self.opts.stages, replicas) if self.partitioned
                                        else [1])
        now = self.clock.now()
        old = state.RolloutState.from_object(obj)
        st = state.RolloutState(
            id=uuid.uuid4().hex[:12], phase=state.STARTING, stages=self.opts.stages, targets=targets,
            passed=0, bake_s=self.opts.bake_s, deadline_s=self.opts.deadline_s, started=state.iso(now),
            updated=state.iso(now), stage_started=state.iso(now), no_rollback=self.opts.no_rollback,
            manifest_hash=state.manifest_hash(self.manifest, obj), last_good=old.last_good,
            gitops=self.manifest is None)
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
            if self.partitioned:
                body = deep_merge(body, partition_patch(replicas))
            body.pop("status", None)
            self.kube.apply(self.res, body, field_manager=L.FIELD_MANAGER)
        else:
            # GitOps: the template is already applied with the partition frozen by the overlay; the
            # previous template is the last one this controller saw succeed.
            if old.last_good and state.template_hash(state.unpack(old.last_good)) != \
                    state.template_hash(cur_template):
                st.previous_template = old.last_good
                st.previous_hash = state.template_hash(state.unpack(old.last_good))
            patch: dict = {"metadata": {"annotations": st.annotations()}}
            if self.partitioned:
                patch = deep_merge(patch, partition_patch(max(gate.partition(obj), replicas)))
            patch["metadata"]["resourceVersion"] = obj["metadata"]["resourceVersion"]
            self.kube.merge_patch(self.res, self.ns, self.name, patch, field_manager=L.FIELD_MANAGER)
        if self.partitioned:
            self.report.partitions_written.append(replicas)
        self._adopt(st)
        self._checkpoint("started")

    def _finish_start(self, st: state.RolloutState) -> None:
        target = state.template_hash(state.template_of(self.obj))
        self._mark(st, phase=state.RUNNING, target_hash=target, previous_hash=st.previous_hash or target)
        self.events.emit(self.obj, "RolloutStarted",
                         f"rollout {st.id}: stages {st.stages} -> groups {st.targets}, frozen at "
                         f"partition {gate.partition(self.obj)}")
        self._checkpoint("running")

    # -- stages ------------------------------------------------------------------------------------
    def _set_partition(self, st: state.RolloutState, k: int, partition: int) -> None:
        now = state.iso(self.clock.now())
        patch = deep_merge({"metadata": {"annotations": state.RolloutState(
            stage_started=now, updated=now).annotations(("stage_started", "updated"))}},
            partition_patch(partition))
        self._write(patch)
        self.report.partitions_written.append(partition)
        rec = self._record(st, k)
        rec.started = rec.started or self.clock.now()
        self.events.emit(self.obj, "StageStarted", f"stage {k + 1}/{len(st.targets)}: partition "
                         f"{partition}, {st.targets[k]} groups to update")
        self._checkpoint(f"stage-{k + 1}-partition")

    def _run_gate(self, st: state.RolloutState, k: int) -> Outcome | None:
        rec = self._record(st, k)
        if rec.started is None:
            rec.started, rec.resumed = state.epoch(st.stage_started) or self.clock.now(), True
        req0 = self.kube.total_requests
        try:
            self._gate_and_bake(st, k, rec)
            for hook in self.opts.hooks:
                res = run_hook(hook, HookContext(self.kind, self.ns, self.name, k + 1,
                                                 len(st.targets), st.targets[k], self.obj))
                rec.hooks.append(res.detail)
                if not res.ok:
                    raise StageFailed(f"stage {k + 1} hook failed: {res.detail}")
                self._done_wall = time.monotonic()
        except StageFailed as exc:
            rec.result, rec.ended = "failed", self.clock.now()
            rec.api_requests += self.kube.total_requests - req0
            return self._fail(st, str(exc))
        except Replan:
            rec.api_requests += self.kube.total_requests - req0
            return None
        self._checkpoint(f"stage-{k + 1}-gate-passed")
        last = k + 1 >= len(st.targets)
        now = self.clock.now()
        ann = state.RolloutState(passed=k + 1, updated=state.iso(now), stage_started=state.iso(now))
        keys: tuple[str, ...] = ("passed", "updated", "stage_started")
        patch: dict = {"metadata": {"annotations": ann.annotations(keys)}}
        nxt = None
        if last:
            ann.phase, ann.last_good = state.SUCCEEDED, state.pack(state.template_of(self.obj))
            patch = deep_merge({"metadata": {"annotations": ann.annotations((*keys, "phase", "last_good"))}},
                               self._rest_patch(st))
        elif self.opts.chain_partitions and self.partitioned:
            nxt = partition_for(st.targets[k + 1], gate.replicas(self.obj))
            patch = deep_merge(patch, partition_patch(nxt))
        try:
            self._write(patch, expect_hash=st.target_hash)
        except Replan:
            return None
        reaction_wall = time.monotonic() - self._done_wall
        if nxt is not None:
            # the skew guard of a chained stage runs right after the move, off the critical path
            # (guards hold throughout; a skew found here rolls back before the next gate)
            skew = self._revision_skew()
            if skew:
                rec.result, rec.ended = "failed", self.clock.now()
                return self._fail(state.RolloutState.from_object(self.obj),
                                  f"stage {k + 1}: leader/worker revision skew in {skew}")
        done_at = self.clock.now()
        rec.result, rec.ended = "passed", done_at
        rec.api_requests += self.kube.total_requests - req0
        self.events.emit(self.obj, "StagePassed", f"stage {k + 1}/{len(st.targets)} passed: "
                         f"{rec.gate_detail}")
        if last and self._rest_patch(st):
            self.report.partitions_written.append(gate.replicas(self.obj))
        if nxt is not None:
            self.report.partitions_written.append(nxt)
            nrec = self._record(st, k + 1)
            nrec.started = done_at
            # measured on the monotonic wall clock and converted: two reads of an interpolated
            # cluster clock can be off by more than the latency being measured
            rec.reaction_s = round(reaction_wall / max(self.clock.wall(1.0), 1e-9), 3)
            self.events.emit(self.obj, "StageStarted", f"stage {k + 2}/{len(st.targets)}: partition "
                             f"{nxt}, {st.targets[k + 1]} groups to update")
        self._checkpoint(f"stage-{k + 1}-passed")
        if last:
            self.events.emit(self.obj, "RolloutSucceeded", f"rollout {st.id}: all stages passed")
            return Outcome(SUCCEEDED, f"rollout {st.id} succeeded", self.report)
        return None

    def _gate_and_bake(self, st: state.RolloutState, k: int, rec: StageRecord) -> float:
        """Wait for the gate, then bake while it keeps holding; the cluster time the gate passed."""
        start = state.epoch(st.stage_started) or self.clock.now()
        deadline = start + st.deadline_s
        for _ in range(self.opts.max_regates + 1):
            passed_at = self._wait(st, k, rec, until=deadline, bake=False)
            if passed_at is None:
                raise StageFailed(f"stage {k + 1} deadline ({st.deadline_s:g}s) passed: "
                                  f"{rec.gate_detail}; failing {','.join(rec.gate) and self._failing(rec)}")
            rec.gate_passed = passed_at
            if st.bake_s <= 0:
                return passed_at
            if self._wait(st, k, rec, until=self.clock.now() + st.bake_s, bake=True) is not None:
                self._done_wall = time.monotonic()
                return self.clock.now()
            deadline = max(deadline, self.clock.now() + st.deadline_s)  # re-gate after a lost equality
            self.events.emit(self.obj, "StageBakeInterrupted", f"stage {k + 1}: equality lost during "
                             f"bake ({rec.gate_detail}); waiting for the gate again", warning=True)
        raise StageFailed(f"stage {k + 1}: equality lost during bake {self.opts.max_regates + 1} times")

    @staticmethod
    def _failing(rec: StageRecord) -> str:
        return ",".join(k for k, ok in rec.gate.items() if not ok) or "none"

    def _wait(self, st: state.RolloutState, k: int, rec: StageRecord, *, until: float,
              bake: bool) -> float | None:
        """Follow the LWS until the gate passes (``bake``: until ``until`` with the gate holding).

        Returns the cluster time of success, or None (deadline passed / equality lost in bake).
        Raises Replan when the planner wants something else (pause, abort, foreign change), and
        StageFailed when a guard trips. The watch is reopened at the floor guard's due time, so a
        dip below the floor is caught even when the object stays quiet.
        """
        floor = gate.floor(self.obj)
        self.report.see_floor(floor)
        self._below_since: float | None = None
        while True:
            wake = until
            if self._below_since is not None:
                wake = min(until, self._below_since + self.opts.floor_grace_s + 0.001)
            for obj in self._follow(wake):
                res = self._observe(st, k, rec, obj, floor, until=until, bake=bake)
                if res is not _PENDING:
                    return res  # type: ignore[return-value]
                if self._below_since is not None and wake >= until:
                    break  # a dip just began: reopen the watch with the guard's due time
            now = self.clock.now()
            if (dip := self._dip_past_grace(now)) is not None:
                raise StageFailed(f"stage {k + 1}: ready groups below the floor {floor} for {dip:.0f}s")
            if now >= until:
                return now if bake else None

    def _observe(self, st: state.RolloutState, k: int, rec: StageRecord, obj: dict, floor: int, *,
                 until: float, bake: bool) -> float | object | None:
        """One observation of the object while waiting: guards, gate; ``_PENDING`` to keep waiting."""
        self.obj = obj
        now = self.clock.now()
        act = planner.next_action(state.RolloutState.from_object(obj), obj)
        if act.kind != planner.GATE or act.stage != k:
            raise Replan(act.kind)
        ready = self._ready(obj)
        if ready is not None:
            self.report.see_ready(ready)
            rec.min_ready_groups = ready if rec.min_ready_groups is None else min(
                rec.min_ready_groups, ready)
            if ready < floor and self._below_since is None:
                self._below_since = now
            # checked on every observation, the recovering one included: a dip that lasted longer
            # than the grace trips the guard even if it ended before we looked again
            if (dip := self._dip_past_grace(now)) is not None:
                raise StageFailed(f"stage {k + 1}: ready groups below the floor {floor} for "
                                  f"{dip:.0f}s (min {rec.min_ready_groups})")
            if ready >= floor:
                self._below_since = None
        g = self._gate(obj, st.targets[k])
        hold = self.extra_guard(obj) if self.extra_guard else None
        rec.gate, rec.gate_detail = dict(g.checks), g.detail + (f" hold: {hold}" if hold else "")
        if bake:
            if not g.passed:
                return None
            return now if now >= until else _PENDING
        if g.passed and hold is None:
            self._done_wall = time.monotonic()
            chained = self.opts.chain_partitions and k + 1 < len(st.targets)
            skew = self._revision_skew() if self.partitioned and not chained else ""
            if skew:
                raise StageFailed(f"stage {k + 1}: leader/worker revision skew in {skew}")
            return now
        return None if now >= until else _PENDING

    def _dip_past_grace(self, now: float) -> float | None:
        """The floor guard: how long ready groups have been below the floor, once past the grace."""
        if self._below_since is None or now - self._below_since <= self.opts.floor_grace_s:
            return None
        return now - self._below_since

    def _follow(self, until: float) -> Iterator[dict]:
        # a little wall slack; callers loop until the cluster clock says the time has come
        budget = self.clock.wall(max(0.0, until - self.clock.now())) + 0.05
        yield from kwatch.follow(self.kube, self.res, self.ns, self.name, wall_budget=budget)

    def _gate(self, obj: dict, target_groups: int) -> gate.GateResult:
        return gate.lws_stage_gate(obj, target_groups)

    def _ready(self, obj: dict) -> int | None:
        """Ready groups for the floor and the report; None while the status is not current."""
        return gate.counters(obj)["readyReplicas"] if gate.status_current(obj) else None

    def _revision_skew(self) -> str:
        """Groups whose pods are all Ready but whose workers run another revision than the leader."""
        pods, _ = self.kube.list(POD, self.ns, label_selector=f"{L.NAME}={self.name}")
        groups: dict[str, list[dict]] = {}
        for p in pods:
            groups.setdefault((p["metadata"].get("labels") or {}).get(L.GROUP_INDEX, "?"), []).append(p)
        bad = []
        for gi, members in sorted(groups.items()):
            hashes = {(m["metadata"].get("labels") or {}).get(L.TEMPLATE_REVISION_HASH) for m in members}
            ready = all(gate.pod_ready(m) for m in members)
            if len(hashes) > 1 and ready:
                bad.append(f"group {gi}")
        return ", ".join(bad)

    # -- helpers -----------------------------------------------------------------------------------
    def _final_from_state(self, st: state.RolloutState) -> Outcome:
        res = {state.SUCCEEDED: SUCCEEDED, state.ROLLED_BACK: ROLLED_BACK,
               state.ABORTED: ABORTED}.get(st.phase, FAILED)
        return Outcome(res, f"rollout {st.id} {st.phase}: {st.reason}".rstrip(": "), self.report)

    def _adopt(self, st: state.RolloutState) -> None:
        r = self.report
        r.rollout_id, r.stages_spec, r.targets = st.id, st.stages, list(st.targets)
        r.started = r.started or state.epoch(st.started) or self.clock.now()

    def _record(self, st: state.RolloutState, k: int) -> StageRecord:
        part = partition_for(st.targets[k], gate.replicas(self.obj)) if self.partitioned else 0
        return self.report.stage(k + 1, st.targets[k], part, self.role)

    # -- for coordinators (P/D pair) ---------------------------------------------------------------
    def passed(self) -> int:
        """Stages passed, as recorded on the object last read."""
        return state.RolloutState.from_object(self.obj).passed

    def phase(self) -> str:
        return state.RolloutState.from_object(self.obj).phase

    def _rest_patch(self, st: state.RolloutState) -> dict:
        """GitOps mode: the partition back at ``replicas`` ("frozen at rest"), else nothing.

        Argo CD ignores the partition (``RespectIgnoreDifferences``), so the live value is what the
        next synced template meets: left at 0, that template would roll every group at once.
        Partition >= replicas updates no existing group and keeps the status equality and
        ``Available`` of a healthy LWS (lws-semantics §c/§d); see docs/rollout.md for the surge
        groups it can bring at rest.
        """
        if not (st.gitops and self.partitioned):
            return {}
        return partition_patch(gate.replicas(self.obj))

    def _freeze_at_rest(self, st: state.RolloutState) -> None:
        """Write :meth:`_rest_patch` on its own (the ends that are not written with a stage)."""
        patch = self._rest_patch(st)
        if patch and gate.partition(self.obj) < gate.replicas(self.obj):
            self._write(patch)
            self.report.partitions_written.append(gate.replicas(self.obj))

    def _mark(self, st: state.RolloutState, **changes: object) -> None:
        ann = state.RolloutState(updated=state.iso(self.clock.now()), **changes)  # type: ignore[arg-type]
        self._write({"metadata": {"annotations": ann.annotations(("updated", *changes))}})

    def _write(self, patch: dict, expect_hash: str = "") -> None:
        """Merge-patch the LWS conditioned on the resourceVersion we acted on (409: re-read, check)."""
        def make(cur: dict) -> dict:
            if expect_hash and state.template_hash(state.template_of(cur)) != expect_hash:
                raise Replan("template changed")
            return copy.deepcopy(patch)
        self.obj = self.kube.read_modify_write(self.res, self.ns, self.name, make,
                                               field_manager=L.FIELD_MANAGER, current=self.obj or None)

    def _checkpoint(self, name: str) -> None:
        self.on_step(f"{self.role + ':' if self.role else ''}{name}")

    def _finish(self, out: Outcome) -> Outcome:
        return finish(out, self.clock, self.kube, self.events)


def finish(out: Outcome, clock: Clock, kube: Kube, events: EventRecorder) -> Outcome:
    """``out`` with its report closed: the end time, the API requests and the events recorded."""
    out.report.close(out.result, out.message, clock.now(), api_requests=kube.total_requests,
                     api_retries=kube.retries, events=events.recorded)
    return out
