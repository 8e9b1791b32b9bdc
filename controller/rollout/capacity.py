"""Capacity check before a rollout: do the plan's surge groups fit in the free GPUs? (pure)

Surge groups (``maxSurge``) run next to every old group, so they need GPUs nobody frees for them.
A group is a gang: it fits only if all of its pods (leader + ``size - 1`` workers) can be placed at
once. Placement here is first-fit-decreasing per pod over nodes that are Ready, schedulable, match
the pod's ``nodeSelector`` and tolerate the node's taints, counting the GPUs that bound pods
already request. Without surge, a rolling update reuses the GPUs of the groups it replaces, so it
always fits. When it does not fit, :func:`auto_budget` gives the fallback: ``maxSurge 0``,
``maxUnavailable >= 1`` (slower, trades availability for capacity).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

from controller.api import labels as L
from controller.rollout import gate


@dataclass(frozen=True)
class CapacityReport:
    """The numbers behind the verdict (printed on refusal, written to the report)."""

    fits: bool
    surge_groups: int
    groups_that_fit: int
    gpus_per_group: int
    free_gpus: int
    eligible_nodes: int
    per_node_free: dict[str, int] = field(default_factory=dict)

    @property
    def message(self) -> str:
        verdict = "fit" if self.fits else "do NOT fit"
        return (f"{self.surge_groups} surge group(s) x {self.gpus_per_group} GPUs {verdict}: "
                f"{self.groups_that_fit} group(s) placeable in {self.free_gpus} free GPUs on "
                f"{self.eligible_nodes} eligible node(s)")


def _gpu(pod_spec: dict) -> int:
    total = 0
    for c in pod_spec.get("containers") or []:
        res = c.get("resources") or {}
        req = {**(res.get("limits") or {}), **(res.get("requests") or {})}
        try:
            total += int(str(req.get(L.GPU_RESOURCE, 0)) or 0)
        except ValueError:
            continue
    return total


def _tolerates(tolerations: list[dict], taint: dict) -> bool:
    if taint.get("effect") == "PreferNoSchedule":
        return True
    for t in tolerations:
        if t.get("effect") and t.get("effect") != taint.get("effect"):
            continue
        if t.get("operator") == "Exists" and (not t.get("key") or t.get("key") == taint.get("key")):
            return True
        if t.get("key") == taint.get("key") and t.get("value", "") == taint.get("value", ""):
            return True
    return False


def _eligible(node: dict, pod_spec: dict) -> bool:
    spec, meta = node.get("spec") or {}, node.get("metadata") or {}
    if spec.get("unschedulable"):
        return False
    conds = (node.get("status") or {}).get("conditions") or []
    if any(c.get("type") == "Ready" and c.get("status") != "True" for c in conds):
        return False
    labels = meta.get("labels") or {}
    if any(labels.get(k) != v for k, v in (pod_spec.get("nodeSelector") or {}).items()):
        return False
    tol = pod_spec.get("tolerations") or []
    return all(_tolerates(tol, t) for t in spec.get("taints") or []
               if t.get("effect") in ("NoSchedule", "NoExecute"))


def free_gpus(nodes: list[dict], pods: list[dict]) -> dict[str, int]:
    """Allocatable minus requested GPUs per node (pods that are bound and not finished)."""
    free = {}
    for n in nodes:
        alloc = ((n.get("status") or {}).get("allocatable") or {}).get(L.GPU_RESOURCE, 0)
        free[n["metadata"]["name"]] = int(str(alloc) or 0)
    for p in pods:
        node = (p.get("spec") or {}).get("nodeName")
        if node in free and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
            free[node] -= _gpu(p.get("spec") or {})
    return free


def group_pod_specs(lws: dict) -> list[dict]:
    """The pod specs of one group: the leader (leaderTemplate or workerTemplate) then the workers."""
    lwt = (lws.get("spec") or {}).get("leaderWorkerTemplate") or {}
    size = int(lwt.get("size") or 1)
    worker = (lwt.get("workerTemplate") or {}).get("spec") or {}
    leader = (lwt.get("leaderTemplate") or {}).get("spec") or worker
    return [leader] + [worker] * (size - 1)


def check(lws: dict, nodes: list[dict], pods: list[dict]) -> CapacityReport:
    """Whether ``maxSurge`` whole groups of ``lws``'s template fit in the free GPUs right now."""
    surge = gate.max_surge(lws)
    specs = group_pod_specs(lws)
    per_group = sum(_gpu(s) for s in specs)
    free = free_gpus(nodes, pods)
    eligible = {n["metadata"]["name"] for n in nodes if all(_eligible(n, s) for s in specs[:1])}
    work = {k: v for k, v in free.items() if k in eligible}
    by_name = {n["metadata"]["name"]: n for n in nodes}
    placed = 0
    for _ in range(surge):
        trial = dict(work)
        ok = True
        for spec in sorted(specs, key=_gpu, reverse=True):  # first-fit decreasing, whole gang
            need = _gpu(spec)
            fit = next((n for n, f in sorted(trial.items(), key=lambda kv: kv[1])
                        if f >= need and _eligible(by_name[n], spec)), None)
            if fit is None:
                ok = False
                break
            trial[fit] -= need
        if not ok:
            break
        work, placed = trial, placed + 1
    return CapacityReport(placed >= surge, surge, placed, per_group,
                          sum(max(0, v) for k, v in free.items() if k in eligible), len(eligible),
                          {k: v for k, v in free.items() if k in eligible})


def auto_budget(lws: dict) -> tuple[dict, str]:
    """``lws`` with ``maxSurge: 0`` and ``maxUnavailable >= 1``, and a sentence saying so."""
    out = copy.deepcopy(lws)
    ruc = out.setdefault("spec", {}).setdefault("rolloutStrategy", {"type": "RollingUpdate"}) \
        .setdefault("rollingUpdateConfiguration", {})
    unavail = max(1, gate.max_unavailable(lws))
    ruc["maxSurge"], ruc["maxUnavailable"] = 0, unavail
    return out, (f"--auto-budget: surge does not fit; rolling with maxSurge 0, maxUnavailable {unavail} "
                 "(each stage takes groups down instead of adding new ones)")
