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

The catalog's ``tensorParallelSize`` / ``pipelineParallelSize`` replace the choice (the one not set is
the smallest that fits); a TP x PP group larger than a node fills whole nodes, one pod per node
(``group_layout``). ``check_pool_capacity`` adds up the models of each pool: more nodes than the pool
has is an error unless the pool sets ``allowOvercommit``.
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


def group_layout(pool: NodePool, tp: int, pp: int) -> tuple[int, int]:
    """(pods per group, GPUs per pod) of a TP x PP group: one pod when it fits a node, else one pod per
    node, each with every GPU of its node."""
    gpus = tp * pp
    if gpus <= pool.gpusPerNode:
        return 1, gpus
    return gpus // pool.gpusPerNode, pool.gpusPerNode


@dataclass(frozen=True)
class Requested:
    """The catalog's tensorParallelSize / pipelineParallelSize of one role (None: the sizing chooses),
    with the field each was written in, for errors."""

    tp: int | None
    pp: int | None
    tp_field: str
    pp_field: str


def _place_requested(spec: ModelSpec, pool: NodePool, max_model_len: int,
                     req: Requested) -> tuple[int, int, str]:
    """(tp, pp, reason) honouring the catalog's parallelism; the one not set is the smallest that fits."""
    arch = spec.architecture
    per_gpu = pool.gpuMemoryGiB * spec.gpuMemoryUtilization
    label = f"{spec.parametersB:g}B {spec.dtype}"
    if req.tp is not None:
        if arch.attentionHeads % req.tp:
            raise InvalidInput(f"{req.tp} does not divide attentionHeads={arch.attentionHeads}",
                               field=req.tp_field)
        if arch.kvHeads % req.tp and req.tp % arch.kvHeads:
            raise InvalidInput(f"{req.tp} and kvHeads={arch.kvHeads}: one must divide the other",
                               field=req.tp_field)
        if req.tp > pool.gpusPerNode:
            raise InvalidInput(f"{req.tp} exceeds the {pool.gpusPerNode} GPUs per node of pool {pool.name} "
                               "(tensor parallelism stays within a node; pipelineParallelSize spreads a "
                               "group over nodes)", field=req.tp_field)
    if req.pp is not None and req.pp > arch.layers:
        raise InvalidInput(f"{req.pp} pipeline stages but the model has only {arch.layers} layers",
                           field=req.pp_field)
    where = req.pp_field if req.pp is not None else req.tp_field
    tps = [req.tp] if req.tp is not None else tp_candidates(spec, pool)
    pps = [req.pp] if req.pp is not None else list(range(1, arch.layers + 1))
    refusal: str | None = None
    largest: tuple[int, int] | None = None  # only one of tps/pps varies, upwards: the last fit is largest
    for tp in tps:
        for pp in pps:
            gpus = tp * pp
            what = f"tensorParallelSize {tp} x pipelineParallelSize {pp} = {gpus} GPUs"
            if gpus > pool.gpusPerNode and gpus % pool.gpusPerNode:
                refusal = refusal or (f"{what}: a group larger than one node fills whole nodes of pool "
                                      f"{pool.name} (a multiple of its {pool.gpusPerNode} GPUs per node)")
                continue
            nodes = math.ceil(gpus / pool.gpusPerNode)
            if nodes > pool.nodes:
                refusal = refusal or (f"{what} need {nodes} nodes per group but pool {pool.name} has "
                                      f"{pool.nodes}")
                break
            weights, kv = memory_needs(spec, max_model_len, tp)
            if weights + kv <= gpus * per_gpu:
                size, per_pod = group_layout(pool, tp, pp)
                return tp, pp, (f"{label}: {weights:.1f} GiB weights + {kv:.1f} GiB KV on TP={tp} x PP={pp} "
                                f"as the catalog asks ({gpus} x {per_gpu:g} GiB usable; {size} pod(s) of "
                                f"{per_pod} GPUs)")
            largest = (tp, pp)
    if largest is None:
        raise InvalidInput(refusal or "no layout fits", field=where)
    tp, pp = largest
    gpus = tp * pp
    weights, kv = memory_needs(spec, max_model_len, tp)
    searched = "" if req.tp is not None and req.pp is not None else "at most "
    raise InvalidInput(
        f"{searched}tensorParallelSize {tp} x pipelineParallelSize {pp} = {gpus} GPUs on pool {pool.name} "
        f"offer {gpus * per_gpu:.1f} GiB ({gpus} x {pool.gpuMemoryGiB:g} GiB x "
        f"{spec.gpuMemoryUtilization:g}) "
        f"but {label} needs {weights:.1f} GiB weights + {kv:.1f} GiB KV = {weights + kv:.1f} GiB; short by "
        f"{weights + kv - gpus * per_gpu:.1f} GiB", field=where)


def _place(spec: ModelSpec, pool: NodePool, max_model_len: int, where: str,
           req: Requested | None = None) -> tuple[int, int, str]:
    """(tp, pp, reason) for one group, or InvalidInput saying what is missing by how much."""
    if req is not None and (req.tp is not None or req.pp is not None):
        return _place_requested(spec, pool, max_model_len, req)
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


