"""An embedded-cluster config that can run a catalog's pods: one simulated pool per catalog node pool.

The renderer pins every GPU pod to its pool with the pool's ``nodeSelector`` plus
``nvidia.com/gpu.product: <gpu>`` and gives it the pool's tolerations; a simulated pool built here
carries exactly those labels, a taint for each toleration (so only the catalog's pods land on it,
as on a real tainted GPU pool), the pool's topology key and its CPU/memory per node. Used by
``lwsflow sim serve --catalog`` and by the local pipeline stack (``lwsflow.rehearsal.local_run``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lwsflow.sim.config import ClusterConfig, PoolConfig, Taint

if TYPE_CHECKING:
    from lwsflow.components.catalog import Catalog, NodePool

CPU_POOL = "cpu"
# Enough CPU nodes for plain pods (Services' samples, the nginx LWS examples): the catalog has none.
CPU_NODES, CPU_PER_NODE, MEMORY_GI_PER_NODE = 2, 32, 128
# A catalog names the topology key but not how many domains a pool spans; four blocks lets an
# exclusive-topology model place up to four groups, enough for the example catalog's replicas.
TOPOLOGY_DOMAINS = 4


def taints_for(pool: NodePool) -> list[Taint]:
    """One taint per keyed toleration: ``Equal`` tolerations carry their value, ``Exists`` any value.

    A toleration without an effect tolerates every effect, so ``NoSchedule`` stands in for it; one
    without a key tolerates every taint and needs none.
    """
    taints: list[Taint] = []
    for t in pool.tolerations:
        if not t.key:
            continue
        value = (t.value or "") if t.operator == "Equal" else ""
        taint = Taint(key=t.key, value=value, effect=t.effect or "NoSchedule")
        if taint not in taints:
            taints.append(taint)
    return taints


def pool_config_for(pool: NodePool, topology_domains: int = TOPOLOGY_DOMAINS) -> PoolConfig:
    """The simulated twin of one catalog node pool (labels, GPU product, taints, size, topology)."""
    return PoolConfig(
        name=pool.name,
        count=pool.nodes,
        gpus_per_node=pool.gpusPerNode,
        gpu_product=pool.gpu,  # the renderer selects nvidia.com/gpu.product = the catalog's value
        cpu=pool.cpuPerNode,
        memory_gi=pool.memoryGiBPerNode,
        labels=dict(pool.nodeSelector),
        taints=taints_for(pool),
        topology_key=pool.topologyKey,
        topology_domains=max(1, min(topology_domains, pool.nodes)) if pool.topologyKey else 1,
    )


def cluster_config_for(catalog: Catalog, never_ready: list[str] | None = None,
                       serve_engines: bool = False) -> ClusterConfig:
    """A CPU pool plus the catalog's GPU pools; ``never_ready``: image patterns that never get Ready."""
    gpu_pools = [pool_config_for(p) for p in catalog.nodePools]
    cpu_name = CPU_POOL if all(p.name != CPU_POOL for p in gpu_pools) else f"lwsflow-{CPU_POOL}"
    pools = [PoolConfig(name=cpu_name, count=CPU_NODES, cpu=CPU_PER_NODE, memory_gi=MEMORY_GI_PER_NODE),
             *gpu_pools]
    return ClusterConfig(pools=pools, never_ready_images=list(never_ready or []), serve_engines=serve_engines)


def secret_refs(cat: Catalog) -> list[tuple[str, str, str]]:
    """(namespace, Secret name, key) for every Secret the catalog's pods read, in every environment's
    namespace: the Secrets a cluster must hold before those pods can start (a kubelet leaves a pod
    with a missing one in CreateContainerConfigError)."""
    refs = {(m.hfTokenSecret.name, m.hfTokenSecret.key) for m in cat.models if m.hfTokenSecret}
    refs |= {(e.secretKeyRef.name, e.secretKeyRef.key) for m in cat.models for e in m.env if e.secretKeyRef}
    namespaces = {env.namespace or cat.namespace for env in cat.environments}
    return sorted((ns, name, key) for ns in namespaces for name, key in refs)
