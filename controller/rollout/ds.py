"""DisaggregatedSet rollout: apply, follow, gate per role on ``status.roleStatuses``, roll back.

A DS forbids partitions (``partition`` must be 0; lws-semantics §f) and its controller has no
pause, canary, timeout or rollback: it replaces every role's LWS through its own planner. So this
rollout is one stage: apply the new spec (the previous one recorded on the DS), then gate on the
per-role equality ``desired*slices == replicas == readyReplicas == updatedReplicas`` plus
``Available``, with the same deadline, bake and hooks as an LWS stage. Rollback re-applies the
previous roles. **A DS rollout cannot be paused**: once applied, the DS controller moves every role
to the end; the only brake is ``abort`` (roll back).
"""

from __future__ import annotations

import dataclasses

from lwsflow.controller.clock import Clock
from lwsflow.controller.errors import InvalidInput
from lwsflow.controller.kube.client import Kube
from lwsflow.controller.kube.resources import DS
from lwsflow.controller.rollout import gate
from lwsflow.controller.rollout.engine import LwsRollout, RolloutOptions
from lwsflow.controller.rollout.report import RolloutReport

CANNOT_PAUSE = ("a DisaggregatedSet has no partition, so its rollout cannot be paused "
                "(lws-semantics §f); use `lwsflow rollout abort` to roll it back")


class DsRollout(LwsRollout):
    """The LWS engine with DS reads: no partition, one stage, the per-role gate."""

    def __init__(self, kube: Kube, namespace: str, name: str, opts: RolloutOptions, clock: Clock,
                 **kw: object) -> None:
        kw.setdefault("report", RolloutReport("DisaggregatedSet", namespace, name))
        opts = dataclasses.replace(opts, targets=[1], stages="100%")  # one stage: no partition
        super().__init__(kube, namespace, name, opts, clock, **kw)  # type: ignore[arg-type]
        self.res, self.kind, self.partitioned = DS, "DisaggregatedSet", False

    def _gate(self, obj: dict, target_groups: int) -> gate.GateResult:
        return gate.ds_gate(obj)

    def _ready(self, obj: dict) -> int | None:
        if not gate.status_current(obj):
            return None
        return sum(gate.ds_role_ready_groups(obj).values())


def refuse_pause() -> None:
    raise InvalidInput(CANNOT_PAUSE, field="target")
