"""DisaggregatedSet rollout: apply, follow, gate per role on ``status.roleStatuses``, roll back.

A DS forbids partitions (``partition`` must be 0; lws-semantics §f) and its controller has no
pause, canary, timeout or rollback: it replaces every role's LWS through its own planner. So this
rollout is one stage: apply the new spec (the previous one recorded on the DS), then gate on the
per-role equality ``desired*slices == replicas == readyReplicas == updatedReplicas`` plus
``Available``, with the same deadline, bake and hooks as an LWS stage. Rollback re-applies the
previous roles. **A DS rollout cannot be paused**: once applied, the DS controller moves every role
to the end; the only brake is ``abort`` (roll back).

Released upstream DS controllers (v0.9.0, v0.10.0) write no DS status at all (it is main-only,
lws-semantics §f "Status"). For such a DS the gate reads the child LWS instead
(``status.ds_children_checks``: per role the child on the current revision at its full equality,
no old revision keeping a group), and the rollout follows the DS by polling, since the DS object
itself does not change while its children roll.
"""

from __future__ import annotations

from typing import Any

from lwsflow.controller.api import labels as L
from lwsflow.controller.api import status as apistatus
from lwsflow.controller.api import wire
from lwsflow.controller.api.wire import Obj
from lwsflow.controller.clock import Clock
from lwsflow.controller.errors import InvalidInput
from lwsflow.controller.kube.client import Kube
from lwsflow.controller.kube.resources import DS, LWS
from lwsflow.controller.rollout import gate
from lwsflow.controller.rollout.engine import Rollout
from lwsflow.controller.rollout.gate import GateResult
from lwsflow.controller.rollout.kinds import one_stage
from lwsflow.controller.rollout.options import RolloutOptions
from lwsflow.controller.rollout.target import Target

POLL_S = 2.0  # cluster seconds between looks at a DS without a status (its children change, it does not)

CANNOT_PAUSE = ("a DisaggregatedSet has no partition, so its rollout cannot be paused "
                "(lws-semantics §f); use `lwsflow rollout abort` to roll it back")


class DsKind:
    """A DisaggregatedSet: no partition, one stage, the per-role gate on ``status.roleStatuses`` (or on
    the child LWS where the DS controller writes no status)."""

    kind = "DisaggregatedSet"
    res = DS
    has_partition = False

    def __init__(self, kube: Kube, namespace: str) -> None:
        self.kube, self.ns = kube, namespace

    def children(self, obj: Obj) -> list[Obj] | None:
        """The LWS this DS owns (its name label and a controller ownerRef to its uid), or None where the
        DS has its own status to read (no list request then)."""
        if apistatus.ds_status_written(obj):
            return None
        meta = wire.metadata(obj)
        items, _ = self.kube.list(LWS, self.ns, label_selector=f"{L.DS_NAME}={meta.get('name', '')}")
        return [o for o in items if any(isinstance(ref, dict) and ref.get("uid") == meta.get("uid")
                                        for ref in _refs(wire.metadata(o).get("ownerReferences")))]

    def poll_s(self, obj: Obj) -> float | None:
        return None if apistatus.ds_status_written(obj) else POLL_S

    def options(self, opts: RolloutOptions) -> RolloutOptions:
        return one_stage(opts)

    def stage_targets(self, opts: RolloutOptions, replicas: int) -> list[int]:
        return [1]

    def partition_patch(self, partition: int) -> Obj | None:
        return None

    def stage_partition(self, target_groups: int, obj: Obj) -> int:
        return 0

    def gate(self, obj: Obj, target_groups: int) -> GateResult:
        return gate.ds_gate(obj, self.children(obj))

    def rolled_back(self, obj: Obj) -> GateResult:
        return gate.ds_gate(obj, self.children(obj))

    def ready_groups(self, obj: Obj) -> int | None:
        children = self.children(obj)
        if children is None and not gate.status_current(obj):
            return None
        return sum(gate.ds_role_ready_groups(obj, children).values())

    def revision_skew(self, t: Target) -> str:
        return ""  # the DS controller replaces whole child LWS: no half-replaced group to look for

    def unstick_rollback(self, t: Target, obj: Obj) -> None:
        return None  # the DS controller recreates the previous roles' LWS itself


def ds_rollout(kube: Kube, namespace: str, name: str, opts: RolloutOptions, clock: Clock,
               **kw: Any) -> Rollout:
    """The rollout executor with the DisaggregatedSet strategy."""
    return Rollout(kube, namespace, name, opts, clock, strategy=DsKind(kube, namespace), **kw)


def _refs(v: object) -> list[object]:
    return v if isinstance(v, list) else []


def refuse_pause() -> None:
    raise InvalidInput(CANNOT_PAUSE, field="target")
