"""Check 3 (exclusive placement): the ``leaderworkerset.sigs.k8s.io/exclusive-topology`` annotation
(lws-semantics §b "Annotations on the LWS object"): the upstream pod webhook gives each leader a
required podAffinity on its own group key and a required podAntiAffinity against other group keys
over the topology key, the worker StatefulSet is created only once the leader is scheduled, with a
nodeSelector on the leader's domain, and the real kube-scheduler places one group per domain.

Five groups of two whole-node (8-GPU) pods on the H100 pool's four topology blocks (4 nodes each: room
for two groups per block without the annotation): four groups placed, one per block, and one leader
left Pending (no workers created); scaled to four, every group placed, one per block. Compared on both
clusters: pod -> block placement normalised to its shape (which blocks are distinct, not their names,
which the schedulers' scoring picks), the leaders' injected affinity, the workers' nodeSelector, and
which pods stay Pending and why.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from clusters import Target, settle

from lwsflow.controller.api import labels as L
from lwsflow.controller.yamlio import dump_yaml
from lwsflow.sim.config import GKE_ACCELERATOR, GPU_TOPOLOGY_KEY

NAME = "excl"
STABLE_S = 3.0


def manifest(replicas: int) -> dict[str, Any]:
    return {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
            "metadata": {"name": NAME, "annotations": {L.EXCLUSIVE_TOPOLOGY: GPU_TOPOLOGY_KEY}},
            "spec": {"replicas": replicas, "leaderWorkerTemplate": {"size": 2, "workerTemplate": {"spec": {
                "nodeSelector": {GKE_ACCELERATOR: "nvidia-h100-80gb"},
                "tolerations": [{"key": L.GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}],
                "containers": [{"name": "engine", "image": "engine:v1",
                                "resources": {"limits": {L.GPU_RESOURCE: "8"}}}]}}}}}


def _normal_affinity(affinity: dict[str, Any] | None, key: str) -> str:
    """The injected affinity with the group's own key written ``<own>``."""
    return json.dumps(affinity or {}, sort_keys=True).replace(key, "<own>") if key else json.dumps(affinity)


def placement(t: Target, ns: str) -> dict[str, Any]:
    """Groups -> blocks, Pending pods and why, the leaders' affinity and the workers' nodeSelector."""
    domain = {n["metadata"]["name"]: (n["metadata"].get("labels") or {}).get(GPU_TOPOLOGY_KEY)
              for n in t.items("nodes", "")}
    groups: dict[str, set[str]] = {}
    pending, affinity, selector_ok = [], set(), []
    pods = t.items("pods", ns)
    for pod in pods:
        md, spec = pod["metadata"], pod["spec"]
        labels = md.get("labels") or {}
        group = labels.get(L.GROUP_INDEX, "?")
        leader = labels.get(L.WORKER_INDEX) == "0"
        if leader:
            affinity.add(_normal_affinity(spec.get("affinity"), labels.get(L.GROUP_KEY, "")))
        node = spec.get("nodeName")
        if node:
            groups.setdefault(group, set()).add(str(domain.get(node)))
        else:
            cond = next((c for c in (pod.get("status") or {}).get("conditions") or []
                         if c["type"] == "PodScheduled"), {})
            pending.append(("leader" if leader else "worker", cond.get("reason"), group))
        if not leader:
            leader_node = next((p["spec"].get("nodeName") for p in pods
                                if p["metadata"]["name"] == md["name"].rsplit("-", 1)[0]), None)
            block = (spec.get("nodeSelector") or {}).get(GPU_TOPOLOGY_KEY)
            selector_ok.append(block is not None and block == domain.get(leader_node))
    per_group = sorted(len(d) for d in groups.values())
    blocks = [next(iter(d)) for d in groups.values() if len(d) == 1]
    return {"pods": len(pods), "groups placed": len(groups), "blocks per group": per_group,
            "distinct blocks": len(set(blocks)), "pending": sorted(p[:2] for p in pending),
            "leader affinity": sorted(affinity), "workers on the leader's block": all(selector_ok),
            "pending groups": sorted({p[2] for p in pending})}


def settled(t: Target, ns: str, bound: int, pending: int, timeout: float = 90) -> dict[str, Any]:
    """The placement once ``bound`` pods are bound and ``pending`` wait, and then nothing changed for
    STABLE_S seconds."""
    return settle(f"[{t.name}] placement", lambda: placement(t, ns), STABLE_S, timeout,
                  until=lambda p: (p["pods"] - len(p["pending"]), len(p["pending"])) == (bound, pending))


def _run(t: Target, ns: str) -> list[dict[str, Any]]:
    t.kubectl("create", "namespace", ns)
    t.kubectl("apply", "--server-side", "-n", ns, "-f", "-", stdin=dump_yaml(manifest(5)))
    crowded = settled(t, ns, bound=8, pending=1)
    t.kubectl("scale", f"lws/{NAME}", "-n", ns, "--replicas=4")
    room = settled(t, ns, bound=8, pending=0)
    t.kubectl("delete", "namespace", ns, "--wait=false")  # free the H100 pool for later checks
    return [crowded, room]


def test_exclusive_placement_one_group_per_block(reference: Target, embedded: Target) -> None:
    ns = "exclusive"
    with ThreadPoolExecutor(2) as pool:
        ref_f, emb_f = (pool.submit(_run, t, ns) for t in (reference, embedded))
        ref, emb = ref_f.result(), emb_f.result()
    trace = json.dumps({"reference": ref, "embedded": emb}, indent=1, default=str)
    crowded, room = ref
    # what lws-semantics §b and the scheduler's affinity rules fix, on the reference cluster itself
    assert crowded["groups placed"] == 4 and crowded["blocks per group"] == [1, 1, 1, 1], trace
    assert crowded["distinct blocks"] == 4 and len(crowded["pending"]) == 1, trace
    assert crowded["pending"] == [("leader", "Unschedulable")], trace
    assert room["groups placed"] == 4 and room["distinct blocks"] == 4 and not room["pending"], trace
    # which of the five groups waits is the schedulers' queue order (all leaders are created at once)
    waited = {t: r[0].pop("pending groups") for t, r in (("reference", ref), ("embedded", emb))}
    print(f"\ngroup left Pending: {waited}")
    for r in (ref, emb):
        r[1].pop("pending groups")
    assert ref == emb, trace
