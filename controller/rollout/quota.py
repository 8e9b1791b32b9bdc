"""Kueue quota before a rollout: can the surge groups be admitted, and would Kueue's webhook take the
new template? (pure; :func:`read_queue` is the one read of the cluster)

An LWS labelled ``kueue.x-k8s.io/queue-name: <LocalQueue>`` is admitted by Kueue one group at a time
(one Workload per group index, all-or-nothing). A group index keeps its Workload across revisions, so
rolling in place (``maxSurge: 0``) needs no extra quota; each **surge** group gets a new Workload that
needs fresh admission, and without free quota its pods stay gated and the rollout stalls. A
DisaggregatedSet's child LWS carry the label of their role; a new revision's groups beyond the old
ones (the role's surge) need quota the same way.

Free quota is read from the LocalQueue's ClusterQueue, per flavor of the resource group that covers
the GPU resource, kept simple on purpose:

    free = max(0, nominalQuota - reserved) + borrowable
    borrowable = min(borrowingLimit - borrowed (when set),
                     sum over the cohort's other ClusterQueues of
                     max(0, min(lendingLimit or nominalQuota, nominalQuota - their reserved)) - borrowed)

where ``reserved`` is ``status.flavorsReservation`` and ``borrowed`` is what the queue already reserves
above its nominal quota. Not modelled: hierarchical Cohort objects, fair sharing, preemption, flavor
``nodeLabels`` against the pods' nodeSelector, and resources other than the GPU. A surge group is
placed in the first flavor (ClusterQueue order) with room for all of its GPUs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

from lwsflow.controller.api import labels as L
from lwsflow.controller.api.quantity import quantity, quantity_text
from lwsflow.controller.api.wire import Obj
from lwsflow.controller.errors import Forbidden, InvalidInput, NotFound
from lwsflow.controller.kube.client import Kube
from lwsflow.controller.kube.resources import CLUSTER_QUEUE, LOCAL_QUEUE
from lwsflow.controller.rollout import capacity, gate

ON_SHORTAGE = ("refuse", "inPlace")


def check_on_shortage(value: str) -> None:
    """``refuse`` (the default) or ``inPlace`` (roll with the surge the quota admits, none at worst)."""
    if value not in ON_SHORTAGE:
        raise InvalidInput(f"{value!r} is not one of {', '.join(ON_SHORTAGE)}", field="on-quota-shortage")

def queue_of(obj: Obj) -> str | None:
    """The LocalQueue an LWS (or a DS role) is admitted through, from its label."""
    return ((obj.get("metadata") or {}).get("labels") or {}).get(L.KUEUE_QUEUE) or None


@dataclass(frozen=True)
class FlavorQuota:
    """One flavor's GPU quota in a ClusterQueue, and how much of it a new Workload may take now."""

    name: str
    nominal: Fraction
    reserved: Fraction
    cohort: Fraction = Fraction(0)  # what the cohort can lend this queue now

    @property
    def free(self) -> Fraction:
        return max(Fraction(0), self.nominal - self.reserved) + self.cohort

    def __str__(self) -> str:
        q = quantity_text
        return (f"flavor {self.name}: nominal {q(self.nominal)} + cohort {q(self.cohort)} - reserved "
                f"{q(self.reserved)} = {q(self.free)} free")


@dataclass(frozen=True)
class Queue:
    """A LocalQueue and the GPU quota of its ClusterQueue."""

    local: str
    cluster_queue: str
    flavors: list[FlavorQuota] = field(default_factory=list)

    def __str__(self) -> str:
        return f"LocalQueue {self.local} -> ClusterQueue {self.cluster_queue}"


def _resources(cq: Obj, resource: str) -> list[tuple[str, Obj]]:
    """(flavor, quota entry) of ``resource`` in a ClusterQueue's resource groups, in order."""
    out = []
    for rg in (cq.get("spec") or {}).get("resourceGroups") or []:
        if resource not in (rg.get("coveredResources") or []):
            continue
        for fl in rg.get("flavors") or []:
            for r in fl.get("resources") or []:
                if r.get("name") == resource:
                    out.append((str(fl.get("name")), r))
    return out


def _reserved(cq: Obj, flavor: str, resource: str) -> Fraction:
    for fl in (cq.get("status") or {}).get("flavorsReservation") or []:
        if fl.get("name") == flavor:
            for r in fl.get("resources") or []:
                if r.get("name") == resource:
                    return quantity(r.get("total", 0))
    return Fraction(0)


