"""The TPU environment the LWS pod webhook gives pods requesting ``google.com/tpu`` (upstream
``pkg/utils/accelerators/tpu.go``, lws-semantics.md §b), so that a TPU manifest's pods look here as
on a real cluster (the conformance tier compared them: tests/conformance/allowlist.yaml).

The containers requesting TPUs (containers, then init containers; a limit, else a request, not
zero) each get ``TPU_WORKER_HOSTNAMES`` (the group's hosts, one per TPU container: the leader's
when it requests TPUs itself, then workers 1..size-1, ``<leader>[-<i>].<subdomain>``),
``TPU_WORKER_ID`` (the pod's index among the TPU hosts times the number of its TPU containers, plus
the container's position), ``TPU_NAME`` (the leader's name), ``TPU_PROCESS_ADDRESSES`` (each host
with its port) and ``TPU_PROCESS_PORT`` when the container sets none (8476, plus the container's
position). With a sub-group policy the hosts are those of the pod's sub-group. A pod whose first
TPU container already names ``TPU_WORKER_HOSTNAMES`` or ``TPU_WORKER_ID`` is left alone. The
worker StatefulSet's pods carry ``leader-requests-tpus: "true"`` when the leader requests TPUs.
"""

from __future__ import annotations

from typing import Any

from lwsflow.controller.api import labels as L
from lwsflow.sim.podutil import mem_bytes

TPU = "google.com/tpu"
LEADER_REQUESTS_TPUS = "leaderworkerset.sigs.k8s.io/leader-requests-tpus"
SUBGROUP_SIZE = "leaderworkerset.sigs.k8s.io/subgroup-size"
DEFAULT_PORT = 8476


def _tpus(container: dict[str, Any]) -> bool:
    res = container.get("resources") or {}
    for kind in ("limits", "requests"):
        value = (res.get(kind) or {}).get(TPU)
        if value is not None and mem_bytes(value) != 0:  # any quantity; only zero or not matters
            return True
    return False


def tpu_containers(spec: dict[str, Any]) -> list[dict[str, Any]]:
    return [c for c in [*(spec.get("containers") or []), *(spec.get("initContainers") or [])] if _tpus(c)]


def requests_tpus(spec: dict[str, Any]) -> bool:
    return bool(tpu_containers(spec))


def _env(container: dict[str, Any], name: str) -> str | None:
    return next((e.get("value", "") for e in container.get("env") or [] if e.get("name") == name), None)


def add_tpu_variables(pod: dict[str, Any]) -> None:
    """Append the TPU variables to the pod's TPU containers (see the module docstring)."""
    spec, meta = pod["spec"], pod["metadata"]
    containers = tpu_containers(spec)
    if not containers or any(_env(containers[0], n) is not None
                             for n in ("TPU_WORKER_HOSTNAMES", "TPU_WORKER_ID")):
        return
    labels, ann = meta.get("labels") or {}, meta.get("annotations") or {}
    leader_tpus = ann.get(LEADER_REQUESTS_TPUS) == "true"
    is_leader = labels.get(L.WORKER_INDEX) == "0"
    if is_leader:
        leader, index = meta["name"], 0
    else:
        leader, _, ordinal = meta["name"].rpartition("-")
        index = int(ordinal) - (0 if leader_tpus else 1)
    sub = spec.get("subdomain", "")
    if SUBGROUP_SIZE in ann:
        _subgroup(containers[0], leader, sub, int(ann[SUBGROUP_SIZE]), labels, is_leader, leader_tpus)
        return
    ports = [_env(c, "TPU_PROCESS_PORT") or str(DEFAULT_PORT + i) for i, c in enumerate(containers)]
    hosts = ([f"{leader}.{sub}"] if leader_tpus or is_leader else []) + [
        f"{leader}-{i}.{sub}" for i in range(1, int(ann.get(L.SIZE_ANNOTATION) or 1))]
    names = [h for h in hosts for _ in containers]
    addresses = [f"{h}:{p}" for h in hosts for p in ports]
    for i, c in enumerate(containers):
        _append(c, ",".join(names), index * len(containers) + i, leader, ",".join(addresses), ports[i])


def _subgroup(c: dict[str, Any], leader: str, sub: str, size: int, labels: dict[str, str],
              is_leader: bool, leader_tpus: bool) -> None:
    """The sub-group variant: the hosts of the pod's sub-group only, one TPU container per pod."""
    group, worker = int(labels.get(L.SUBGROUP_INDEX) or 0), int(labels.get(L.WORKER_INDEX) or 0)
    worker_id = worker % size if leader_tpus else (worker - 1) % size
    port = _env(c, "TPU_PROCESS_PORT") or str(DEFAULT_PORT)
    start, end, hosts = size * group + 1, size * (group + 1), []
    if is_leader:
        hosts.append(f"{leader}.{sub}")  # the leader requests TPUs: the first host of sub-group 0
        end -= 1
    else:
        if leader_tpus and group == 0:
            hosts.append(f"{leader}.{sub}")
            end -= 1
        elif leader_tpus:  # sub-group 0 took the leader: every later one shifts by one
            start, end = start - 1, end - 1
    hosts += [f"{leader}-{i}.{sub}" for i in range(start, end + 1)]
    _append(c, ",".join(hosts), worker_id, leader, ",".join(f"{h}:{port}" for h in hosts), port)


def _append(c: dict[str, Any], hosts: str, worker_id: int, leader: str, addresses: str, port: str) -> None:
    has_port = _env(c, "TPU_PROCESS_PORT") is not None
    c["env"] = [*(c.get("env") or []),
                {"name": "TPU_WORKER_HOSTNAMES", "value": hosts},
                {"name": "TPU_WORKER_ID", "value": str(worker_id)},
                {"name": "TPU_NAME", "value": leader},
                {"name": "TPU_PROCESS_ADDRESSES", "value": addresses},
                *([] if has_port else [{"name": "TPU_PROCESS_PORT", "value": port}])]
