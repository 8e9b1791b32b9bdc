"""Per-kind strategies of the one rollout executor: what differs between an LWS and a DS rollout.

The executor (:mod:`lwsflow.controller.rollout.engine`) and the rollback
(:mod:`lwsflow.controller.rollout.rollback`) are written once; a strategy answers the kind-specific
questions: the gate, the ready count for the floor guard, the partition patch (None where the kind
has no partition), the stage targets, the revision-skew guard and what unsticks a rollback. This
mirrors upstream LWS, where a planner is separate from per-kind managers. The LWS strategy is here;
the DS one is in :mod:`lwsflow.controller.rollout.ds`.
"""

from __future__ import annotations

import dataclasses
from typing import Protocol

from lwsflow.controller.api import labels as L
from lwsflow.controller.api import wire
from lwsflow.controller.api.wire import Obj
from lwsflow.controller.errors import NotFound
from lwsflow.controller.kube.resources import LWS, POD, STATEFULSET, Resource
from lwsflow.controller.rollout import gate, state
from lwsflow.controller.rollout.gate import GateResult
from lwsflow.controller.rollout.options import RolloutOptions
from lwsflow.controller.rollout.patches import partition_patch
from lwsflow.controller.rollout.stages import partition_for, resolve_stages
from lwsflow.controller.rollout.target import Target


class KindStrategy(Protocol):
    """The kind-specific part of a rollout (one instance per rollout: it may keep state)."""

    kind: str
    res: Resource
    has_partition: bool  # the planner's SET_PARTITION / GUARD steps exist for this kind

    def options(self, opts: RolloutOptions) -> RolloutOptions:
        """``opts`` as this kind can honour them."""
        ...

    def stage_targets(self, opts: RolloutOptions, replicas: int) -> list[int]:
        """Groups updated and ready at the end of each stage."""
        ...

    def partition_patch(self, partition: int) -> Obj | None:
        """The merge patch that sets the partition; None for a kind without one."""
        ...

    def stage_partition(self, target_groups: int, obj: Obj) -> int:
        """The partition a stage runs at (reports)."""
        ...

    def gate(self, obj: Obj, target_groups: int) -> GateResult:
        """The stage gate for ``target_groups``."""
        ...

    def rolled_back(self, obj: Obj) -> GateResult:
        """Whether a rollback reached the full equality on the restored template."""
        ...

    def ready_groups(self, obj: Obj) -> int | None:
        """Ready groups for the floor guard and the report; None while the status is not current."""
        ...

    def poll_s(self, obj: Obj) -> float | None:
        """Follow ``obj`` by reading it every this many cluster seconds instead of watching it (None:
        watch): for an object whose own status never changes while the rollout moves."""
        ...

    def revision_skew(self, t: Target) -> str:
        """Groups whose members run different revisions although all are Ready ("" if none)."""
        ...

    def unstick_rollback(self, t: Target, obj: Obj) -> None:
        """Help a rollback that a stuck group blocks (may delete pods); nothing where not needed."""
        ...


def rest_patch(kind: KindStrategy, st: state.RolloutState, obj: Obj) -> Obj:
    """GitOps mode: the partition back at ``replicas`` ("frozen at rest"), else nothing.

    Argo CD ignores the partition (``RespectIgnoreDifferences``), so the live value is what the
    next synced template meets: left at 0, that template would roll every group at once.
    Partition >= replicas updates no existing group and keeps the status equality and
    ``Available`` of a healthy LWS (lws-semantics §c/§d); see docs/rollout.md for the surge
    groups it can bring at rest.
    """
    patch = kind.partition_patch(gate.replicas(obj)) if st.gitops else None
    return patch or {}


class LwsKind:
    """A LeaderWorkerSet: partitioned stages, the surge-aware stage gate, forced rollback."""

    kind = "LeaderWorkerSet"
    res = LWS
    has_partition = True

    def __init__(self) -> None:
        self._forced: set[str] = set()  # leader pod uids deleted by the forced rollback
        self._last_force = -1e18

    def options(self, opts: RolloutOptions) -> RolloutOptions:
        return opts

    def stage_targets(self, opts: RolloutOptions, replicas: int) -> list[int]:
        return opts.targets or resolve_stages(opts.stages, replicas)

    def partition_patch(self, partition: int) -> Obj | None:
        return partition_patch(partition)

    def stage_partition(self, target_groups: int, obj: Obj) -> int:
        return partition_for(target_groups, gate.replicas(obj))

    def gate(self, obj: Obj, target_groups: int) -> GateResult:
        return gate.lws_stage_gate(obj, target_groups)

    def rolled_back(self, obj: Obj) -> GateResult:
        return gate.lws_fully_rolled(obj)

    def ready_groups(self, obj: Obj) -> int | None:
        return gate.counters(obj)["readyReplicas"] if gate.status_current(obj) else None

    def poll_s(self, obj: Obj) -> float | None:
        return None  # the LWS controller writes its status on every change: watch it

    def revision_skew(self, t: Target) -> str:
        pods, _ = t.kube.list(POD, t.ns, label_selector=f"{L.NAME}={t.name}")
        groups: dict[str, list[Obj]] = {}
        for p in pods:
            groups.setdefault(wire.labels_of(p).get(L.GROUP_INDEX, "?"), []).append(p)
        bad = []
        for gi, members in sorted(groups.items()):
            hashes = {wire.labels_of(m).get(L.TEMPLATE_REVISION_HASH) for m in members}
            if len(hashes) > 1 and all(gate.pod_ready(m) for m in members):
                bad.append(f"group {gi}")
        return ", ".join(bad)

    def unstick_rollback(self, t: Target, obj: Obj) -> None:
        """Delete leader pods that are not Ready and not on the restored revision.

        A StatefulSet does not replace a pod of a bad revision that never became Ready while the
        unavailable budget is used up by that very pod (the "forced rollback" the Kubernetes
        StatefulSet docs describe): the leader StatefulSet then recreates the group on the restored
        template. Deleting an unready pod cannot lower the ready count, so the floor holds.
        Rate-limited to one look per 10 s of cluster time, and only on a current status.
        """
        now = t.clock.now()
        if not gate.status_current(obj) or now - self._last_force < 10.0:
            return
        self._last_force = now
        try:
            sts = t.kube.get(STATEFULSET, t.ns, t.name)
        except NotFound:
            return
        current = wire.labels_of(sts).get(L.TEMPLATE_REVISION_HASH)
        if not current:
            return
        leaders, _ = t.kube.list(POD, t.ns, label_selector=f"{L.NAME}={t.name},{L.WORKER_INDEX}=0")
        for p in leaders:
            meta = wire.metadata(p)
            uid, name = meta.get("uid", ""), meta.get("name", "")
            if meta.get("deletionTimestamp") or uid in self._forced:
                continue
            if wire.labels_of(p).get(L.TEMPLATE_REVISION_HASH) == current or gate.pod_ready(p):
                continue
            self._forced.add(uid)
            try:
                t.kube.delete(POD, t.ns, name, uid=uid)
            except NotFound:
                continue
            t.events.emit(obj, "RollbackRecreateGroup", f"deleted unready leader {name} of the "
                          "rolled-back revision so its group comes back on the restored template",
                          warning=True)


def one_stage(opts: RolloutOptions) -> RolloutOptions:
    """``opts`` with a single stage of one target (kinds without a partition)."""
    return dataclasses.replace(opts, targets=[1], stages="100%")