def flavor_quota(cq: Obj, cohort_peers: list[Obj], resource: str = L.GPU_RESOURCE) -> list[FlavorQuota]:
    """Per flavor: nominal, reserved and what ``cohort_peers`` (the other ClusterQueues of its cohort)
    can lend it now (see the module docstring)."""
    out = []
    for flavor, r in _resources(cq, resource):
        nominal, reserved = quantity(r.get("nominalQuota", 0)), _reserved(cq, flavor, resource)
        borrowed = max(Fraction(0), reserved - nominal)
        lendable = Fraction(0)
        for peer in cohort_peers:
            for pf, pr in _resources(peer, resource):
                if pf != flavor:
                    continue
                p_nominal = quantity(pr.get("nominalQuota", 0))
                limit = quantity(pr["lendingLimit"]) if pr.get("lendingLimit") is not None else p_nominal
                lendable += max(Fraction(0), min(limit, p_nominal - _reserved(peer, pf, resource)))
        room = max(Fraction(0), lendable - borrowed)
        if r.get("borrowingLimit") is not None:
            room = min(room, max(Fraction(0), quantity(r["borrowingLimit"]) - borrowed))
        out.append(FlavorQuota(flavor, nominal, reserved, room))
    return out


def read_queue(kube: Kube, namespace: str, local: str, where: str) -> Queue:
    """The LocalQueue ``local`` -> its ClusterQueue (and its cohort's peers): the quota as it stands.
    A queue that does not exist (or no Kueue on the cluster) is InvalidInput naming ``where``."""
    try:
        lq = kube.get(LOCAL_QUEUE, namespace, local)
    except NotFound:
        raise InvalidInput(f"LocalQueue {namespace}/{local} (label {L.KUEUE_QUEUE}) not found: Kueue would "
                           "never admit the groups", field=where) from None
    cq_name = str((lq.get("spec") or {}).get("clusterQueue") or "")
    if not cq_name:
        raise InvalidInput(f"LocalQueue {namespace}/{local} names no spec.clusterQueue", field=where)
    try:
        cq = kube.get(CLUSTER_QUEUE, "", cq_name)
    except NotFound:
        raise InvalidInput(f"ClusterQueue {cq_name!r} of LocalQueue {namespace}/{local} not found",
                           field=where) from None
    cohort = (cq.get("spec") or {}).get("cohortName")
    peers: list[Obj] = []
    if cohort:
        try:
            everything, _ = kube.list(CLUSTER_QUEUE)
        except Forbidden:  # no list verb: count no lending (a refusal then errs on the safe side)
            everything = []
        peers = [o for o in everything if (o.get("spec") or {}).get("cohortName") == cohort
                 and o["metadata"]["name"] != cq_name]
    try:
        flavors = flavor_quota(cq, peers)
    except ValueError as exc:
        raise InvalidInput(f"ClusterQueue {cq_name}: {exc}", field=where) from None
    return Queue(local, cq_name, flavors)


# -- the plan -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SurgeNeed:
    """The surge groups one LWS (or one DS role) would add, each a new Workload needing admission."""

    role: str  # "" for an LWS, the role name for a DS role, prefill/decode for a pair
    groups: int
    gpus_per_group: int


@dataclass(frozen=True)
class QuotaReport:
    queue: Queue
    needs: list[SurgeNeed]
    admitted: dict[str, int]  # role -> surge groups the quota admits

    @property
    def fits(self) -> bool:
        return all(self.admitted[n.role] >= n.groups for n in self.needs)

    @property
    def message(self) -> str:
        parts = []
        for n in self.needs:
            who = f"role {n.role}: " if n.role else ""
            verdict = "admitted" if self.admitted[n.role] >= n.groups else \
                f"NOT admitted ({self.admitted[n.role]} would be)"
            parts.append(f"{who}{n.groups} surge group(s) x {n.gpus_per_group} {L.GPU_RESOURCE} {verdict}")
        flavors = "; ".join(str(f) for f in self.queue.flavors) or f"no quota for {L.GPU_RESOURCE}"
        return f"{self.queue}: {', '.join(parts)} ({flavors})"


def admit(queue: Queue, needs: list[SurgeNeed]) -> QuotaReport:
    """Place each surge group, whole, in the first flavor with room (roles in order)."""
    free = {f.name: f.free for f in queue.flavors}
    admitted: dict[str, int] = {}
    for n in needs:
        admitted[n.role] = 0
        for _ in range(n.groups):
            fl = next((k for k, v in free.items() if v >= n.gpus_per_group), None)
            if fl is None:
                break
            free[fl] -= n.gpus_per_group
            admitted[n.role] += 1
    return QuotaReport(queue, needs, admitted)


def staged_surge_limit(replicas: int, targets: list[int]) -> int | None:
    """The most surge groups Kueue v0.17 gives Workloads to in a rollout staged through ``targets``
    (updated groups per stage) by the partition; None: no limit (one stage of every group).

    Kueue's LWS reconciler makes Workloads beyond ``spec.replicas`` only while ``updatedReplicas <
    spec.replicas`` (``isRollingUpdateWithSurge``, pkg/controller/jobs/leaderworkerset), and a surge
    group is an updated group: at a stage of ``t`` groups the LWS reports ``t + surge`` updated, so a
    surge with ``t + surge >= replicas`` at a stage short of the last gets no Workload and stays gated
    (seen on the reference cluster with real Kueue, tests/conformance/test_kueue.py)."""
    partial = [t for t in targets if t < replicas]
    return None if not partial else max(0, replicas - 1 - max(partial))


