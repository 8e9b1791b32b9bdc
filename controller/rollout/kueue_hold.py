"""Kueue holding a rollout's groups back: a stage that waits on quota pauses, it is not a failed release.

Kueue keeps every pod of a group it has not admitted behind the scheduling gate
``kueue.x-k8s.io/admission``: a surge group waiting for quota, or a group whose Workload was preempted
or evicted (its pods are recreated, gated, until Kueue admits it again). Either way the group is not
Ready, so a stage's readiness gate would run out its progress deadline, or the availability floor
would trip, and the release would be rolled back for something the release did not do.

So when a stage's deadline passes, or the floor guard trips, on a target with Kueue's queue label, the
engine looks at the target's pods once (:func:`probe`): when Kueue gates any of them, the rollout
pauses with reason ``QuotaBlocked`` naming the groups, the ClusterQueue and the GPUs missing, instead of
failing. ``resume`` waits again with a fresh deadline (once quota frees or is added), ``abort`` rolls
back. The progress deadline is the bound on how long a group may stay gated before that.

:func:`held_groups` and :func:`message` are pure; :func:`probe` is the one read (pods by label, then the
queue's quota as rollout/quota.py reads it for the preflight).
"""

from __future__ import annotations

from fractions import Fraction

from lwsflow.controller.api import labels as L
from lwsflow.controller.api.quantity import quantity_text
from lwsflow.controller.api.wire import Obj
from lwsflow.controller.errors import ApiError, InvalidInput
from lwsflow.controller.kube.client import Kube
from lwsflow.controller.kube.resources import POD
from lwsflow.controller.rollout import capacity, quota

ADMISSION_GATE = "kueue.x-k8s.io/admission"  # Kueue's scheduling gate on a group not admitted
QUOTA_BLOCKED = "QuotaBlocked"  # the Event's and condition's reason, and how the paused reason begins


def gated(pod: Obj) -> bool:
    """True while Kueue's admission gate holds the pod (not deleted: a terminating pod is going)."""
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        return False
    gates = (pod.get("spec") or {}).get("schedulingGates") or []
    return any(isinstance(g, dict) and g.get("name") == ADMISSION_GATE for g in gates)


def held_groups(pods: list[Obj]) -> list[str]:
    """The groups Kueue holds, as ``<lws>/<group index>``, sorted (a group counts once, whatever
    number of its pods are gated)."""
    held = set()
    for pod in pods:
        if gated(pod):
            labels = (pod.get("metadata") or {}).get("labels") or {}
            held.add(f"{labels.get(L.NAME, '?')}/{labels.get(L.GROUP_INDEX, '?')}")
    return sorted(held, key=lambda g: (g.rpartition("/")[0], int(g.rpartition("/")[2])
                                       if g.rpartition("/")[2].isdigit() else -1))


def missing_gpus(queue: quota.Queue, gpus_per_group: int, groups: int) -> Fraction:
    """GPUs the ClusterQueue lacks to admit ``groups`` more groups (whole groups per flavor, as
    :func:`quota.admit` places them)."""
    need = quota.SurgeNeed("", groups, gpus_per_group)
    admitted = quota.admit(queue, [need]).admitted[""]
    return Fraction((groups - admitted) * gpus_per_group)


def message(held: list[str], queue: quota.Queue | None, gpus_per_group: int, quota_error: str = "") -> str:
    """The one line a person reads: which groups, and what the ClusterQueue lacks (or why that is
    unknown)."""
    shown = ", ".join(held[:5]) + (f" and {len(held) - 5} more" if len(held) > 5 else "")
    head = (f"Kueue holds {len(held)} group(s) ({shown}): their pods carry the scheduling gate "
            f"{ADMISSION_GATE} (waiting for quota, or preempted)")
    if queue is None:
        return f"{head}; the queue's quota could not be read: {quota_error}" if quota_error else head
    flavors = "; ".join(str(f) for f in queue.flavors) or f"no quota for {L.GPU_RESOURCE}"
    if gpus_per_group <= 0:
        return f"{head}; {queue}: {flavors}"
    short = missing_gpus(queue, gpus_per_group, len(held))
    lacks = (f"lacks {quantity_text(short)} {L.GPU_RESOURCE} for them ({gpus_per_group} per group)"
             if short else f"now has room for them ({gpus_per_group} {L.GPU_RESOURCE} per group): Kueue "
                  "has not admitted them yet")
    return f"{head}; {queue} {lacks}: {flavors}"


def probe(kube: Kube, namespace: str, obj: Obj) -> str | None:
    """None unless Kueue holds groups of ``obj`` (an LWS, or a DS: its child LWS' pods); else
    :func:`message`. A target without the queue label is not read at all."""
    meta = obj.get("metadata") or {}
    roles = [r for r in (obj.get("spec") or {}).get("roles") or [] if isinstance(r, dict)]
    owners = roles if obj.get("kind") == "DisaggregatedSet" else [obj]
    local = next((q for q in (quota.queue_of(o) for o in owners) if q), None)
    if local is None:
        return None
    selector = f"{L.DS_NAME}={meta['name']}" if roles else f"{L.NAME}={meta['name']}"
    try:
        pods, _ = kube.list(POD, namespace, label_selector=selector)
    except ApiError:
        return None  # cannot tell: the stage fails as it would without Kueue
    held = held_groups(pods)
    if not held:
        return None
    gpus = max((capacity.gpus_requested(o) for o in owners), default=0)
    try:
        queue = quota.read_queue(kube, namespace, local, f"metadata.labels[{L.KUEUE_QUEUE}]")
    except (InvalidInput, ApiError) as exc:
        return message(held, None, gpus, str(exc))
    return message(held, queue, gpus)
