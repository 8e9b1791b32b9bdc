"""Pod templates for engine pods: placement, GPUs, probes, volumes, env (secrets only by reference).

Choices worth knowing:

* Startup probe budget = ``ENGINE_INIT_S`` + weights / ``LOAD_BANDWIDTH_GIB_S``: every node pulls the
  whole checkpoint (hub download or cache volume read, 0.5 GiB/s is a conservative shared-uplink
  figure) and then builds the engine (CUDA graphs, NCCL/Ray init). Readiness and liveness start
  only after the startup probe passed, so they can stay tight.
* CPU and memory requests are the pod's GPU share of the node, less 20 % for system daemons; the
  memory limit equals the request so an engine cannot starve its neighbours on a shared node.
* ``/dev/shm`` is a memory-backed emptyDir (NCCL and the engines' IPC need more than the runtime's
  64 MiB default), 2 GiB per GPU, at least 8 GiB.
* The model cache is a per-pod PVC from ``volumeClaimTemplates`` when the catalog asks for one,
  else an emptyDir sized for the checkpoint; ``HF_HOME`` points the engines at it.
* Single-pod groups smaller than a node get a soft spread over hostnames, so replicas do not all
  share one node when the pool has room.
* No privileged containers, no host networking, no hostPath; privilege escalation is off.
"""

from __future__ import annotations

import math
from typing import Any

from lwsflow.components.catalog import ModelSpec, NodePool, looks_secret
from lwsflow.components.engines import HEALTH_PATH, Launch
from lwsflow.components.sizing import RoleSizing
from lwsflow.controller.api import labels as L
from lwsflow.controller.errors import InvalidInput

LOAD_BANDWIDTH_GIB_S = 0.5
ENGINE_INIT_S = 300
STARTUP_PERIOD_S = 10
PROBE_TIMEOUT_S = {"vllm": 5, "sglang": 25}  # SGLang's /health runs a 1-token generation (20 s timeout)
SYSTEM_RESERVE = 0.8
CACHE_MOUNT = "/model-cache"
CACHE_VOLUME = "model-cache"
SHM_VOLUME = "dshm"


def startup_failure_threshold(weights_gib: float) -> int:
    """Startup probe attempts (every ``STARTUP_PERIOD_S``) that cover loading ``weights_gib``."""
    budget = ENGINE_INIT_S + weights_gib / LOAD_BANDWIDTH_GIB_S
    return math.ceil(budget / STARTUP_PERIOD_S)


def pod_labels(spec: ModelSpec, role: str, pool: str) -> dict[str, str]:
    """lwsflow's labels on every pod template (and, with PD_PAIR where it applies, on the LWS)."""
    return {L.APP_NAME: spec.name, L.APP_PART_OF: "lwsflow", L.ENGINE: spec.engine, L.MODEL: spec.name,
            L.NODE_POOL: pool, L.ROLE: role}


def _resources(pool: NodePool, rs: RoleSizing) -> dict[str, Any]:
    share = rs.gpus_per_pod / pool.gpusPerNode
    cpu = max(1, math.floor(pool.cpuPerNode * share * SYSTEM_RESERVE))
    mem = f"{max(1, math.floor(pool.memoryGiBPerNode * share * SYSTEM_RESERVE))}Gi"
    gpus = str(rs.gpus_per_pod)
    return {"requests": {"cpu": str(cpu), "memory": mem, pool.gpuResource: gpus},
            "limits": {"memory": mem, pool.gpuResource: gpus}}


def _env(spec: ModelSpec, launch: Launch) -> list[dict[str, Any]]:
    env: list[dict[str, Any]] = [*launch.env, {"name": "HF_HOME", "value": CACHE_MOUNT}]
    if spec.hfTokenSecret is not None:
        ref = spec.hfTokenSecret
        env.append({"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": ref.name, "key": ref.key}}})
    for e in spec.env:
        if e.secretKeyRef is not None:
            ref = e.secretKeyRef
            env.append({"name": e.name, "valueFrom": {"secretKeyRef": {"name": ref.name, "key": ref.key}}})
        else:
            env.append({"name": e.name, "value": e.value})
    return env


def _probes(spec: ModelSpec, rs: RoleSizing) -> dict[str, Any]:
    get = {"httpGet": {"path": HEALTH_PATH[spec.engine], "port": "http"},
           "timeoutSeconds": PROBE_TIMEOUT_S[spec.engine]}
    return {
        "startupProbe": {**get, "periodSeconds": STARTUP_PERIOD_S,
                         "failureThreshold": startup_failure_threshold(rs.weights_gib)},
        "readinessProbe": {**get, "periodSeconds": 10, "failureThreshold": 3},
        "livenessProbe": {**get, "periodSeconds": 30, "failureThreshold": 5},
    }


