"""Failure handling of a rollout: pause for a human, or roll back and wait for equality.

Rollback restores the recorded previous template (with partition 0 where the kind has one) in one
conditional write (``phase=RollingBack`` included, so a restarted controller finishes it), then
follows the object until the kind's full equality holds on the old revision. A group stuck unready
on the bad revision is the strategy's to unstick (an LWS deletes its leader pod; see
:meth:`lwsflow.controller.rollout.kinds.LwsKind.unstick_rollback`).

Used by the executor (:mod:`lwsflow.controller.rollout.engine`) through :class:`Rollback`; it works on
the shared :class:`~lwsflow.controller.rollout.target.Target` and never imports the executor.
"""

from __future__ import annotations

from lwsflow.controller.api import labels as L
from lwsflow.controller.api.wire import Obj
from lwsflow.controller.rollout import gate, stagelog, state
from lwsflow.controller.rollout.kinds import KindStrategy, rest_patch
from lwsflow.controller.rollout.options import RolloutOptions
from lwsflow.controller.rollout.outcome import FAILED, PAUSED, ROLLED_BACK, ForeignTemplate, Outcome
from lwsflow.controller.rollout.patches import deep_merge, merge_diff
from lwsflow.controller.rollout.target import Target


class Rollback:
    """The failure path of one rollout's target."""

    def __init__(self, t: Target, kind: KindStrategy, opts: RolloutOptions) -> None:
        self.t, self.kind, self.opts = t, kind, opts

    def fail(self, st: state.RolloutState, reason: str) -> Outcome | None:
        """A stage failed: report it (P/D), pause for a human, or roll back and wait (None: replan)."""
        t = self.t
        t.events.emit(t.obj, "StageFailed", reason, warning=True)
        if self.opts.defer_failure:
            return Outcome(FAILED, reason, t.report)
        if st.no_rollback or self.opts.no_rollback or not st.previous_template:
            why = reason if st.previous_template else f"{reason} (no previous template recorded)"
            logged = stagelog.with_failed(state.RolloutState.from_object(t.obj).stage_log,
                                          [r for r in t.report.stages if r.role == t.role],
                                          replicas=gate.replicas(t.obj))
            t.mark(st, paused=True, reason=why, stage_log=logged)
            return Outcome(PAUSED, f"rollout {st.id} paused for a human: {why}", t.report)
        self.apply(st, reason)
        return self.wait(state.RolloutState.from_object(t.obj))

    def apply(self, st: state.RolloutState, reason: str) -> None:
        """Write the previous template back (idempotent; a foreign template is left to the planner)."""
        t = self.t
        prev = state.unpack(st.previous_template)
        now = t.clock.now()
        zero = self.kind.partition_patch(0)

        def make(cur: Obj) -> Obj | None:
            cst = state.RolloutState.from_object(cur)
            chash = state.template_hash(state.template_of(cur))
            if chash not in (st.target_hash, st.previous_hash) and st.target_hash:
                raise ForeignTemplate(chash)
            # the failed stage and the rollback's start, in the write that starts it (stagelog)
            mine = [r for r in t.report.stages if r.role == t.role]
            logged = stagelog.with_rollback(stagelog.with_failed(cst.stage_log, mine,
                                                                 replicas=gate.replicas(cur)), started=now)
            ann = state.RolloutState(phase=state.ROLLING_BACK, reason=reason, updated=state.iso(now),
                                     stage_started=state.iso(now), paused=False, abort=False,
                                     stage_log=logged)
            keys: tuple[str, ...] = ("phase", "reason", "updated", "stage_started", "paused", "abort",
                                     "stage_log")
            if cst.phase == state.ROLLING_BACK:
                keys = ("phase", "paused", "abort")  # a resumed rollback keeps its start and reason
            elif chash == st.target_hash and chash != st.previous_hash:
                ann.failed_template = state.pack(state.template_of(cur))  # what a retry re-applies
                keys = (*keys, "failed_template")
            patch: Obj = {"metadata": {"annotations": ann.annotations(keys)},
                          "spec": merge_diff(state.template_of(cur), prev)}
            return deep_merge(patch, zero) if zero else patch
        try:
            t.obj = t.kube.read_modify_write(t.res, t.ns, t.name, make, field_manager=L.FIELD_MANAGER)
        except ForeignTemplate:
            return  # the planner sees the foreign template next and aborts
        if zero:
            t.report.partitions_written.append(0)
        t.report.rollbacks.append({"started": now, "reason": reason})
        t.events.emit(t.obj, "RollbackStarted", f"rollout {st.id}: {reason}; restoring the "
                      "previous template" + (" at partition 0" if zero else ""), warning=True)
        t.checkpoint("rollback-applied")

    def wait(self, st: state.RolloutState) -> Outcome | None:
        """Follow the object until the rollback converged (an Outcome) or the planner must look again."""
        t = self.t
        now = t.clock.now()
        start = state.epoch(st.stage_started) or now
        # the budget (deadline x stages) runs from the rollback's start; a controller restarted after
        # it was spent while nobody acted (a group stuck on the bad revision waits for our unstick)
        # still gets one deadline of its own, and always one look, before it calls the rollback failed
        until = max(start + max(st.deadline_s, 1.0) * max(1, len(st.targets)), now + max(st.deadline_s, 1.0))
        t.report.see_floor(gate.floor(t.obj))
        # reopened every 15 s of cluster time: a stuck group makes no events, and the strategy must
        # still get its look
        while t.clock.now() < until:
            for obj in t.follow(min(until, t.clock.now() + 15.0)):
                t.obj = obj
                cst = state.RolloutState.from_object(obj)
                if cst.phase != state.ROLLING_BACK:
                    return None
                ready = self.kind.ready_groups(obj)
                if ready is not None:
                    t.report.see_ready(ready)
                if state.template_hash(state.template_of(obj)) != st.previous_hash:
                    return None  # replan (the planner reapplies or aborts)
                self.kind.unstick_rollback(t, obj)
                if self.kind.rolled_back(obj).passed:
                    return self._rolled_back(st, cst, obj)
        t.mark(st, phase=state.FAILED, reason=f"rollback did not converge: {st.reason}")
        t.events.emit(t.obj, "RollbackFailed", "rollback did not reach equality in time", warning=True)
        return Outcome(FAILED, f"rollback did not converge ({st.reason})", t.report)

    def _rolled_back(self, st: state.RolloutState, cst: state.RolloutState, obj: Obj) -> Outcome:
        # GitOps: rolled back AND frozen in one write, so the template Git still holds (Argo CD
        # syncs it back until Git is reverted) cannot roll every group at once
        t = self.t
        ann = state.RolloutState(updated=state.iso(t.clock.now()), phase=state.ROLLED_BACK,
                                 stage_log=stagelog.with_rollback(cst.stage_log, ended=t.clock.now()))
        frozen = rest_patch(self.kind, cst, t.obj)
        t.write(deep_merge({"metadata": {"annotations": ann.annotations(("updated", "phase", "stage_log"))}},
                           frozen))
        if frozen:
            t.report.partitions_written.append(gate.replicas(t.obj))
            t.settle(t.clock.now() + self.opts.deadline_s)
        if t.report.rollbacks:
            t.report.rollbacks[-1]["ended"] = t.clock.now()
        t.events.emit(obj, "RolledBack", f"rollout {st.id}: previous template restored on every group "
                      f"({st.reason})", warning=True)
        return Outcome(ROLLED_BACK, f"rolled back: {cst.reason}", t.report)