def lws_surge(lws: Obj, surge_present: int, role: str = "") -> SurgeNeed:
    """An LWS's surge groups still to be admitted (those already running hold their quota)."""
    gpus = capacity.gpus_requested(lws)
    return SurgeNeed(role, max(0, min(gate.max_surge(lws), gate.replicas(lws)) - surge_present), gpus)


def ds_surge(ds: Obj) -> list[SurgeNeed]:
    """Per role of a DS: its surge (per slice) times its group's GPUs."""
    slices = int((ds.get("spec") or {}).get("slices") or 1)
    out = []
    for role in (ds.get("spec") or {}).get("roles") or []:
        gpus = capacity.gpus_requested(role)
        out.append(SurgeNeed(role["name"], capacity.role_budget(role).max_surge * slices, gpus))
    return out


# -- Kueue's webhook: what a managed LWS may not change ------------------------------------------------

# pod spec fields Kueue's LWS webhook keeps immutable on a queue-managed LWS (its quota is counted
# from them): image, args and env may change
_POD_FIELDS = ("nodeSelector", "affinity", "tolerations", "runtimeClassName", "priority",
               "topologySpreadConstraints", "resourceClaims")


def _requests(c: Obj) -> dict[str, Fraction]:
    """A container's ``resources.requests`` as written, each by value: what Kueue's webhook compares
    (``"8"`` equals ``8``; limits are not looked at, so a template that sets only limits may change them;
    measured against Kueue v0.17 on the reference cluster, tests/conformance/test_kueue.py)."""
    return {k: quantity(v) for k, v in ((c.get("resources") or {}).get("requests") or {}).items()}


def _ports(c: Obj) -> list[Obj]:
    return [{**p, "protocol": p.get("protocol") or "TCP"} for p in c.get("ports") or []]  # the API default


def _unset(v: object) -> object:
    """Kubernetes' semantic equality takes an empty list or map for an absent one."""
    return None if v in ([], {}) else v


def immutable_change(old: Obj, new: Obj) -> tuple[str, str] | None:
    """The first quota-relevant template field that differs between two LWS: (field path, what), or
    None when Kueue's webhook would take the change."""
    base = "spec.leaderWorkerTemplate"
    o_t = (old.get("spec") or {}).get("leaderWorkerTemplate") or {}
    n_t = (new.get("spec") or {}).get("leaderWorkerTemplate") or {}
    for tpl in ("leaderTemplate", "workerTemplate"):
        o = (o_t.get(tpl) or {}).get("spec") or {}
        n = (n_t.get(tpl) or {}).get("spec") or {}
        if not o and not n:
            continue
        at = f"{base}.{tpl}.spec"
        for kind in ("containers", "initContainers"):
            oc, nc = o.get(kind) or [], n.get(kind) or []
            if len(oc) != len(nc):
                return f"{at}.{kind}", f"the number of {kind} ({len(oc)} -> {len(nc)})"
            for i, (a, b) in enumerate(zip(oc, nc, strict=True)):
                if _requests(a) != _requests(b):
                    return f"{at}.{kind}[{i}].resources.requests", (
                        f"resource requests ({_fmt(_requests(a))} -> {_fmt(_requests(b))})")
                if _ports(a) != _ports(b):
                    return f"{at}.{kind}[{i}].ports", "container ports"
        for f in _POD_FIELDS:
            if _unset(o.get(f)) != _unset(n.get(f)):
                return f"{at}.{f}", f
    return None


def _fmt(req: dict[str, Fraction]) -> str:
    return "{" + ", ".join(f"{k}: {quantity_text(v)}" for k, v in sorted(req.items())) + "}"


def refuse_immutable(old: Obj, new: Obj, role: str = "") -> None:
    """InvalidInput naming the field when ``new``'s template changes what Kueue's webhook keeps fixed on
    ``old``, an LWS with the queue label (before anything is written)."""
    queue = queue_of(old)
    if queue is None:
        return
    found = immutable_change(old, new)
    if found is None:
        return
    path, what = found
    who = f"{role}: " if role else ""
    raise InvalidInput(
        f"{who}{what} changed on LeaderWorkerSet {old['metadata']['name']}, managed by Kueue "
        f"(LocalQueue {queue}): Kueue's webhook refuses changes to container requests and ports, the "
        "number of containers and initContainers, nodeSelector, affinity, tolerations, runtimeClassName, "
        "priority, topologySpreadConstraints and resourceClaims of a queue-managed LeaderWorkerSet (its "
        "quota is counted from them); roll it as a new LeaderWorkerSet (--strategy blue-green for a pair) "
        "or remove it from the queue first", field=path)
