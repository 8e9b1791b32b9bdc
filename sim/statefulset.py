"""The StatefulSet controller behaviour LWS relies on (lws-semantics.md §d), in the embedded cluster.

Parallel pod management; ordinals from ``spec.ordinals.start``; missing ordinals are created at once
(below the partition from ``currentRevision``, at or above it from ``updateRevision``); ordinals past
``replicas`` are deleted (so scale-down removes the highest ordinals, which are the surge groups);
PersistentVolumeClaims from ``volumeClaimTemplates`` with their retention policy (``claims.py``);
a RollingUpdate deletes outdated pods at or above the partition, highest ordinal first, while fewer
than ``maxUnavailable`` pods in range are unhealthy (the MaxUnavailableStatefulSet behaviour, on by
default from Kubernetes 1.35). The LWS pod webhook runs on pods it creates, as the real one would.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from lwsflow.controller.api import labels as L
from lwsflow.controller.api.intstr import resolve
from lwsflow.controller.errors import AlreadyExists
from lwsflow.sim import claims, lws_webhook
from lwsflow.sim.podutil import is_ready, is_terminating, owner_ref, safe_hash
from lwsflow.sim.store import clone

if TYPE_CHECKING:
    from lwsflow.sim.cluster import Cluster

STS = "statefulsets.apps"
POD_NAME_LABEL = "statefulset.kubernetes.io/pod-name"
REVISION_LABEL = "controller-revision-hash"
POD_INDEX_LABEL = "apps.kubernetes.io/pod-index"


class StatefulSetController:
    """Reconciles StatefulSets: pods per ordinal, partitioned rolling update, status."""

    def __init__(self, cluster: Cluster) -> None:
        self.c = cluster
        # (ns, sts, revision name) -> pod template: what pods below the partition are recreated from
        self.templates: dict[tuple[str, str, str], dict] = {}

    def revision_of(self, ns: str, name: str, template: dict) -> str:
        rev = f"{name}-{safe_hash(template)}"
        key = (ns, name, rev)
        if key not in self.templates:
            self.templates[key] = clone(template)
        return rev

    def reconcile(self, ns: str, name: str) -> None:
        store = self.c.store
        sts = store.get_raw(STS, ns, name)
        if sts is None or is_terminating(sts):
            return
        spec = sts.get("spec") or {}
        replicas = int(spec.get("replicas", 1))
        start = int((spec.get("ordinals") or {}).get("start", 0))
        strategy = spec.get("updateStrategy") or {}
        rolling = strategy.get("rollingUpdate") or {}
        partition = int(rolling.get("partition", 0) or 0)
        max_unavail = max(1, resolve(rolling.get("maxUnavailable", 1), replicas, round_up=False, default=1))
        update_rev = self.revision_of(ns, name, spec.get("template") or {})
        status = sts.get("status") or {}
        current_rev = status.get("currentRevision") or update_rev
        end = start + replicas
        claimed = bool(claims.templates(sts))

        pods: dict[int, dict] = {}
        for pname in self.c.owned_names(sts["metadata"]["uid"], "pods"):
            pod = store.get_raw("pods", ns, pname)
            if pod is None:
                continue
            ordinal = _ordinal(pname, name)
            if ordinal is None:
                continue
            if ordinal >= end or ordinal < start:
                if claimed:  # whenScaled: Delete hands the claims to the pod first
                    claims.sync(store, sts, pname, pod, scaled_down=True)
                self.c.delete_pod(ns, pname)  # Parallel: condemned ordinals all go at once
                continue
            pods[ordinal] = pod
        for ordinal in range(start, end):
            if claimed:  # claims before their pod, and their owners kept in line with the policy
                claims.sync(store, sts, f"{name}-{ordinal}", pods.get(ordinal), scaled_down=False)
            if ordinal not in pods:
                rev = update_rev if ordinal >= partition else current_rev
                created = self._create_pod(sts, ordinal, rev, update_rev)
                if created is not None:
                    pods[ordinal] = created

        # one pass over the pods: (ready, healthy, revision) per ordinal
        info = {o: (is_ready(p), not is_terminating(p), _rev(p)) for o, p in pods.items()}
        if strategy.get("type", "RollingUpdate") == "RollingUpdate":
            healthy = sum(1 for r, alive, _ in info.values() if r and alive)
            budget = max_unavail - (replicas - healthy)  # missing ordinals count as unavailable
            for ordinal in range(end - 1, max(partition, start) - 1, -1):
                if budget <= 0:
                    break
                pod_info = info.get(ordinal)
                if pod_info and pod_info[2] != update_rev and pod_info[1]:
                    self.c.delete_pod(ns, pods[ordinal]["metadata"]["name"])
                    del pods[ordinal], info[ordinal]
                    budget -= 1
        self._write_status(sts, info, replicas, current_rev, update_rev)

    def _create_pod(self, sts: dict, ordinal: int, rev: str, update_rev: str) -> dict | None:
        ns, name = sts["metadata"]["namespace"], sts["metadata"]["name"]
        template = self.templates.get((ns, name, rev)) or self.templates[(ns, name, update_rev)]
        tmeta = template.get("metadata") or {}
        pname = f"{name}-{ordinal}"
        spec = clone(template.get("spec") or {})
        spec.setdefault("hostname", pname)
        if sts["spec"].get("serviceName"):
            spec.setdefault("subdomain", sts["spec"]["serviceName"])
        if claims.templates(sts):
            claims.add_volumes(spec, sts, pname)
        pod: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": pname,
                "namespace": ns,
                "labels": {
                    **(tmeta.get("labels") or {}),
                    POD_NAME_LABEL: pname,
                    REVISION_LABEL: rev,
                    POD_INDEX_LABEL: str(ordinal),
                },
                "annotations": dict(tmeta.get("annotations") or {}),
                "ownerReferences": [owner_ref(sts)],
            },
            "spec": spec,
            "status": {"phase": "Pending"},
        }
        if L.NAME in pod["metadata"]["labels"]:
            lws_webhook.mutate_pod(pod, ordinal)
        try:
            return self.c.store.create("pods", pod)
        except AlreadyExists:
            return self._adopt(sts, pname)

    def _adopt(self, sts: dict, pname: str) -> dict | None:
        """A pod of that name exists: adopt it when it is an orphan matching the selector (ClaimPods),
        else report it as the controller does and leave it alone."""
        ns = sts["metadata"]["namespace"]
        pod = self.c.store.get_raw("pods", ns, pname)
        if pod is None:
            return None
        refs = pod["metadata"].get("ownerReferences") or []
        selector = ((sts["spec"].get("selector") or {}).get("matchLabels")) or {}
        labels = pod["metadata"].get("labels") or {}
        if any(r.get("controller") for r in refs) or any(labels.get(k) != v for k, v in selector.items()):
            message = (f"create Pod {pname} in StatefulSet {sts['metadata']['name']} failed error: "
                       f'pods "{pname}" already exists')
            self.c.emit_event(sts, "FailedCreate", message, etype="Warning",
                              component="statefulset-controller")
            return None
        return self.c.store.mutate("pods", ns, pname, lambda p: p["metadata"].__setitem__(
            "ownerReferences", [*refs, owner_ref(sts)]))

    def _write_status(self, sts: dict, info: dict[int, tuple[bool, bool, str]], replicas: int,
                      current_rev: str, update_rev: str) -> None:
        ready = sum(1 for r, _, _ in info.values() if r)
        updated = sum(1 for _, _, rev in info.values() if rev == update_rev)
        current = sum(1 for _, _, rev in info.values() if rev == current_rev)
        present = len(info)
        if updated == present == replicas and ready == replicas:
            current_rev, current = update_rev, updated  # rolling update complete
        status = {
            "observedGeneration": sts["metadata"].get("generation", 1),
            "replicas": present,
            "readyReplicas": ready,
            "availableReplicas": ready,
            "currentReplicas": current,
            "updatedReplicas": updated,
            "currentRevision": current_rev,
            "updateRevision": update_rev,
            "collisionCount": 0,
        }
        if sts.get("status") != status:
            self.c.store.replace(STS, {**sts, "status": status}, subresource="status", check_version=False)


def _rev(pod: dict) -> str:
    return (pod.get("metadata", {}).get("labels") or {}).get(REVISION_LABEL, "")


def _ordinal(pod_name: str, sts_name: str) -> int | None:
    suffix = pod_name[len(sts_name) + 1 :] if pod_name.startswith(sts_name + "-") else ""
    return int(suffix) if suffix.isdigit() else None
