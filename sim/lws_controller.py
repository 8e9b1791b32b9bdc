"""The LeaderWorkerSet controller and pod (group) controller of the embedded cluster.

Follows lws-semantics.md: §b objects (leader StatefulSet, worker StatefulSet per group, headless
Service, ControllerRevisions), §c status counters and condition rules, §d the rolling update (the
pure computation lives in ``rolling.py``; the StatefulSet controller carries it out), §e group
restart policy. Reconciles are level-triggered and keyed by object; the cluster batches them.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from lwsflow.controller.api import labels as L
from lwsflow.sim import rolling, tpu_env
from lwsflow.sim.lws_spec import LwsView, view
from lwsflow.sim.lws_webhook import SUBGROUP_POLICY_TYPE_ANNOTATION, SUBGROUP_SIZE_ANNOTATION
from lwsflow.sim.podutil import (
    annotation,
    is_ready,
    is_terminating,
    label,
    owner_ref,
    owner_uid,
)
from lwsflow.sim.statefulset import STS
from lwsflow.sim.store import clone, rfc3339

if TYPE_CHECKING:
    from lwsflow.sim.cluster import Cluster

LWS = "leaderworkersets.leaderworkerset.x-k8s.io"
CR = "controllerrevisions.apps"
EXPERIMENTAL_AFTER_START = "leaderworkerset.sigs.k8s.io/experimental-recreate-group-after-start"
_EXCLUSIVE = {
    (L.COND_AVAILABLE, L.COND_PROGRESSING),
    (L.COND_PROGRESSING, L.COND_AVAILABLE),
    (L.COND_AVAILABLE, L.COND_UPDATE_IN_PROGRESS),
    (L.COND_UPDATE_IN_PROGRESS, L.COND_AVAILABLE),
}
_MESSAGES = {
    L.COND_PROGRESSING: ("GroupsProgressing", "Replicas are progressing"),
    L.COND_UPDATE_IN_PROGRESS: ("GroupsUpdating", "Rolling Upgrade is in progress"),
    L.COND_AVAILABLE: ("AllGroupsReady", "All replicas are ready"),
}


class LwsController:
    """LWS reconcile (leader sts, status), pod controller (worker sts) and restarts."""

    def __init__(self, cluster: Cluster) -> None:
        self.c = cluster
        self.revisions: dict[tuple[str, str, str], dict] = {}  # (ns, lws, hash) -> revision data
        self.restart_triggers: dict[tuple[str, str], list[dict]] = {}
        self._revision_owner: dict[tuple[str, str, str], str] = {}  # -> uid of the LWS holding it
        self._group_cache: dict[tuple[str, str, int], tuple[str, rolling.GroupState]] = {}

    # -- LWS reconcile ----------------------------------------------------------------------------------
    def reconcile(self, ns: str, name: str) -> None:
        store = self.c.store
        lws = store.get_raw(LWS, ns, name)
        if lws is None or is_terminating(lws):
            return
        v = view(lws)
        sts = store.get_raw(STS, ns, name)
        if self._ensure_revision(lws, v) and sts is None:
            self._event(lws, "CreatingRevision", f"Creating revision with key {v.revision} for a newly "
                                                 "created LeaderWorkerSet")
        if v.subdomain_policy != "UniquePerReplica":
            self._ensure_service(lws, name, {L.NAME: name}, lws)
        inp = rolling.RollingInput(
            replicas=v.replicas,
            max_unavailable=v.max_unavailable,
            max_surge=v.max_surge,
            partition=v.partition,
            sts_exists=sts is not None,
        )
        if sts is not None:  # add what the leader StatefulSet says now
            ru = sts["spec"].get("updateStrategy", {}).get("rollingUpdate") or {}
            ps, rs = int(ru.get("partition", 0) or 0), int(sts["spec"].get("replicas", 0))
            changed = label(sts, L.TEMPLATE_REVISION_HASH) != v.revision
            needs_groups = not changed and not (ps == 0 and rs == v.replicas) and rs >= v.replicas
            ann = annotation(sts, L.REPLICAS_ANNOTATION)
            inp = dataclasses.replace(
                inp,
                sts_partition=ps,
                sts_replicas=rs,
                template_changed=changed,
                replicas_annotation=int(ann) if ann else None,
                groups=[self.group_state(ns, name, i, v.revision) for i in range(rs)] if needs_groups else [],
            )
        partition, replicas = rolling.compute(inp)
        self._rolling_events(lws, v, inp, partition, replicas)
        self._apply_leader_sts(lws, v, sts, partition, replicas)
        if sts is None:
            self._event(lws, "GroupsProgressing", f"Created leader statefulset {name}")
        elif not inp.template_changed and partition != inp.sts_partition:
            ps = inp.sts_partition
            self._event(lws, "GroupsUpdating", f"Updating replica {partition}" if ps - 1 == partition
                        else f"Updating replicas {partition} to {ps - 1} (inclusive)")
        self._update_status(lws, v)

    def _event(self, lws: dict, reason: str, message: str, related: dict | None = None) -> None:
        """An event of upstream's LWS controllers: on the LeaderWorkerSet, reported as
        "leaderworkerset" (its recorder's name), ``related`` to a pod where upstream names one."""
        self.c.emit_event(lws, reason, message, component="leaderworkerset", related=related)

    def _rolling_events(self, lws: dict, v: LwsView, inp: rolling.RollingInput, partition: int,
                        replicas: int) -> None:
        """What upstream's rollingUpdateParameters records on its way: a new revision, and surge
        groups to delete (wantReplicas, also on a plain scale-down: upstream words it so)."""
        if not inp.sts_exists:
            return
        rs, r = inp.sts_replicas, v.replicas
        if inp.template_changed:
            self._event(lws, "CreatingRevision", f"Creating revision with key {v.revision} for updated LWS")
        if rs < r or (not inp.template_changed and inp.sts_partition == 0 and rs == r) or replicas >= rs:
            return  # wantReplicas not called, or nothing to delete
        self._event(lws, "GroupsProgressing",
                    f"deleting surge replica {v.name}-{replicas}" if replicas == rs - 1
                    else f"deleting surge replicas from {v.name}-{replicas} to {v.name}-{rs - 1}")

    def invalidate(self, ns: str, name: str, idx: int) -> None:
        """A pod or worker set of group ``idx`` changed (called from the store subscriber)."""
        self._group_cache.pop((ns, name, idx), None)

    def group_state(self, ns: str, name: str, idx: int, revision: str) -> rolling.GroupState:
        """ready(group) and updated(group) of §c for group ``idx`` (missing => neither).

        Cached per group until one of its pods or its worker set changes: a rollout reconciles the
        LWS hundreds of times, and re-deriving every group each time would make it O(groups^2)."""
        hit = self._group_cache.get((ns, name, idx))
        if hit is not None and hit[0] == revision:
            return hit[1]
        state = self._group_state(ns, name, idx, revision)
        self._group_cache[(ns, name, idx)] = (revision, state)
        return state

    def _group_state(self, ns: str, name: str, idx: int, revision: str) -> rolling.GroupState:
        store = self.c.store
        leader = store.get_raw("pods", ns, f"{name}-{idx}")
        if leader is None:
            return rolling.GroupState(False, False)
        size = int(annotation(leader, L.SIZE_ANNOTATION) or 1)
        updated = label(leader, L.TEMPLATE_REVISION_HASH) == revision
        ready = is_ready(leader)  # upstream PodRunningAndReady: deletionTimestamp is not looked at
        if size > 1:
            wsts = store.get_raw(STS, ns, f"{name}-{idx}")
            if wsts is None:
                return rolling.GroupState(False, False)
            st = wsts.get("status") or {}
            ready = ready and (
                wsts["spec"].get("replicas") == st.get("availableReplicas")
                and st.get("currentRevision") == st.get("updateRevision")
            )
            updated = updated and label(wsts, L.TEMPLATE_REVISION_HASH) == revision
        return rolling.GroupState(ready, updated)

    def _ensure_revision(self, lws: dict, v: LwsView) -> bool:
        """Store the LWS's current revision; True when its ControllerRevision was created now."""
        key = (v.namespace, v.name, v.revision)
        uid = lws["metadata"]["uid"]
        if self._revision_owner.get(key) == uid:
            return False  # already stored for this very object (a same-named LWS recreated needs its own)
        self.revisions[key] = v.revision_data
        self._revision_owner[key] = uid
        existing = [
            self.c.store.get_raw(CR, v.namespace, n) for n in self.c.owned_names(lws["metadata"]["uid"], CR)
        ]
        if any(cr and label(cr, L.TEMPLATE_REVISION_HASH) == v.revision for cr in existing):
            return False
        number = 1 + max([int(cr.get("revision", 0)) for cr in existing if cr] or [0])
        self.c.store.create(
            CR,
            {
                "apiVersion": "apps/v1",
                "kind": "ControllerRevision",
                "metadata": {
                    "name": f"{v.name}-{v.revision}-{number}",
                    "namespace": v.namespace,
                    "labels": {L.NAME: v.name, L.TEMPLATE_REVISION_HASH: v.revision},
                    "ownerReferences": [owner_ref(lws)],
                },
                "data": clone(v.revision_data),
                "revision": number,
            },
        )
        return True

    def revision_data(self, ns: str, name: str, revision: str) -> dict | None:
        return self.revisions.get((ns, name, revision))

    def _ensure_service(self, lws: dict, svc_name: str, selector: dict, owner: dict) -> None:
        ns = lws["metadata"]["namespace"]
        if self.c.store.get_raw("services", ns, svc_name) is not None:
            return
        self.c.store.create(
            "services",
            {
                "apiVersion": "v1",
                "kind": "Service",
                # as upstream CreateHeadlessServiceIfNotExists builds it: labelled with the set's name only
                "metadata": {
                    "name": svc_name,
                    "namespace": ns,
                    "labels": {L.NAME: lws["metadata"]["name"]},
                    "ownerReferences": [owner_ref(owner)],
                },
                "spec": {
                    "clusterIP": "None",
                    "clusterIPs": ["None"],
                    "selector": selector,
                    "publishNotReadyAddresses": True,
                    "type": "ClusterIP",
                },
            },
        )

    def _apply_leader_sts(
        self, lws: dict, v: LwsView, sts: dict | None, partition: int, replicas: int
    ) -> None:
        template = clone(v.leader_template)
        tmeta = template.setdefault("metadata", {})
        tmeta["labels"] = {
            **(tmeta.get("labels") or {}),
            L.NAME: v.name,
            L.WORKER_INDEX: "0",
            L.TEMPLATE_REVISION_HASH: v.revision,
        }
        ann = {**(tmeta.get("annotations") or {}), L.SIZE_ANNOTATION: str(v.size)}
        subgroups = _subgroup_annotations(v.revision_data)
        for key in (L.EXCLUSIVE_TOPOLOGY, L.SUBGROUP_EXCLUSIVE_TOPOLOGY):  # the latter with sub-groups only
            if v.annotations.get(key) and (key == L.EXCLUSIVE_TOPOLOGY or subgroups):
                ann[key] = v.annotations[key]
        if v.subdomain_policy == "UniquePerReplica":
            ann[L.SUBDOMAIN_POLICY_ANNOTATION] = "UniquePerReplica"
        ann.update(subgroups)
        tmeta["annotations"] = ann
        spec = {
            "replicas": replicas,
            "selector": {"matchLabels": {L.NAME: v.name, L.WORKER_INDEX: "0"}},
            "serviceName": v.name,
            "podManagementPolicy": "Parallel",
            "template": template,
            "updateStrategy": {
                "type": "RollingUpdate",
                "rollingUpdate": {"partition": partition, "maxUnavailable": max(1, v.unavailable + v.surge)},
            },
            "revisionHistoryLimit": 10,
            **_storage(v.revision_data),
        }
        # compared with the stored one as the API server defaults it (the store does on the write)
        self.c.store.defaulter.default(STS, {"spec": spec}, sts)
        meta_labels = {**v.labels, L.NAME: v.name, L.TEMPLATE_REVISION_HASH: v.revision}
        meta_ann = {**v.annotations, L.REPLICAS_ANNOTATION: str(v.replicas)}
        if sts is None:
            self.c.store.create(
                STS,
                {
                    "apiVersion": "apps/v1",
                    "kind": "StatefulSet",
                    "metadata": {
                        "name": v.name,
                        "namespace": v.namespace,
                        "labels": meta_labels,
                        "annotations": meta_ann,
                        "ownerReferences": [owner_ref(lws)],
                    },
                    "spec": spec,
                },
            )
            return
        if (
            sts["spec"] == spec
            and sts["metadata"].get("labels") == meta_labels
            and sts["metadata"].get("annotations") == meta_ann
        ):
            return
        new = {
            **sts,
            "metadata": {**sts["metadata"], "labels": meta_labels, "annotations": meta_ann},
            "spec": spec,
        }
        self.c.store.replace(STS, new, check_version=False)

    # -- status (§c) ------------------------------------------------------------------------------------
    def _update_status(self, lws: dict, v: LwsView) -> None:
        store, ns = self.c.store, v.namespace
        sts = store.get_raw(STS, ns, v.name)
        sts_replicas = int(((sts or {}).get("status") or {}).get("replicas", 0))
        ready_n = updated_n = cur = upd = upd_ready = ready_nb = 0
        leaders = self.c.owned_names(sts["metadata"]["uid"], "pods") if sts else []
        for pname in leaders:
            leader = store.get_raw("pods", ns, pname)
            if leader is None:
                continue
            idx = int(label(leader, L.GROUP_INDEX, "-1"))
            size = int(annotation(leader, L.SIZE_ANNOTATION) or 1)
            if size > 1 and store.get_raw(STS, ns, pname) is None:
                continue  # a group without its worker StatefulSet counts in nothing
            g = self.group_state(ns, v.name, idx, v.revision)
            ready_n += g.ready
            updated_n += g.updated
            if v.partition <= idx < v.replicas:
                cur += 1
                upd += g.updated
                upd_ready += g.updated and g.ready
            if idx < v.replicas and g.ready:
                ready_nb += 1
        old = lws.get("status") or {}
        conds = [dict(c) for c in old.get("conditions") or []]
        now = rfc3339(self.c.now())
        gen = lws["metadata"].get("generation", 1)
        if upd < cur:
            wanted = [L.COND_UPDATE_IN_PROGRESS, L.COND_PROGRESSING]
        elif ready_nb == v.replicas and upd_ready == cur:
            wanted = [L.COND_AVAILABLE]
        else:
            wanted = [L.COND_PROGRESSING]
        # upstream setConditions ORs the setCondition calls: Go's || skips the rest once one changed
        # something, so Progressing only turns True in the reconcile after UpdateInProgress did
        changed = any(_set_true(conds, t, now, gen) for t in wanted)
        changed |= any(c.get("observedGeneration") != gen for c in conds)
        if changed:  # as upstream: one event for the first wanted condition, all groups counted
            reason, message = _MESSAGES[wanted[0]]
            self._event(lws, reason, f"{message}, with {ready_n} groups ready of total {v.replicas} groups")
        for c in conds:
            c["observedGeneration"] = gen
        status = {
            **old,
            "replicas": sts_replicas,
            "readyReplicas": ready_n,
            "updatedReplicas": updated_n,
            "observedGeneration": gen,
            "conditions": conds,
            "hpaPodSelector": old.get("hpaPodSelector") or f"{L.NAME}={v.name},{L.WORKER_INDEX}=0",
        }
        for k in ("replicas", "readyReplicas", "updatedReplicas"):  # omitempty in upstream's types
            if not status[k]:
                del status[k]
        if status != old:
            store.replace(LWS, {**lws, "status": status}, subresource="status", check_version=False)
        if v.partition == 0 and upd_ready == v.replicas:  # updateDone: old revisions go
            self._delete_old_revisions(lws, v)

    def _delete_old_revisions(self, lws: dict, v: LwsView) -> None:
        for cname in list(self.c.owned_names(lws["metadata"]["uid"], CR)):
            cr = self.c.store.get_raw(CR, v.namespace, cname)
            if cr is not None and label(cr, L.TEMPLATE_REVISION_HASH) != v.revision:
                self.c.store.delete(CR, v.namespace, cname)

    # -- pod controller: worker StatefulSets (§b) -------------------------------------------------------
    def reconcile_group(self, ns: str, leader_name: str) -> None:
        store = self.c.store
        leader = store.get_raw("pods", ns, leader_name)
        if leader is None or is_terminating(leader) or label(leader, L.WORKER_INDEX) != "0":
            return
        lws = store.get_raw(LWS, ns, label(leader, L.NAME))
        if lws is None:
            return
        v = view(lws)
        if v.subdomain_policy == "UniquePerReplica":
            self._ensure_service(
                lws, leader_name, {L.NAME: v.name, L.GROUP_INDEX: label(leader, L.GROUP_INDEX)}, leader
            )
        size = int(annotation(leader, L.SIZE_ANNOTATION) or 1)
        if size <= 1 or store.get_raw(STS, ns, leader_name) is not None:
            return
        if v.startup_policy == "LeaderReady" and not is_ready(leader):
            return  # LeaderReady: workers only after the leader is Ready
        topo = annotation(leader, L.EXCLUSIVE_TOPOLOGY)
        node_name = (leader.get("spec") or {}).get("nodeName")
        if topo and not node_name:
            return  # exclusive topology: workers follow the scheduled leader's domain
        worker = self.worker_template(leader)
        if worker is None:
            return
        tmeta = worker.setdefault("metadata", {})
        group_labels = {
            L.NAME: v.name,
            L.GROUP_INDEX: label(leader, L.GROUP_INDEX),
            L.GROUP_KEY: label(leader, L.GROUP_KEY),
            L.TEMPLATE_REVISION_HASH: label(leader, L.TEMPLATE_REVISION_HASH),
        }
        tmeta["labels"] = {**(tmeta.get("labels") or {}), **group_labels}
        ann = {
            **(tmeta.get("annotations") or {}),
            L.SIZE_ANNOTATION: str(size),
            L.LEADER_NAME_ANNOTATION: leader_name,
        }
        if topo and node_name:  # node_name is set whenever topo is (returned above otherwise)
            ann[L.EXCLUSIVE_TOPOLOGY] = topo
            node = store.get_raw("nodes", "", node_name)
            value = ((node or {}).get("metadata", {}).get("labels") or {}).get(topo)
            if value is not None:
                worker.setdefault("spec", {}).setdefault("nodeSelector", {})[topo] = value
        data = self.revision_data(ns, v.name, label(leader, L.TEMPLATE_REVISION_HASH)) or v.revision_data
        # upstream's worker template (pod_controller.go) carries the sub-group size and exclusive
        # topology, not the policy type the leader's template has
        ann.update({k: val for k, val in _subgroup_annotations(data).items()
                    if k != SUBGROUP_POLICY_TYPE_ANNOTATION})
        if _subgroup_annotations(data) and v.annotations.get(L.SUBGROUP_EXCLUSIVE_TOPOLOGY):
            ann[L.SUBGROUP_EXCLUSIVE_TOPOLOGY] = v.annotations[L.SUBGROUP_EXCLUSIVE_TOPOLOGY]
        if tpu_env.requests_tpus(leader.get("spec") or {}):
            ann[tpu_env.LEADER_REQUESTS_TPUS] = "true"
        tmeta["annotations"] = ann
        store.create(
            STS,
            {
                "apiVersion": "apps/v1",
                "kind": "StatefulSet",
                "metadata": {
                    "name": leader_name,
                    "namespace": ns,
                    "labels": group_labels,
                    "ownerReferences": [owner_ref(leader)],
                },
                "spec": {
                    "replicas": size - 1,
                    "ordinals": {"start": 1},
                    # upstream pod_controller selects on name, group-index and group-key
                    "selector": {"matchLabels": {
                        L.NAME: v.name,
                        L.GROUP_INDEX: group_labels[L.GROUP_INDEX],
                        L.GROUP_KEY: group_labels[L.GROUP_KEY],
                    }},
                    "serviceName": v.name if v.subdomain_policy != "UniquePerReplica" else leader_name,
                    "podManagementPolicy": "Parallel",
                    "template": worker,
                    "updateStrategy": {"type": "RollingUpdate"},
                    **_storage(data),
                },
            },
        )
        self._event(lws, "GroupsProgressing", f"Created worker statefulset for leader pod {leader_name}",
                    leader)

    def worker_template(self, leader: dict) -> dict | None:
        """The worker pod template of the leader's revision (a copy), as #963 rebuilds it."""
        ns = leader["metadata"].get("namespace", "default")
        data = self.revision_data(ns, label(leader, L.NAME), label(leader, L.TEMPLATE_REVISION_HASH))
        if data is None:
            lws = self.c.store.get_raw(LWS, ns, label(leader, L.NAME))
            if lws is None:
                return None
            data = view(lws).revision_data
        return clone(data["spec"]["leaderWorkerTemplate"].get("workerTemplate") or {})

    # -- group restart policy (§e) ----------------------------------------------------------------------
    def handle_restart(self, ns: str, leader_name: str) -> None:
        store = self.c.store
        triggers = self.restart_triggers.pop((ns, leader_name), [])
        leader = store.get_raw("pods", ns, leader_name)
        if leader is None or is_terminating(leader) or not triggers:
            return
        lws = store.get_raw(LWS, ns, label(leader, L.NAME))
        if lws is None:
            return
        v = view(lws)
        if v.restart_policy == "None":
            return
        after_start = (
            v.restart_policy == "RecreateGroupAfterStart" or EXPERIMENTAL_AFTER_START in v.annotations
        )
        wsts = store.get_raw(STS, ns, leader_name)
        fire = None
        for pod in triggers:
            if pod["metadata"].get("uid") == leader["metadata"]["uid"]:
                fire = pod
            elif label(pod, L.WORKER_INDEX) not in ("0", ""):
                if label(pod, L.TEMPLATE_REVISION_HASH) != label(leader, L.TEMPLATE_REVISION_HASH):
                    continue  # a worker of another revision
                if wsts is None or owner_uid(pod) != wsts["metadata"]["uid"]:
                    continue  # not of the current worker StatefulSet: no double restart
                fire = pod
        if fire is None:
            return
        if after_start and self._group_pending(ns, leader, wsts):
            return
        self._event(lws, "RecreateGroup", f"Worker pod {fire['metadata']['name']} failed, deleted leader "
                    f"pod {leader_name} to recreate group {label(leader, L.GROUP_INDEX)}", leader)
        self.c.delete_pod(ns, leader_name)

    def _group_pending(self, ns: str, leader: dict, wsts: dict | None) -> bool:
        pods = [leader]
        if wsts is not None:
            pods += [
                p
                for n in self.c.owned_names(wsts["metadata"]["uid"], "pods")
                if (p := self.c.store.get_raw("pods", ns, n)) is not None
            ]
        size = int(annotation(leader, L.SIZE_ANNOTATION) or 1)
        return len(pods) < size or any((p.get("status") or {}).get("phase") == "Pending" for p in pods)


def _storage(revision_data: dict) -> dict:
    """§a: volumeClaimTemplates and persistentVolumeClaimRetentionPolicy go to both StatefulSets."""
    lwt = revision_data["spec"]["leaderWorkerTemplate"]
    return {k: clone(lwt[k]) for k in ("volumeClaimTemplates", "persistentVolumeClaimRetentionPolicy")
            if lwt.get(k)}


def _subgroup_annotations(revision_data: dict) -> dict[str, str]:
    policy = revision_data["spec"]["leaderWorkerTemplate"].get("subGroupPolicy") or {}
    if not policy.get("subGroupSize"):
        return {}
    return {SUBGROUP_SIZE_ANNOTATION: str(policy["subGroupSize"]),
            SUBGROUP_POLICY_TYPE_ANNOTATION: policy.get("subGroupPolicyType") or "LeaderWorker"}


def _set_true(conds: list[dict], ctype: str, now: str, gen: int) -> bool:
    """setCondition of §c (upstream controller.go): writes ``ctype`` True (again when its
    observedGeneration is stale); exclusive partners that are True flip to False keeping their
    reason and message. Returns whether anything changed."""
    reason, message = _MESSAGES[ctype]
    new = {"type": ctype, "status": "True", "reason": reason, "message": message,
           "lastTransitionTime": now, "observedGeneration": gen}
    found = changed = False
    for i, c in enumerate(conds):
        if c.get("type") == ctype:
            found = True
            if c.get("status") != "True" or c.get("observedGeneration") != gen:
                conds[i] = new
                changed = True
        elif (c.get("type"), ctype) in _EXCLUSIVE and c.get("status") == "True":
            c.update(status="False", lastTransitionTime=now, observedGeneration=gen)
            changed = True
    if not found:
        conds.append(new)
        changed = True
    return changed
