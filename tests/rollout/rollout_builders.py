"""Fluent-ish builders for LWS dicts in the shapes the gate and planner read (after lws test wrappers)."""

from __future__ import annotations

import copy
from typing import Any

from lwsflow.controller.rollout import state


def lws(name: str = "m", *, replicas: int = 4, partition: int | None = 0, max_surge: Any = 0,
        max_unavailable: Any = 1, image: str = "vllm:1", generation: int = 1,
        status: dict | None = None, annotations: dict | None = None, ns: str = "default") -> dict:
    ruc: dict[str, Any] = {"maxSurge": max_surge, "maxUnavailable": max_unavailable}
    if partition is not None:
        ruc["partition"] = partition
    return {
        "apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
        "metadata": {"name": name, "namespace": ns, "generation": generation, "resourceVersion": "7",
                     "annotations": dict(annotations or {})},
        "spec": {"replicas": replicas,
                 "rolloutStrategy": {"type": "RollingUpdate", "rollingUpdateConfiguration": ruc},
                 "leaderWorkerTemplate": {"size": 2, "workerTemplate": {
                     "spec": {"containers": [{"name": "engine", "image": image}]}}}},
        "status": status if status is not None else {},
    }


def status(replicas: int, ready: int, updated: int, *, observed: int = 1, available: bool = True,
           update_in_progress: bool = False, cond_gen: int | None = None) -> dict:
    cg = observed if cond_gen is None else cond_gen
    conds = [{"type": "Available", "status": "True" if available else "False", "observedGeneration": cg},
             {"type": "Progressing", "status": "False" if available else "True", "observedGeneration": cg}]
    if cg < 0:  # a condition written without observedGeneration
        for c in conds:
            del c["observedGeneration"]
    if update_in_progress:
        conds.append({"type": "UpdateInProgress", "status": "True", "observedGeneration": cg})
    return {"replicas": replicas, "readyReplicas": ready, "updatedReplicas": updated,
            "observedGeneration": observed, "conditions": conds}


def with_state(obj: dict, st: state.RolloutState) -> dict:
    out = copy.deepcopy(obj)
    out["metadata"]["annotations"].update({k: v for k, v in st.annotations().items() if v is not None})
    return out
