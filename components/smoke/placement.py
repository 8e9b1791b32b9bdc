"""Placement checks on the GPU node pool, as pure functions of an LWS, its pods and their nodes.

For every group (leader plus workers, keyed by ``group-index``) of a checked LWS:
- each pod is bound to a node that exists and matches the pod template's ``nodeSelector`` (which is
  where the renderer puts ``nvidia.com/gpu.product`` and ``lwsflow.io/node-pool``), plus any expected
  GPU product / node pool given explicitly;
- each pod requests the GPUs its template asks for (or the expected count) and its node can hold them;
- with ``leaderworkerset.sigs.k8s.io/exclusive-topology: KEY``, all pods of a group sit in one
  topology domain (node label KEY) and no two groups share a domain.
"""

from __future__ import annotations

from dataclasses import dataclass

from lwsflow.controller.api import labels


@dataclass(frozen=True)
class Expectation:
    """Explicit expectations on top of what the LWS template says."""

    gpu_product: str | None = None
    node_pool: str | None = None
    gpus_per_pod: int | None = None


def _gpus(pod_spec: dict) -> int:
    """GPUs a pod spec asks for: limits win over requests (extended resources need them equal)."""
    total = 0
    for c in pod_spec.get("containers") or []:
        res = c.get("resources") or {}
        val = (res.get("limits") or {}).get(labels.GPU_RESOURCE, (res.get("requests") or {}).get(
            labels.GPU_RESOURCE, 0))
        total += int(val)
    return total


def _template_for(lws: dict, pod: dict) -> dict:
    lwt = lws.get("spec", {}).get("leaderWorkerTemplate", {})
    is_leader = (pod.get("metadata", {}).get("labels") or {}).get(labels.WORKER_INDEX) == "0"
    tpl = lwt.get("leaderTemplate") if is_leader and lwt.get("leaderTemplate") else lwt.get("workerTemplate")
    return tpl or {}


def check_lws_placement(lws: dict, pods: list[dict], nodes: dict[str, dict], expect: Expectation,
                        groups: set[str] | None = None) -> list[str]:
    """Problems with where the pods of ``lws`` run (empty list = placement is right).

    ``groups`` limits the check to those group indexes (e.g. the groups on the new revision).
    """
    problems: list[str] = []
    topo_key = (lws.get("metadata", {}).get("annotations") or {}).get(labels.EXCLUSIVE_TOPOLOGY)
    domains: dict[str, set[str]] = {}
    checked = 0
    for pod in pods:
        meta = pod.get("metadata", {})
        plabels = meta.get("labels") or {}
        group = plabels.get(labels.GROUP_INDEX, "?")
        if groups is not None and group not in groups:
            continue
        checked += 1
        name = meta.get("name", "?")
        node_name = pod.get("spec", {}).get("nodeName")
        node = nodes.get(node_name or "")
        if node is None:
            problems.append(f"pod {name}: not on a known node (nodeName={node_name!r})")
            continue
        nlabels = node.get("metadata", {}).get("labels") or {}
        tpl_spec = _template_for(lws, pod).get("spec", {})
        want = dict(tpl_spec.get("nodeSelector") or {})
        if expect.gpu_product:
            want[labels.GPU_PRODUCT] = expect.gpu_product
        if expect.node_pool:
            want[labels.NODE_POOL] = expect.node_pool
        for key, value in sorted(want.items()):
            if nlabels.get(key) != value:
                problems.append(f"pod {name}: node {node_name} has {key}={nlabels.get(key)!r}, "
                                f"expected {value!r}")
        want_gpus = expect.gpus_per_pod if expect.gpus_per_pod is not None else _gpus(tpl_spec)
        got_gpus = _gpus(pod.get("spec", {}))
        if got_gpus != want_gpus:
            problems.append(f"pod {name}: requests {got_gpus} GPU(s), expected {want_gpus}")
        alloc = int((node.get("status", {}).get("allocatable") or {}).get(labels.GPU_RESOURCE, 0))
        if got_gpus > alloc:
            problems.append(f"pod {name}: needs {got_gpus} GPU(s) but node {node_name} has {alloc}")
        if topo_key:
            domains.setdefault(group, set()).add(nlabels.get(topo_key, "<unlabelled>"))
    if checked == 0:
        problems.append("no pods to check")
    if topo_key:
        owner: dict[str, str] = {}
        for group, doms in sorted(domains.items()):
            if len(doms) != 1 or "<unlabelled>" in doms:
                problems.append(f"group {group}: spans {topo_key} domains {sorted(doms)}, expected one")
                continue
            dom = next(iter(doms))
            if dom in owner:
                problems.append(f"groups {owner[dom]} and {group} share {topo_key}={dom} "
                                "(exclusive topology)")
            owner[dom] = group
    return problems
