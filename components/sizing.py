"""GPU sizing: from a catalog model to tensor/pipeline parallelism, group size and pool usage.

Memory model (per group = one LeaderWorkerSet replica):

* weights    = parametersB x 1e9 x bytes per dtype (``catalog.BYTES_PER_PARAM``), in GiB (2^30 bytes);
* KV reserve = 2 (K and V) x layers x kvHeads x headDim x KV bytes x maxModelLen x
  ``KV_CONCURRENT_SEQUENCES``. The KV cache stays 16-bit for quantized weights (the engines'
  ``kv-cache-dtype=auto`` follows the activation dtype), so KV bytes are 2 (4 for fp32). When TP
  exceeds kvHeads every rank keeps a full copy of its heads, so the reserve grows by tp/kvHeads;
* usable     = GPUs in the group x gpuMemoryGiB x gpuMemoryUtilization (what the engine may
  allocate; the rest is CUDA context, activations and fragmentation).

Choice: the fewest nodes first; within one node the smallest TP (a power of two <= gpusPerNode
dividing attentionHeads) that fits; across nodes TP fills each node (TP = gpusPerNode) and PP =
nodes per group, one pod per node (``size`` = PP). Weights are assumed to split evenly over the
group's GPUs. Anything that cannot work raises ``InvalidInput`` naming the field and the shortfall.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from lwsflow.components.catalog import BYTES_PER_PARAM, Catalog, ModelSpec, NodePool, RolloutSettings
from lwsflow.controller.api import intstr
from lwsflow.controller.errors import InvalidInput

GIB = 1024**3
# Concurrent full-length sequences the KV reserve must hold: enough for the engine to start and
# serve a handful of long requests at once; the rest of the headroom becomes extra KV blocks.
KV_CONCURRENT_SEQUENCES = 8
ROLES_AGGREGATED = ("aggregated",)
ROLES_DISAGGREGATED = ("prefill", "decode")


@dataclass(frozen=True)
class RoleSizing:
    """How one role (``aggregated``, ``prefill`` or ``decode``) of a model is laid out on its pool."""

    role: str
    pool: str
    gpu: str
    tp: int
    pp: int
    size: int  # pods per group (one pod per node when the group spans nodes)
    gpus_per_pod: int
    gpus_per_replica: int
    replicas: int
    gpus_total: int
    nodes_per_replica: float  # fractional when several single-pod groups share a node
    nodes_total: int
    pool_nodes: int  # nodes of the pool left for this role (the model's other roles subtracted)
    max_model_len: int
    weights_gib: float
    kv_reserve_gib: float
    memory_needed_gib: float
    memory_usable_gib: float
    memory_headroom_gib: float
    max_surge: int  # resolved against replicas (rounded up, capped at replicas)
    max_unavailable: int  # resolved against replicas (rounded down)
    nodes_with_surge: int
    fits_with_surge: bool
    reason: str


@dataclass(frozen=True)
class ModelSizing:
    """Sizing of every role of one model, as it runs in ``env`` (None: the catalog's base values)."""

    model: str
    served_model: str
    engine: str
    mode: str  # aggregated | disaggregatedset | lws-pair
    env: str | None
    roles: dict[str, RoleSizing] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _gib(nbytes: float) -> float:
    return nbytes / GIB


def _r(x: float) -> float:
    return round(x, 1)


def tp_candidates(spec: ModelSpec, pool: NodePool) -> list[int]:
    """Tensor-parallel sizes the engines accept here: powers of two <= gpusPerNode dividing the heads."""
    arch = spec.architecture
    out: list[int] = []
    tp = 1
    while tp <= pool.gpusPerNode:
        kv_ok = arch.kvHeads % tp == 0 or tp % arch.kvHeads == 0
        if arch.attentionHeads % tp == 0 and kv_ok:
            out.append(tp)
        tp *= 2
    return out


def memory_needs(spec: ModelSpec, max_model_len: int, tp: int) -> tuple[float, float]:
    """(weights GiB, KV reserve GiB) of one group running at tensor-parallel size ``tp``."""
    arch = spec.architecture
    weights = _gib(spec.parametersB * 1e9 * BYTES_PER_PARAM[spec.dtype])
    kv_bytes = 4 if spec.dtype == "fp32" else 2
    per_token = 2 * arch.layers * arch.kvHeads * arch.headDim * kv_bytes
    replication = max(1.0, tp / arch.kvHeads)
    kv = _gib(per_token * max_model_len * KV_CONCURRENT_SEQUENCES) * replication
    return weights, kv


def _place(spec: ModelSpec, pool: NodePool, max_model_len: int, where: str) -> tuple[int, int, str]:
    """(tp, pp, reason) for one group, or InvalidInput saying what is missing by how much."""
    per_gpu = pool.gpuMemoryGiB * spec.gpuMemoryUtilization
    cands = tp_candidates(spec, pool)
    label = f"{spec.parametersB:g}B {spec.dtype}"
    for tp in cands:
        weights, kv = memory_needs(spec, max_model_len, tp)
        if weights + kv <= tp * per_gpu:
            return tp, 1, (f"{label}: {weights:.1f} GiB weights + {kv:.1f} GiB KV fit TP={tp} "
                           f"on one node ({tp} x {per_gpu:g} GiB usable)")
    node_tp = pool.gpusPerNode
    arch = spec.architecture
    if node_tp not in cands:
        best = cands[-1]
        weights, kv = memory_needs(spec, max_model_len, best)
        raise InvalidInput(
            f"needs {weights + kv:.1f} GiB ({weights:.1f} GiB weights + {kv:.1f} GiB KV) but the largest "
            f"tensor-parallel size dividing attentionHeads={arch.attentionHeads} and kvHeads={arch.kvHeads} "
            f"is {best} ({best} x {per_gpu:g} GiB = {best * per_gpu:.1f} GiB; short by "
            f"{weights + kv - best * per_gpu:.1f} GiB), and a multi-node group needs TP = "
            f"gpusPerNode={node_tp}", field=f"{where}.architecture.attentionHeads")
    weights, kv = memory_needs(spec, max_model_len, node_tp)
    need = weights + kv
    node_offer = node_tp * per_gpu
    nodes = math.ceil(need / node_offer - 1e-9)
    if nodes > pool.nodes:
        offer = pool.nodes * node_offer
        raise InvalidInput(
            f"needs {weights:.1f} GiB of weights + {kv:.1f} GiB KV = {need:.1f} GiB; one group of the "
            f"largest possible size (pool {pool.name}: {pool.nodes} nodes x {node_tp} x "
            f"{pool.gpuMemoryGiB:g} GiB x {spec.gpuMemoryUtilization:g}) offers {offer:.1f} GiB; "
            f"short by {need - offer:.1f} GiB (a group would need {nodes} nodes)",
            field=f"{where}.nodePool")
    if nodes > arch.layers:
        raise InvalidInput(f"needs {nodes} pipeline stages but the model has only {arch.layers} layers",
                           field=f"{where}.architecture.layers")
    return node_tp, nodes, (f"{label}: {weights:.1f} GiB weights + {kv:.1f} GiB KV exceed one node "
                            f"({node_offer:.1f} GiB usable); {nodes} nodes x TP={node_tp} (PP={nodes})")


def _role_inputs(spec: ModelSpec, role: str) -> tuple[str, int, int]:
    """(pool name, replicas, maxModelLen) of one role."""
    if role == "aggregated":
        return spec.nodePool, int(spec.replicas or 0), spec.maxModelLen
    rs = spec.prefill if role == "prefill" else spec.decode
    assert rs is not None
    return rs.nodePool or spec.nodePool, rs.replicas, rs.maxModelLen or spec.maxModelLen


def _replicas_field(catalog: Catalog, model: str, role: str, env: str | None) -> str:
    """Where the role's replica count was written: the environment override when it set one."""
    sub = "replicas" if role == "aggregated" else f"{role}.replicas"
    if env is not None:
        ov = catalog.environment(env).overrides.get(model)
        key = "replicas" if role == "aggregated" else role
        if ov is not None and getattr(ov, key) is not None:
            return f"environments[{env}].overrides.{model}.{sub}"
    return f"models[{model}].{sub}"


def _rollout_field(catalog: Catalog, model: str, env: str | None) -> str:
    if env is not None:
        ov = catalog.environment(env).overrides.get(model)
        if ov is not None and ov.rollout is not None:
            return f"environments[{env}].overrides.{model}.rollout"
    return f"models[{model}].rollout"


def check_rollout_budget(rollout: RolloutSettings, replicas: int, where: str) -> tuple[int, int]:
    """Resolved (maxSurge, maxUnavailable); both 0 with replicas > 0 is what the LWS/DS webhooks refuse."""
    surge = intstr.max_surge(rollout.maxSurge, replicas)
    unavailable = intstr.max_unavailable(rollout.maxUnavailable, replicas)
    if replicas > 0 and surge == 0 and unavailable == 0:
        raise InvalidInput(f"maxUnavailable={rollout.maxUnavailable!r} and maxSurge={rollout.maxSurge!r} "
                           f"both resolve to 0 for {replicas} replicas: a rolling update could never "
                           f"make progress", field=f"{where}.maxUnavailable")
    return surge, unavailable


@dataclass(frozen=True)
class _Placement:
    """One role's group layout before the pool-capacity checks."""

    pool: NodePool
    replicas: int
    max_model_len: int
    tp: int
    pp: int
    reason: str

    @property
    def pods_per_node(self) -> int:
        return self.pool.gpusPerNode // self.tp

    def nodes_for(self, groups: int) -> int:
        """Nodes ``groups`` groups occupy: one pod per node across nodes, packed when a pod is smaller."""
        return math.ceil(groups * self.pp / self.pods_per_node)


def size_model(catalog: Catalog, model: str, env: str | None = None) -> ModelSizing:
    """Size every role of ``model`` (with ``env``'s overrides when given); InvalidInput when it cannot fit."""
    spec = catalog.for_environment(model, env) if env is not None else catalog.model(model)
    where = f"models[{model}]"
    roles = ROLES_DISAGGREGATED if spec.disaggregated else ROLES_AGGREGATED
    placed: dict[str, _Placement] = {}
    for role in roles:
        pool_name, replicas, max_len = _role_inputs(spec, role)
        pool = catalog.pool(pool_name)
        tp, pp, reason = _place(spec, pool, max_len, where if role == "aggregated" else f"{where}.{role}")
        placed[role] = _Placement(pool, replicas, max_len, tp, pp, reason)

    if spec.disaggregated and spec.pdMode == "disaggregatedset":
        counts = [pl.replicas for pl in placed.values()]
        if 0 in counts and any(counts):
            # the DisaggregatedSet CRD's CEL rule: all roles scaled to zero, or none
            zero_role = "prefill" if counts[0] == 0 else "decode"
            raise InvalidInput("a DisaggregatedSet needs replicas > 0 in every role, or 0 in all of them",
                               field=_replicas_field(catalog, model, zero_role, env))
    rollout_where = _rollout_field(catalog, model, env)
    out: dict[str, RoleSizing] = {}
    for role, pl in placed.items():
        pool, replicas = pl.pool, pl.replicas
        nodes_total = pl.nodes_for(replicas)
        others = sum(o.nodes_for(o.replicas) for r, o in placed.items()
                     if r != role and o.pool.name == pool.name)
        room = pool.nodes - others
        if nodes_total > room:
            shared = f" ({others} taken by the model's other role)" if others else ""
            raise InvalidInput(
                f"{replicas} replicas x {pl.pp} node(s) per group need {nodes_total} nodes but pool "
                f"{pool.name} has {room}{shared}; short by {nodes_total - room} node(s)",
                field=_replicas_field(catalog, model, role, env))
        # Each role's budget resolves against its own replicas (DS roles roll out per role).
        surge, unavailable = check_rollout_budget(spec.rollout, replicas, rollout_where)
        with_surge = pl.nodes_for(replicas + surge)
        weights, kv = memory_needs(spec, pl.max_model_len, pl.tp)
        gpus = pl.tp * pl.pp
        usable = gpus * pool.gpuMemoryGiB * spec.gpuMemoryUtilization
        out[role] = RoleSizing(
            role=role, pool=pool.name, gpu=pool.gpu, tp=pl.tp, pp=pl.pp, size=pl.pp, gpus_per_pod=pl.tp,
            gpus_per_replica=gpus, replicas=replicas, gpus_total=gpus * replicas,
            nodes_per_replica=round(pl.pp / pl.pods_per_node, 3), nodes_total=nodes_total,
            pool_nodes=room, max_model_len=pl.max_model_len, weights_gib=_r(weights),
            kv_reserve_gib=_r(kv), memory_needed_gib=_r(weights + kv), memory_usable_gib=_r(usable),
            memory_headroom_gib=_r(usable - weights - kv), max_surge=surge, max_unavailable=unavailable,
            nodes_with_surge=with_surge, fits_with_surge=with_surge <= room, reason=pl.reason)
    mode = spec.pdMode if spec.disaggregated else "aggregated"
    return ModelSizing(model=spec.name, served_model=spec.model, engine=spec.engine, mode=mode, env=env,
                       roles=out)


def size_catalog(catalog: Catalog, env: str | None = None) -> list[ModelSizing]:
    """``size_model`` for every model, in catalog order."""
    return [size_model(catalog, m.name, env) for m in catalog.models]
