"""A defaulted, read-only view of a LeaderWorkerSet spec and its revision (lws-semantics.md §a, §b).

The API server applies CRD/webhook defaults on write, but objects may also be created in-process,
so the simulator reads every field through this view with the same defaults. The revision hash is
taken over the defaulted ``leaderWorkerTemplate`` and ``networkConfig`` only: a change to
``replicas``, ``rolloutStrategy``, ``startupPolicy`` or labels/annotations never rolls groups.
"""

from __future__ import annotations

from dataclasses import dataclass

from lwsflow.controller.api import intstr
from lwsflow.sim.podutil import safe_hash
from lwsflow.sim.store import clone


@dataclass(frozen=True)
class LwsView:
    """A LeaderWorkerSet's fields with defaults applied, plus its revision hash."""

    name: str
    namespace: str
    replicas: int
    size: int
    leader_template: dict
    worker_template: dict
    restart_policy: str
    startup_policy: str
    subdomain_policy: str
    partition: int
    max_unavailable: int | str
    max_surge: int | str
    annotations: dict
    labels: dict
    revision_data: dict  # what a ControllerRevision stores
    revision: str  # the template-revision-hash

    @property
    def surge(self) -> int:
        return intstr.max_surge(self.max_surge, self.replicas)

    @property
    def unavailable(self) -> int:
        return intstr.max_unavailable(self.max_unavailable, self.replicas)


def normalized_revision_data(spec: dict) -> dict:
    lwt = clone(spec.get("leaderWorkerTemplate") or {})
    lwt.setdefault("size", 1)
    policy = lwt.get("restartPolicy") or "RecreateGroupOnPodRestart"
    lwt["restartPolicy"] = "None" if policy == "Default" else policy
    net = clone(spec.get("networkConfig") or {})
    net.setdefault("subdomainPolicy", "Shared")
    return {"spec": {"leaderWorkerTemplate": lwt, "networkConfig": net}}


def view(lws: dict) -> LwsView:
    meta, spec = lws["metadata"], lws.get("spec") or {}
    data = normalized_revision_data(spec)
    lwt = data["spec"]["leaderWorkerTemplate"]
    worker = lwt.get("workerTemplate") or {}
    ru = ((spec.get("rolloutStrategy") or {}).get("rollingUpdateConfiguration")) or {}
    return LwsView(
        name=meta["name"],
        namespace=meta.get("namespace", "default"),
        replicas=int(spec.get("replicas", 1)),
        size=int(lwt.get("size", 1)),
        leader_template=lwt.get("leaderTemplate") or worker,
        worker_template=worker,
        restart_policy=lwt["restartPolicy"],
        startup_policy=spec.get("startupPolicy") or "LeaderCreated",
        subdomain_policy=data["spec"]["networkConfig"]["subdomainPolicy"],
        partition=int(ru.get("partition", 0) or 0),
        max_unavailable=ru.get("maxUnavailable", 1),
        max_surge=ru.get("maxSurge", 0),
        annotations=dict(meta.get("annotations") or {}),
        labels=dict(meta.get("labels") or {}),
        revision_data=data,
        revision=safe_hash(data),
    )
