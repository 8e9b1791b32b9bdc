"""What the LWS pod webhook does to a pod at creation (lws-semantics.md §b), applied in-process.

Leader: group-index from its ordinal, group-key = sha1(<ns>/<pod name>), and with the
UniquePerReplica subdomain policy ``spec.subdomain`` = its own name; worker: worker-index from
its ordinal. Every container and init container gets LWS_LEADER_ADDRESS, LWS_GROUP_SIZE and
LWS_WORKER_INDEX first in ``env`` (user entries with the same names dropped). With the
exclusive-topology annotation the leader gets required podAffinity on its own group-key and
podAntiAffinity against other group keys over that topology key.
"""

from __future__ import annotations

import hashlib

from lwsflow.controller.api import labels as L
from lwsflow.sim import tpu_env

SUBGROUP_SIZE_ANNOTATION = "leaderworkerset.sigs.k8s.io/subgroup-size"
SUBGROUP_POLICY_TYPE_ANNOTATION = "leaderworkerset.sigs.k8s.io/subgroup-policy-type"
_ENV_NAMES = (L.ENV_LEADER_ADDRESS, L.ENV_GROUP_SIZE, L.ENV_WORKER_INDEX)


def group_key(namespace: str, leader_name: str) -> str:
    return hashlib.sha1(f"{namespace}/{leader_name}".encode()).hexdigest()


def mutate_pod(pod: dict, ordinal: int) -> None:
    meta = pod["metadata"]
    labels = meta.setdefault("labels", {})
    ann = meta.setdefault("annotations", {})
    ns, name = meta.get("namespace", "default"), meta["name"]
    lws = labels[L.NAME]
    if labels.get(L.WORKER_INDEX) == "0":
        labels[L.GROUP_INDEX] = str(ordinal)
        labels[L.GROUP_KEY] = group_key(ns, name)
        leader = name
        if ann.get(L.SUBDOMAIN_POLICY_ANNOTATION) == "UniquePerReplica":
            pod["spec"]["subdomain"] = name  # the per-replica Service is named after the leader
        topo = ann.get(L.EXCLUSIVE_TOPOLOGY)
        if topo:
            pod["spec"]["affinity"] = _exclusive_affinity(labels[L.GROUP_KEY], topo)
    else:
        labels[L.WORKER_INDEX] = str(ordinal)
        leader = ann.get(L.LEADER_NAME_ANNOTATION, name.rsplit("-", 1)[0])
    group = labels.get(L.GROUP_INDEX, leader.rsplit("-", 1)[-1])
    _subgroup_labels(labels, ann, leader, ordinal)
    subdomain = pod["spec"].get("subdomain", lws)
    tpu_env.add_tpu_variables(pod)  # before the LWS variables, as upstream's webhook
    env = [
        {"name": L.ENV_LEADER_ADDRESS, "value": f"{lws}-{group}.{subdomain}.{ns}"},
        {"name": L.ENV_GROUP_SIZE, "value": ann.get(L.SIZE_ANNOTATION, "1")},
        {"name": L.ENV_WORKER_INDEX, "value": labels[L.WORKER_INDEX]},
    ]
    for field in ("initContainers", "containers"):
        for c in pod["spec"].get(field) or []:
            c["env"] = [dict(e) for e in env] + [
                e for e in c.get("env") or [] if e.get("name") not in _ENV_NAMES
            ]


def subgroup_index(worker_index: int, size: int, subgroup_size: int) -> int:
    """§b: ``(w-1)/n`` when ``(size-1) % n == 0`` and ``size % n != 0``, else ``w/n``."""
    if (size - 1) % subgroup_size == 0 and size % subgroup_size != 0:
        return (worker_index - 1) // subgroup_size
    return worker_index // subgroup_size


def _subgroup_labels(labels: dict, ann: dict, leader: str, ordinal: int) -> None:
    """subgroup-index / subgroup-key labels, only when the LWS has a subGroupPolicy."""
    n = int(ann.get(SUBGROUP_SIZE_ANNOTATION) or 0)
    if n <= 0:
        return
    if labels.get(L.WORKER_INDEX) == "0":
        if ann.get(SUBGROUP_POLICY_TYPE_ANNOTATION) == "LeaderExcluded":
            return  # the leader belongs to no subgroup
        idx = 0
    else:
        idx = subgroup_index(ordinal, int(ann.get(L.SIZE_ANNOTATION) or 1), n)
    labels[L.SUBGROUP_INDEX] = str(idx)
    labels[L.SUBGROUP_KEY] = hashlib.sha1(f"{leader}/{idx}".encode()).hexdigest()


def _exclusive_affinity(key: str, topology: str) -> dict:
    return {
        "podAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {
                        "matchExpressions": [{"key": L.GROUP_KEY, "operator": "In", "values": [key]}]
                    },
                    "topologyKey": topology,
                }
            ]
        },
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {
                        "matchExpressions": [
                            {"key": L.GROUP_KEY, "operator": "Exists"},
                            {"key": L.GROUP_KEY, "operator": "NotIn", "values": [key]},
                        ]
                    },
                    "topologyKey": topology,
                }
            ]
        },
    }
