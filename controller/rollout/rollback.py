"""Failure handling of the rollout engine: pause for a human, or roll back and wait for equality.

Rollback restores the recorded previous template with partition 0 in one conditional write
(``phase=RollingBack`` included, so a restarted controller finishes it), then follows the object
until the full equality holds on the old revision. A group stuck unready on the bad revision is
recreated by deleting its leader pod (see :meth:`RollbackSteps._force_rollback_stuck`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lwsflow.controller.api import labels as L
from lwsflow.controller.errors import NotFound
from lwsflow.controller.kube.resources import POD, STATEFULSET
from lwsflow.controller.rollout import gate, state
from lwsflow.controller.rollout.outcome import FAILED, PAUSED, ROLLED_BACK, ForeignTemplate, Outcome
from lwsflow.controller.rollout.patches import deep_merge, merge_diff, partition_patch

if TYPE_CHECKING:
    from lwsflow.controller.rollout.engine import LwsRollout


class RollbackSteps:
    """Mixed into :class:`lwsflow.controller.rollout.engine.LwsRollout` (it supplies kube, obj, report...)."""

    def _fail(self: LwsRollout, st: state.RolloutState, reason: str) -> Outcome:
        self.events.emit(self.obj, "StageFailed", reason, warning=True)
        if self.opts.defer_failure:
            return Outcome(FAILED, reason, self.report)
        if st.no_rollback or self.opts.no_rollback or not st.previous_template:
            why = reason if st.previous_template else f"{reason} (no previous template recorded)"
            self._mark(st, paused=True, reason=why)
            return Outcome(PAUSED, f"rollout {st.id} paused for a human: {why}", self.report)
        self._rollback_apply(st, reason)
        return self._rollback_wait(state.RolloutState.from_object(self.obj))

    def _rollback_apply(self: LwsRollout, st: state.RolloutState, reason: str) -> None:
        prev = state.unpack(st.previous_template)
        now = self.clock.now()

        def make(cur: dict) -> dict | None:
            cst = state.RolloutState.from_object(cur)
            chash = state.template_hash(state.template_of(cur))
            if chash not in (st.target_hash, st.previous_hash) and st.target_hash:
                raise ForeignTemplate(chash)
            ann = state.RolloutState(phase=state.ROLLING_BACK, reason=reason, updated=state.iso(now),
                                     stage_started=state.iso(now), paused=False, abort=False)
            keys = ("phase", "reason", "updated", "stage_started", "paused", "abort")
            if cst.phase == state.ROLLING_BACK:
                keys = ("phase", "paused", "abort")  # a resumed rollback keeps its start and reason
            patch = {"metadata": {"annotations": ann.annotations(keys)},
                     "spec": merge_diff(state.template_of(cur), prev)}
            return deep_merge(patch, partition_patch(0)) if self.partitioned else patch
        try:
            self.obj = self.kube.read_modify_write(self.res, self.ns, self.name, make,
                                                   field_manager=L.FIELD_MANAGER)
        except ForeignTemplate:
            return  # the planner sees the foreign template next and aborts
        if self.partitioned:
            self.report.partitions_written.append(0)
        self.report.rollbacks.append({"started": now, "reason": reason})
        self.events.emit(self.obj, "RollbackStarted", f"rollout {st.id}: {reason}; restoring the "
                         "previous template at partition 0", warning=True)
        self._checkpoint("rollback-applied")

    def _rollback_wait(self: LwsRollout, st: state.RolloutState) -> Outcome | None:
        start = state.epoch(st.stage_started) or self.clock.now()
        until = start + max(st.deadline_s, 1.0) * max(1, len(st.targets))
        self.report.see_floor(gate.floor(self.obj))
        # reopened every 15 s of cluster time: a stuck group makes no events, and the forced
        # rollback must still get its look
        while self.clock.now() < until:
            for obj in self._follow(min(until, self.clock.now() + 15.0)):
                self.obj = obj
                cst = state.RolloutState.from_object(obj)
                if cst.phase != state.ROLLING_BACK:
                    return None
                ready = self._ready(obj)
                if ready is not None:
                    self.report.see_ready(ready)
                if state.template_hash(state.template_of(obj)) != st.previous_hash:
                    return None  # replan (the planner reapplies or aborts)
                if self.partitioned and gate.status_current(obj):
                    self._force_rollback_stuck(obj)
                if self._gate(obj, gate.replicas(obj) if self.partitioned else 1).passed:
                    # GitOps: rolled back AND frozen in one write, so the template Git still holds
                    # (Argo CD syncs it back until Git is reverted) cannot roll every group at once
                    ann = state.RolloutState(updated=state.iso(self.clock.now()), phase=state.ROLLED_BACK)
                    self._write(deep_merge({"metadata": {"annotations": ann.annotations(
                        ("updated", "phase"))}}, self._rest_patch(cst)))
                    if self._rest_patch(cst):
                        self.report.partitions_written.append(gate.replicas(self.obj))
                    if self.report.rollbacks:
                        self.report.rollbacks[-1]["ended"] = self.clock.now()
                    self.events.emit(obj, "RolledBack", f"rollout {st.id}: previous template restored on "
                                     f"every group ({st.reason})", warning=True)
                    return Outcome(ROLLED_BACK, f"rolled back: {cst.reason}", self.report)
        self._mark(st, phase=state.FAILED, reason=f"rollback did not converge: {st.reason}")
        self.events.emit(self.obj, "RollbackFailed", "rollback did not reach equality in time",
                         warning=True)
        return Outcome(FAILED, f"rollback did not converge ({st.reason})", self.report)

    def _force_rollback_stuck(self: LwsRollout, obj: dict) -> None:
        """Delete leader pods that are not Ready and not on the restored revision.

        A StatefulSet does not replace a pod of a bad revision that never became Ready while the
        unavailable budget is used up by that very pod (the "forced rollback" the Kubernetes
        StatefulSet docs describe): the leader StatefulSet then recreates the group on the restored
        template. Deleting an unready pod cannot lower the ready count, so the floor holds.
        Rate-limited to one look per 10 s of cluster time.
        """
        now = self.clock.now()
        if now - self._last_force < 10.0:
            return
        self._last_force = now
        try:
            sts = self.kube.get(STATEFULSET, self.ns, self.name)
        except NotFound:
            return
        current = (sts["metadata"].get("labels") or {}).get(L.TEMPLATE_REVISION_HASH)
        if not current:
            return
        leaders, _ = self.kube.list(POD, self.ns, label_selector=f"{L.NAME}={self.name},{L.WORKER_INDEX}=0")
        for p in leaders:
            meta = p["metadata"]
            if meta.get("deletionTimestamp") or meta["uid"] in self._forced:
                continue
            if (meta.get("labels") or {}).get(L.TEMPLATE_REVISION_HASH) == current or gate.pod_ready(p):
                continue
            self._forced.add(meta["uid"])
            try:
                self.kube.delete(POD, self.ns, meta["name"], uid=meta["uid"])
            except NotFound:
                continue
            self.events.emit(obj, "RollbackRecreateGroup", f"deleted unready leader {meta['name']} of "
                             "the rolled-back revision so its group comes back on the restored template",
                             warning=True)

    def pause(self: LwsRollout, reason: str) -> None:
        """Record a pause for a human (``--no-rollback``) on the object."""
        self._mark(state.RolloutState.from_object(self.obj), paused=True, reason=reason)

    def rollback(self: LwsRollout, reason: str) -> Outcome:
        """Roll this target back now (idempotent) and wait for equality on the old revision."""
        self.obj = self.kube.get(self.res, self.ns, self.name)
        st = state.RolloutState.from_object(self.obj)
        if st.phase == state.ROLLED_BACK:
            return Outcome(ROLLED_BACK, f"rolled back: {st.reason}", self.report)
        if not st.previous_template:
            self._mark(st, paused=True, reason=f"{reason} (no previous template recorded)")
            return Outcome(PAUSED, f"cannot roll back {self.name}: no previous template", self.report)
        if st.phase != state.ROLLING_BACK:
            self._rollback_apply(st, reason)
        while True:
            out = self.step()
            if out is not None:
                return out