def pod_template(spec: ModelSpec, rs: RoleSizing, pool: NodePool, launch: Launch,
                 extra_labels: dict[str, str] | None = None, *, port: int | None = None,
                 sidecars: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The PodTemplateSpec of one role's leader or worker pods; ``port``: where its engine serves when
    not on the model's port; ``sidecars``: native sidecars (init containers with restartPolicy Always)."""
    container: dict[str, Any] = {
        "name": spec.engine,
        "image": spec.image,
        "imagePullPolicy": "IfNotPresent",
        "command": list(launch.command),
        "args": list(launch.args),
        "env": _env(spec, launch),
    }
    if launch.ports:
        container["ports"] = list(launch.ports)
    container["resources"] = _resources(pool, rs)
    if launch.serves_http:
        container.update(_probes(spec, rs))
    container["volumeMounts"] = [{"name": SHM_VOLUME, "mountPath": "/dev/shm"},
                                 {"name": CACHE_VOLUME, "mountPath": CACHE_MOUNT}]
    container["securityContext"] = {"allowPrivilegeEscalation": False, "privileged": False}

    shm = f"{max(8, 2 * rs.gpus_per_pod)}Gi"
    volumes: list[dict[str, Any]] = [{"name": SHM_VOLUME, "emptyDir": {"medium": "Memory", "sizeLimit": shm}}]
    if spec.modelCache is None:
        volumes.append({"name": CACHE_VOLUME,
                        "emptyDir": {"sizeLimit": f"{math.ceil(rs.weights_gib * 1.1) + 10}Gi"}})
    pod_spec: dict[str, Any] = {}
    if spec.gangScheduling is not None:
        pod_spec["schedulerName"] = spec.gangScheduling.provider
    pod_spec["enableServiceLinks"] = False
    pod_spec["nodeSelector"] = dict(sorted({**pool.nodeSelector, L.GPU_PRODUCT: pool.gpu}.items()))
    if pool.tolerations:
        pod_spec["tolerations"] = [t.model_dump(exclude_none=True) for t in pool.tolerations]
    if rs.size == 1 and rs.gpus_per_pod < pool.gpusPerNode:
        # Several single-pod groups fit one node; prefer spreading them so one node failure does not
        # take every replica (soft: packing is still allowed when the pool is tight).
        pod_spec["topologySpreadConstraints"] = [{
            "maxSkew": 1, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "ScheduleAnyway",
            "labelSelector": {"matchLabels": {L.MODEL: spec.name, L.ROLE: rs.role}}}]
    pod_spec["securityContext"] = {"seccompProfile": {"type": "RuntimeDefault"}}
    pod_spec["terminationGracePeriodSeconds"] = 60
    if sidecars:
        pod_spec["initContainers"] = sidecars
    pod_spec["containers"] = [container]
    pod_spec["volumes"] = volumes
    labels = {**pod_labels(spec, rs.role, pool.name), **(extra_labels or {})}
    return {
        "metadata": {
            "labels": dict(sorted(labels.items())),
            "annotations": {L.SERVED_MODEL: spec.model, L.SERVING_PORT: str(port or spec.port)},
        },
        "spec": pod_spec,
    }


def volume_claim_templates(spec: ModelSpec) -> list[dict[str, Any]]:
    """The model-cache PVC template (one claim per pod) when the catalog sets ``modelCache``."""
    if spec.modelCache is None:
        return []
    claim: dict[str, Any] = {"accessModes": ["ReadWriteOnce"],
                             "resources": {"requests": {"storage": spec.modelCache.size}}}
    if spec.modelCache.storageClassName:
        claim["storageClassName"] = spec.modelCache.storageClassName
    return [{"metadata": {"name": CACHE_VOLUME}, "spec": claim}]


def assert_no_secret_literals(objs: list[dict[str, Any]]) -> None:
    """Defence in depth: refuse rendered output where a secret-looking env name has a literal value."""
    # The path is spelled out only for the error: the walk carries the parts, the path's last four
    # characters and whether ".env[" occurred yet (every render runs this over every node).
    def walk(node: Any, parts: list[str], tail: str, in_env: bool) -> None:
        if isinstance(node, dict):
            name, value = node.get("name"), node.get("value")
            if in_env and isinstance(name, str) and isinstance(value, str) and looks_secret(name):
                raise InvalidInput(f"env {name!r} would carry a literal value; use a secretKeyRef",
                                   field="".join(parts))
            for k, v in node.items():
                step(v, f".{k}" if parts else str(k), parts, tail, in_env)
        elif isinstance(node, list):
            for i, v in enumerate(node):
                step(v, f"[{i}]", parts, tail, in_env)

    def step(node: Any, seg: str, parts: list[str], tail: str, in_env: bool) -> None:
        if not isinstance(node, dict | list):
            return
        joined = tail + seg
        parts.append(seg)
        walk(node, parts, joined[-4:], in_env or ".env[" in joined)
        parts.pop()

    for obj in objs:
        root = f"{obj.get('kind')}/{obj.get('metadata', {}).get('name')}"
        walk(obj, [root], root[-4:], ".env[" in root)