def _requested(catalog: Catalog, spec: ModelSpec, role: str, env: str | None) -> Requested:
    """The role's parallelism (its own, else the model's) and where each value was written."""
    rs = None if role == "aggregated" else (spec.prefill if role == "prefill" else spec.decode)
    ov = catalog.environment(env).overrides.get(spec.name) if env is not None else None
    ov_role = getattr(ov, role, None) if ov is not None and role != "aggregated" else None
    values: dict[str, int | None] = {}
    fields: dict[str, str] = {}
    for key in ("tensorParallelSize", "pipelineParallelSize"):
        own = getattr(rs, key, None) if rs is not None else None
        values[key] = own if own is not None else getattr(spec, key)
        if ov_role is not None and getattr(ov_role, key) is not None:
            fields[key] = f"environments[{env}].overrides.{spec.name}.{role}.{key}"
        elif own is not None:
            fields[key] = f"models[{spec.name}].{role}.{key}"
        else:
            fields[key] = f"models[{spec.name}].{key}"
    return Requested(values["tensorParallelSize"], values["pipelineParallelSize"],
                     fields["tensorParallelSize"], fields["pipelineParallelSize"])


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
    def size(self) -> int:
        return group_layout(self.pool, self.tp, self.pp)[0]

    @property
    def gpus_per_pod(self) -> int:
        return group_layout(self.pool, self.tp, self.pp)[1]

    @property
    def pods_per_node(self) -> int:
        return self.pool.gpusPerNode // self.gpus_per_pod

    def nodes_for(self, groups: int) -> int:
        """Nodes ``groups`` groups occupy: one pod per node across nodes, packed when a pod is smaller."""
        return math.ceil(groups * self.size / self.pods_per_node)


def size_model(catalog: Catalog, model: str, env: str | None = None) -> ModelSizing:
    """Size every role of ``model`` (with ``env``'s overrides when given); InvalidInput when it cannot fit."""
    spec = catalog.for_environment(model, env) if env is not None else catalog.model(model)
    where = f"models[{model}]"
    roles = ROLES_DISAGGREGATED if spec.disaggregated else ROLES_AGGREGATED
    placed: dict[str, _Placement] = {}
    for role in roles:
        pool_name, replicas, max_len = _role_inputs(spec, role)
        pool = catalog.pool(pool_name)
        tp, pp, reason = _place(spec, pool, max_len, where if role == "aggregated" else f"{where}.{role}",
                                _requested(catalog, spec, role, env))
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
                f"{replicas} replicas x {pl.size} node(s) per group need {nodes_total} nodes but pool "
                f"{pool.name} has {room}{shared}; short by {nodes_total - room} node(s)",
                field=_replicas_field(catalog, model, role, env))
        # Each role's budget resolves against its own replicas (DS roles roll out per role).
        surge, unavailable = check_rollout_budget(spec.rollout, replicas, rollout_where)
        with_surge = pl.nodes_for(replicas + surge)
        weights, kv = memory_needs(spec, pl.max_model_len, pl.tp)
        gpus = pl.tp * pl.pp
        usable = gpus * pool.gpuMemoryGiB * spec.gpuMemoryUtilization
        out[role] = RoleSizing(
            role=role, pool=pool.name, gpu=pool.gpu, tp=pl.tp, pp=pl.pp, size=pl.size,
            gpus_per_pod=pl.gpus_per_pod, gpus_per_replica=gpus, replicas=replicas,
            gpus_total=gpus * replicas,
            nodes_per_replica=round(pl.size / pl.pods_per_node, 3), nodes_total=nodes_total,
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


def pool_usage(catalog: Catalog, sizings: list[ModelSizing]) -> list[dict[str, Any]]:
    """Nodes each pool's models need together (models are packed separately: an upper bound), with
    the models that need them, in catalog order."""
    out: list[dict[str, Any]] = []
    for pool in catalog.nodePools:
        models: dict[str, int] = {}
        for ms in sizings:
            for rs in ms.roles.values():
                if rs.pool == pool.name:
                    models[ms.model] = models.get(ms.model, 0) + rs.nodes_total
        used = sum(models.values())
        out.append({"pool": pool.name, "nodes": pool.nodes, "nodes_used": used, "fits": used <= pool.nodes,
                    "allow_overcommit": pool.allowOvercommit, "models": models})
    return out


def check_pool_capacity(catalog: Catalog, sizings: list[ModelSizing], env: str | None = None) -> None:
    """InvalidInput naming the pool and its models when they need more nodes than it has together,
    unless the pool sets ``allowOvercommit: true``."""
    for usage in pool_usage(catalog, sizings):
        if usage["fits"] or usage["allow_overcommit"]:
            continue
        who = ", ".join(f"{m} {n}" for m, n in usage["models"].items())
        in_env = f" in environment {env}" if env is not None else ""
        short = usage["nodes_used"] - usage["nodes"]
        raise InvalidInput(
            f"pool {usage['pool']} has {usage['nodes']} nodes but its models need {usage['nodes_used']} "
            f"together{in_env} ({who}); short by {short} node{'s' if short > 1 else ''}: lower replicas, "
            "add nodes, or set allowOvercommit: true on the pool", field=f"nodePools[{usage['pool']}].nodes")
