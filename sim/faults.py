"""Fault injection for the embedded cluster, now or at a virtual time.

Container crash (restartCount+1, the kubelet restarts it after a back-off), pod deletion, node
failure (node NotReady, its pods lost as after pod GC) and recovery, GPUs lost on a node, and bad
releases by image pattern: image pull failure, readiness that never comes, a crash loop while the
model loads. Per pod template the same comes from the annotations
``sim.lwsflow.io/image-pull-fails``, ``never-ready`` and ``crash-loop`` (value "true").
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field

from lwsflow.controller.api import labels as L
from lwsflow.controller.errors import InvalidInput
from lwsflow.sim.store import rfc3339

if TYPE_CHECKING:
    from lwsflow.sim.cluster import Cluster

FaultKind = Literal[
    "crash", "delete-pod", "node-failure", "node-recovery", "gpu-loss", "image-pull-failure", "never-ready",
    "crash-loop",
]


class Fault(BaseModel):
    """One fault. ``pod`` for crash/delete-pod, ``node`` for node faults, ``image`` for images."""

    model_config = ConfigDict(extra="forbid")
    kind: FaultKind
    namespace: str = "default"
    pod: str = ""
    node: str = ""
    image: str = ""  # fnmatch pattern
    gpus: int = Field(default=1, ge=0)  # gpu-loss: how many GPUs the node loses
    exit_code: int = 1


def inject(cluster: Cluster, fault: Fault) -> None:
    """Apply ``fault`` now (call from the loop, e.g. via ``cluster.at``)."""
    with cluster.store.lock:
        _inject(cluster, fault)


def _inject(c: Cluster, f: Fault) -> None:
    if f.kind in ("crash", "delete-pod") and not f.pod:
        raise InvalidInput("a pod name is required", field="pod")
    if f.kind in ("node-failure", "node-recovery", "gpu-loss") and f.node not in c.scheduler.nodes:
        raise InvalidInput(f"no such node {f.node!r}", field="node")
    if f.kind == "crash":
        c.kubelet.crash(f.namespace, f.pod, f.exit_code)
    elif f.kind == "delete-pod":
        c.delete_pod(f.namespace, f.pod)
    elif f.kind == "node-failure":
        fail_node(c, f.node)
    elif f.kind == "node-recovery":
        recover_node(c, f.node)
    elif f.kind == "gpu-loss":
        lose_gpus(c, f.node, f.gpus)
    elif f.kind == "image-pull-failure":
        c.config.failing_images.append(f.image)
    elif f.kind == "never-ready":
        c.config.never_ready_images.append(f.image)
    elif f.kind == "crash-loop":
        c.config.crashing_images.append(f.image)


def schedule(cluster: Cluster, delay: float, fault: Fault) -> None:
    """Inject ``fault`` ``delay`` virtual seconds from now."""
    cluster.at(cluster.now() + delay, lambda: inject(cluster, fault))


def _set_node_ready(c: Cluster, node: str, ready: bool) -> None:
    now = rfc3339(c.now())

    def edit(obj: dict) -> None:
        obj["status"]["conditions"] = [
            {
                "type": "Ready",
                "status": "True" if ready else "Unknown",
                "reason": "KubeletReady" if ready else "NodeStatusUnknown",
                "message": "" if ready else "Kubelet stopped posting node status.",
                "lastHeartbeatTime": now,
                "lastTransitionTime": now,
            }
        ]

    c.store.mutate("nodes", "", node, edit, subresource="status")
    c.scheduler.set_node_state(node, ready=ready)


def fail_node(c: Cluster, node: str) -> None:
    """The node goes NotReady and every pod on it is lost (deleted, as pod GC does)."""
    _set_node_ready(c, node, False)
    for ns, name in list(c.kubelet.by_node.get(node, {})):
        c.delete_pod(ns, name, grace_period=0)  # pod GC force-deletes: no kubelet is left to confirm


def recover_node(c: Cluster, node: str) -> None:
    _set_node_ready(c, node, True)
    c.kubelet.retry_pending()


def lose_gpus(c: Cluster, node: str, n: int) -> None:
    """The node's allocatable GPUs drop by ``n`` (an Xid error taking GPUs off the device plugin)."""
    info = c.scheduler.nodes[node]
    gpus = max(0, info.gpus - n)
    c.scheduler.set_gpus(node, gpus)

    def edit(obj: dict) -> None:
        obj["status"]["allocatable"][L.GPU_RESOURCE] = str(gpus)

    c.store.mutate("nodes", "", node, edit, subresource="status")
