"""The StatefulSet controller behaviour LWS relies on (lws-semantics.md §d), in the embedded cluster.

Parallel pod management; ordinals from ``spec.ordinals.start``; missing ordinals are created at once
(below the partition from ``currentRevision``, at or above it from ``updateRevision``); ordinals past
``replicas`` are deleted (so scale-down removes the highest ordinals, which are the surge groups);
PersistentVolumeClaims from ``volumeClaimTemplates`` with their retention policy (``claims.py``);
a RollingUpdate deletes outdated pods at or above the partition, highest ordinal first, one at a
time, each after the one above it is Ready (``ClusterConfig.max_unavailable_statefulset`` turns on
the MaxUnavailableStatefulSet gate's behaviour: up to ``maxUnavailable`` at once). The LWS pod
webhook runs on pods it creates, as the real one would.

Status is computed as the real controller computes it, from the pods its informer holds: a pod it
deletes still counts (terminating) and a pod it creates does not count yet, until its next sync,
``INFORMER_LAG_S`` later; a deleted ordinal is recreated in that next sync too, and a new worker
StatefulSet gets its first sync that much after its creation. That is what lets a watcher (the LWS
controller, a rollout gate) see a recreated group as gone, as on a real cluster.
A pod whose ``serviceAccountName`` names a missing ServiceAccount is refused by admission
(``serviceaccounts.py``): recorded as a FailedCreate event, retried when ServiceAccounts change.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from lwsflow.controller.api import labels as L
from lwsflow.controller.api.intstr import resolve
from lwsflow.controller.errors import AlreadyExists, Forbidden
from lwsflow.sim import claims, kinds, lws_webhook, serviceaccounts, sts_revisions
from lwsflow.sim.apiserver import admission, core_admission
from lwsflow.sim.podutil import is_ready, is_terminating, owner_ref, safe_hash
from lwsflow.sim.store import clone

if TYPE_CHECKING:
    from lwsflow.sim.cluster import Cluster

STS = "statefulsets.apps"
POD_NAME_LABEL = "statefulset.kubernetes.io/pod-name"
REVISION_LABEL = "controller-revision-hash"
POD_INDEX_LABEL = "apps.kubernetes.io/pod-index"
# How long (virtual seconds) before the controller's next sync sees the pods it just created or
# deleted: the watch round trip of its informer. Any value > 0 orders the observable states as on a
# real cluster; it is kept tiny so it changes no timing a scenario measures.
INFORMER_LAG_S = 0.001

_Info = tuple[bool, bool, str]  # (ready, not terminating, revision) of one ordinal


class StatefulSetController:
    """Reconciles StatefulSets: pods per ordinal, partitioned rolling update, status."""

    def __init__(self, cluster: Cluster) -> None:
        self.c = cluster
        # (ns, sts, revision name) -> pod template: what pods below the partition are recreated from
        self.templates: dict[tuple[str, str, str], dict] = {}
        # (ns, sts) -> ordinal -> (ready when deleted, until): deleted pods its informer still holds
        self._ghosts: dict[tuple[str, str], dict[int, tuple[bool, float]]] = {}
        # (ns, sts) -> pod uid -> until: created pods its informer does not hold yet
        self._fresh: dict[tuple[str, str], dict[str, float]] = {}
        self._resync_due: dict[tuple[str, str], float] = {}
        self._unseen: dict[str, float] = {}  # uid -> when a new StatefulSet reaches the informer
        self.refused: dict[str, set[str]] = {}  # ns -> StatefulSets whose pods admission refused

    def revision_of(self, ns: str, name: str, template: dict) -> str:
        rev = f"{name}-{safe_hash(template)}"
        key = (ns, name, rev)
        if key not in self.templates:
            self.templates[key] = clone(template)
        return rev

    def reconcile(self, ns: str, name: str) -> None:
        store = self.c.store
        sts = store.get_raw(STS, ns, name)
        if sts is None or is_terminating(sts) or self._not_seen_yet(sts):
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

        now = self.c.now()
        key = (ns, name)
        ghosts = {o: g for o, g in self._ghosts.pop(key, {}).items() if g[1] > now}
        fresh = {u: t for u, t in self._fresh.pop(key, {}).items() if t > now}
        pods: dict[int, dict] = {}
        condemned: dict[int, dict] = {}
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
                if not is_terminating(pod):  # Parallel: condemned ordinals all go at once
                    self._delete(sts, pod, ordinal, ghosts, now)
                else:  # still counted (replicas, ready) until it is gone, as computeReplicaStatus does
                    condemned[ordinal] = pod
                continue
            pods[ordinal] = pod
        for ordinal in range(start, end):
            if claimed:  # claims before their pod, and their owners kept in line with the policy
                claims.sync(store, sts, f"{name}-{ordinal}", pods.get(ordinal), scaled_down=False)
            if ordinal not in pods and ordinal not in ghosts:  # a deleted one comes back next sync
                rev = update_rev if ordinal >= partition else current_rev
                created = self._create_pod(sts, ordinal, rev, update_rev)
                if created is not None:
                    pods[ordinal] = created
                    fresh[created["metadata"]["uid"]] = now + INFORMER_LAG_S

        # one pass over the pods the informer holds: (ready, not terminating, revision) per ordinal
        info: dict[int, _Info] = {o: (is_ready(p), not is_terminating(p), _rev(p)) for o, p in pods.items()
                                  if p["metadata"]["uid"] not in fresh}
        if strategy.get("type", "RollingUpdate") == "RollingUpdate":
            for ordinal in self._to_replace(info, start, end, partition, max_unavail, update_rev):
                self._delete(sts, pods.pop(ordinal), ordinal, ghosts, now)
                del info[ordinal]
        for ordinal, (was_ready, _) in ghosts.items():  # terminating in the informer: counted, not current
            info.setdefault(ordinal, (was_ready, False, ""))
        for ordinal, pod in condemned.items():
            info.setdefault(ordinal, (is_ready(pod), False, _rev(pod)))
        if ghosts:
            self._ghosts[key] = ghosts
        if fresh:
            self._fresh[key] = fresh
        if ghosts or fresh:
            self._resync(ns, name, min([g[1] for g in ghosts.values()] + list(fresh.values())))
        sts_revisions.sync(self.c, sts, update_rev, current_rev, spec.get("template") or {},
                           {_rev(p) for p in pods.values()})
        self._write_status(sts, info, replicas, current_rev, update_rev)

    def _not_seen_yet(self, sts: dict) -> bool:
        """A worker StatefulSet (owned by its leader pod) never synced reaches the controller's
        informer INFORMER_LAG_S after its creation: its pods come a moment after their leader, so a
        leader can be Ready while its workers are not yet, as on a real cluster."""
        refs = sts["metadata"].get("ownerReferences") or ()
        if sts.get("status") or not any(r.get("kind") == "Pod" for r in refs):
            return False
        uid, now = sts["metadata"]["uid"], self.c.now()
        due = self._unseen.setdefault(uid, now + INFORMER_LAG_S)
        if now < due:
            self._resync(sts["metadata"]["namespace"], sts["metadata"]["name"], due)
            return True
        del self._unseen[uid]
        return False

    def _to_replace(self, info: dict[int, _Info], start: int, end: int, partition: int, max_unavail: int,
                    update_rev: str) -> list[int]:
        """Outdated ordinals at or above the partition to delete now, highest first. With the
        MaxUnavailableStatefulSet gate: while fewer than maxUnavailable ordinals are unavailable
        (missing ones included). Without it (the default): the highest outdated one, unless an
        updated one above it is not Ready yet (updateStatefulSet's legacy loop)."""
        if self.c.config.max_unavailable_statefulset:
            healthy = sum(1 for o, (r, alive, _) in info.items() if r and alive and start <= o < end)
            budget = max_unavail - (end - start - healthy)
            out: list[int] = []
            for ordinal in range(end - 1, max(partition, start) - 1, -1):
                if len(out) >= budget:
                    break
                pod_info = info.get(ordinal)
                if pod_info and pod_info[2] != update_rev and pod_info[1]:
                    out.append(ordinal)
            return out
        for ordinal in range(end - 1, max(partition, start) - 1, -1):
            ready, alive, rev = info.get(ordinal, (False, False, ""))
            if ordinal in info and rev != update_rev and alive:
                return [ordinal]
            if not (ready and alive):  # missing, terminating or not Ready: wait for it
                return []
        return []

    def _delete(self, sts: dict, pod: dict, ordinal: int, ghosts: dict[int, tuple[bool, float]],
                now: float) -> None:
        """Delete ``pod``; the informer keeps it (terminating) until the next sync."""
        ghosts[ordinal] = (is_ready(pod), now + INFORMER_LAG_S)  # isRunningAndReady ignores deletion
        pname = pod["metadata"]["name"]
        self.c.delete_pod(sts["metadata"]["namespace"], pname)
        self._event(sts, "SuccessfulDelete",
                    f"delete Pod {pname} in StatefulSet {sts['metadata']['name']} successful")

    def _resync(self, ns: str, name: str, due: float) -> None:
        """The sync in which the informer has caught up with this controller's own writes."""
        key = (ns, name)
        if self._resync_due.get(key, float("inf")) <= due:
            return
        self._resync_due[key] = due

        def fire() -> None:
            if self._resync_due.get(key) == due:
                del self._resync_due[key]
            self.c.enqueue("sts", ns, name)

        self.c.at(due, fire)

    def retry_refused(self, ns: str) -> None:
        """A ServiceAccount of ``ns`` changed: StatefulSets whose pods were refused try again."""
        for name in self.refused.pop(ns, set()):
            self.c.enqueue("sts", ns, name)

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
                "generateName": f"{name}-",  # GetPodFromTemplate's prefix; the name is set as well
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
        if errors := core_admission.validate(kinds.POD, pod, None):
            # the API server refuses the pod (e.g. a template with containers: []): FailedCreate on
            # every sync, never a pod, as the real controller's retries all fail the same way
            self._failed_create(sts, pname, admission.invalid(kinds.POD, pname, errors).message)
            return None
        try:
            serviceaccounts.admit_pod(self.c.store, pod)
            created = self.c.store.create("pods", pod)
        except AlreadyExists:
            return self._adopt(sts, pname)
        except Forbidden as exc:  # as the real controller reports a refused create, and retries
            self.refused.setdefault(ns, set()).add(name)
            self._failed_create(sts, pname, exc.message)
            return None
        self._event(sts, "SuccessfulCreate", f"create Pod {pname} in StatefulSet {name} successful")
        return created

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
            self._failed_create(sts, pname, f'pods "{pname}" already exists')
            return None
        return self.c.store.mutate("pods", ns, pname, lambda p: p["metadata"].__setitem__(
            "ownerReferences", [*refs, owner_ref(sts)]))

    def _failed_create(self, sts: dict, pname: str, error: str) -> None:
        message = f"create Pod {pname} in StatefulSet {sts['metadata']['name']} failed error: {error}"
        self._event(sts, "FailedCreate", message, etype="Warning")

    def _event(self, sts: dict, reason: str, message: str, *, etype: str = "Normal") -> None:
        """The real controller's events (stateful_pod_control.go recordPodEvent)."""
        self.c.emit_event(sts, reason, message, etype=etype, component="statefulset-controller")

    def _write_status(self, sts: dict, info: dict[int, tuple[bool, bool, str]], replicas: int,
                      current_rev: str, update_rev: str) -> None:
        # computeReplicaStatus: a terminating pod counts as present (and ready while it is), never
        # as current or updated
        ready = sum(1 for r, _, _ in info.values() if r)
        updated = sum(1 for _, alive, rev in info.values() if alive and rev == update_rev)
        current = sum(1 for _, alive, rev in info.values() if alive and rev == current_rev)
        present = len(info)
        if updated == present == replicas and ready == replicas:
            current_rev, current = update_rev, updated  # rolling update complete
        counts = {"readyReplicas": ready, "currentReplicas": current, "updatedReplicas": updated}
        status = {
            "observedGeneration": sts["metadata"].get("generation", 1),
            "replicas": present,
            **{k: n for k, n in counts.items() if n},  # omitempty: a 0 is not on the wire
            "availableReplicas": ready,
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
