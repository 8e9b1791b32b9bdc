"""Why a pod did not schedule, worded as kube-scheduler's FitError (the FailedScheduling event and the
``PodScheduled=False`` condition message).

Each node gets the reason of the first filter plugin that rejects the pod, in the default profile's
order (NodeUnschedulable, TaintToleration, NodeAffinity, NodeResourcesFit with every insufficient
resource, InterPodAffinity for the LWS exclusive-topology terms); the message counts nodes per reason,
sorted as strings (``sort.Strings`` in FitError.Error()), then the preemption PostFilter's own count:
every pod has the same priority here, so no node has victims. Upstream wording as of Kubernetes 1.35
(untolerated taints are no longer named: kubernetes/kubernetes#134740).

The embedded scheduler places an LWS group as a gang (all pods or none): when the leader alone fits
somewhere but the group does not, those nodes get the gang reason ``GANG`` (a real cluster would
bind the leader and leave the workers pending).
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from lwsflow.controller.api import labels as L
from lwsflow.controller.api.scheduling import tolerates

if TYPE_CHECKING:
    from lwsflow.sim.scheduler import NodeInfo, PodNeeds, Scheduler

UNSCHEDULABLE = "node(s) were unschedulable"
UNTOLERATED = "node(s) had untolerated taint(s)"
SELECTOR = "node(s) didn't match Pod's node affinity/selector"
AFFINITY = "node(s) didn't match pod affinity rules"
ANTI_AFFINITY = "node(s) didn't match pod anti-affinity rules"
GANG = "node(s) could not also hold the other {n} pod(s) of the group"
NO_VICTIMS = "No preemption victims found for incoming pod"
NOT_HELPFUL = "Preemption is not helpful for scheduling"
_NOT_READY = {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}  # the node lifecycle taint
_UNSCHEDULABLE_TAINT = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}


def node_reasons(node: NodeInfo, needs: PodNeeds, exclusive_key: str = "",
                 occupied: bool = False) -> tuple[list[str], bool]:
    """The first failing filter's reasons on ``node`` ([] when the pod fits), and whether preemption
    could help there (Unschedulable) or not (UnschedulableAndUnresolvable)."""
    if node.cordoned and not tolerates(needs.tolerations, _UNSCHEDULABLE_TAINT):
        return [UNSCHEDULABLE], False
    if not node.ready and not tolerates(needs.tolerations, _NOT_READY):
        return [UNTOLERATED], False
    if not all(tolerates(needs.tolerations, t) for t in node.taints):
        return [UNTOLERATED], False
    if any(node.labels.get(k) != v for k, v in needs.node_selector):
        return [SELECTOR], False
    short = [f"Insufficient {name}" for name, want, free in (
        ("cpu", needs.cpu, node.cpu_m - node.used_cpu_m),
        ("memory", needs.mem, node.mem - node.used_mem),
        (L.GPU_RESOURCE, needs.gpu, node.free_gpus),
    ) if want > free]
    if short:
        return short, True
    if exclusive_key and exclusive_key not in node.labels:
        return [AFFINITY], False
    if occupied:
        return [ANTI_AFFINITY], True
    return [], True


def fit_error(sched: Scheduler, members: list[PodNeeds], exclusive_key: str = "", group_key: str = "") -> str:
    """FitError.Error() for a group whose leader needs ``members[0]`` (see the module doc). Memoised
    until the scheduler's state changes: the pending pods of one LWS share their shape, and every
    retry of every pending pod would otherwise walk all nodes again."""
    key = (repr(members[0]), len(members), exclusive_key, group_key if exclusive_key else "")
    msg = sched.fit_errors.get(key)
    if msg is None:
        msg = sched.fit_errors[key] = _fit_error(sched, members, exclusive_key, group_key)
    return msg


def _fit_error(sched: Scheduler, members: list[PodNeeds], exclusive_key: str, group_key: str) -> str:
    busy = _occupied_domains(sched, exclusive_key, group_key) if exclusive_key else set()
    reasons: Counter[str] = Counter()
    victims = Counter({NO_VICTIMS: 0, NOT_HELPFUL: 0})
    for node in sched.nodes.values():
        occupied = bool(exclusive_key) and node.labels.get(exclusive_key) in busy
        why, resolvable = node_reasons(node, members[0], exclusive_key, occupied)
        if not why:
            why = [GANG.format(n=len(members) - 1)]
        reasons.update(why)
        victims[NO_VICTIMS if resolvable else NOT_HELPFUL] += 1
    total = len(sched.nodes)
    return (f"{_histogram(total, reasons)} preemption: "
            f"{_histogram(total, Counter({k: v for k, v in victims.items() if v}))}")


def _histogram(total: int, reasons: Counter[str]) -> str:
    head = f"0/{total} nodes are available:"
    parts = sorted(f"{n} {why}" for why, n in reasons.items())
    return f"{head} {', '.join(parts)}." if parts else f"{head}."


def _occupied_domains(sched: Scheduler, key: str, group_key: str) -> set[str]:
    """Topology domains holding pods of another group (the webhook's anti-affinity term)."""
    return {n.labels[key] for n in sched.nodes.values()
            if key in n.labels and any(k != group_key for k in n.group_keys)}
