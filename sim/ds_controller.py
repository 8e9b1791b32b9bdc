"""The DisaggregatedSet controller of the embedded cluster (lws-semantics.md §f, main-branch status).

One child LWS per slice, revision and role (``<ds>-<slice>-<rev8>-<role>``). Without an old revision
every role's LWS is created/scaled to its desired replicas; with one, the coordinated cross-role
rollout runs: create the new revision's LWS at 0 (snapshotting ``initial-replicas`` on the old ones),
and whenever every new LWS is fully ready apply the next ``ds_planner.compute_next_step``. Existing
child LWS are only ever scaled. Per-role Services ``<lws>-prv`` exist for revisions ready on all
roles. Status: ``roleStatuses`` and exactly one of Available / Progressing True.

External roles read their replicas from ``DisaggregatedSetRoleScaler <ds>-<role>`` (created here;
its /scale is the API server's). Not modelled: placementPolicy affinity injection.
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING

from lwsflow.controller.api import labels as L
from lwsflow.controller.api.defaults import default_object
from lwsflow.sim import ds_planner
from lwsflow.sim.podutil import annotation, is_terminating, label, owner_ref
from lwsflow.sim.store import clone, rfc3339

if TYPE_CHECKING:
    from lwsflow.sim.cluster import Cluster

DS = "disaggregatedsets.disaggregatedset.x-k8s.io"
LWS = "leaderworkersets.leaderworkerset.x-k8s.io"
SCALER = "disaggregatedsetrolescalers.disaggregatedset.x-k8s.io"


def revision_hash(roles: list[dict]) -> str:
    """First 8 hex chars of SHA-256 over ``[{name, template}]`` (role names and templates only)."""
    doc = [
        {"name": r["name"], "template": (r.get("spec") or {}).get("leaderWorkerTemplate") or {}}
        for r in roles
    ]
    return hashlib.sha256(json.dumps(doc, separators=(",", ":")).encode()).hexdigest()[:8]


def _replicas(obj: dict) -> int:
    return int((obj.get("spec") or {}).get("replicas", 1))


def _is_external(role: dict) -> bool:
    return (role.get("scaling") or {}).get("mode") == "External"


def _role_replicas(role: dict) -> int:
    return int((role.get("spec") or {}).get("replicas", 1))


def _status(obj: dict, field: str) -> int:
    return int((obj.get("status") or {}).get(field, 0) or 0)



class DsController:
    """Reconciles DisaggregatedSets into child LWS, Services, scalers and status."""

    def __init__(self, cluster: Cluster) -> None:
        self.c = cluster
        # (ns, ds, slice) -> planner steps applied, as (old per role, new per role): for timelines
        self.steps: dict[tuple[str, str, int], list[tuple[tuple[int, ...], tuple[int, ...]]]] = {}

    def reconcile(self, ns: str, name: str) -> None:
        store = self.c.store
        ds = store.get_raw(DS, ns, name)
        if ds is None or is_terminating(ds):
            return
        spec = ds.get("spec") or {}
        roles = spec.get("roles") or []
        rev = revision_hash(roles)
        slices = int(spec.get("slices", 1) or 1)
        children = self._children(ds)
        for lws in children:
            if int(label(lws, L.DS_SLICE, "0")) >= slices:
                self.c.delete_object(LWS, ns, lws["metadata"]["name"])
        external = self._reconcile_scalers(ds, roles, children)
        for s in range(slices):
            mine = [
                o
                for o in children
                if label(o, L.DS_SLICE, "0") == str(s)
                and store.get_raw(LWS, ns, o["metadata"]["name"]) is not None
            ]
            self._reconcile_slice(ds, roles, rev, s, mine, external)
        self._services(ds, roles, rev)
        self._write_status(ds, roles, rev, external)

    def _children(self, ds: dict) -> list[dict]:
        """The live LeaderWorkerSets this DisaggregatedSet owns (read again after each change)."""
        ns, store = ds["metadata"]["namespace"], self.c.store
        return [
            o
            for n in self.c.owned_names(ds["metadata"]["uid"], LWS)
            if (o := store.get_raw(LWS, ns, n)) is not None
        ]

    # -- one slice ---------------------------------------------------------------------------------------
    def _reconcile_slice(self, ds: dict, roles: list[dict], rev: str, s: int, mine: list[dict],
                         external: dict[str, int]) -> None:
        ns = ds["metadata"]["namespace"]
        by_rev: dict[str, list[dict]] = {}
        for o in mine:
            by_rev.setdefault(label(o, L.DS_REVISION), []).append(o)
        for r, objs in list(by_rev.items()):
            if r != rev and all(_replicas(o) == 0 for o in objs):  # coordinated cleanup
                for o in objs:
                    self.c.delete_object(LWS, ns, o["metadata"]["name"])
                del by_rev[r]
        new = {label(o, L.DS_ROLE): o for o in by_rev.get(rev, [])}
        old_revs = sorted(
            (objs for r, objs in by_rev.items() if r != rev),
            key=lambda objs: -max(self.c.store.creation_order(o["metadata"]["uid"]) for o in objs),
        )  # newest first
        old = [o for objs in old_revs for o in objs]
        desired = {r["name"]: external.get(r["name"], _role_replicas(r)) for r in roles}
        if not old or sum(_replicas(o) for o in old) == 0:
            for role in roles:
                lws = new.get(role["name"])
                if lws is None:
                    self._create(ds, role, rev, s, desired[role["name"]])
                elif _replicas(lws) != desired[role["name"]]:
                    self._scale(lws, desired[role["name"]])
            return
        if not new:
            self.steps.pop((ns, ds["metadata"]["name"], s), None)
            for o in old:
                self._annotate_initial(o)
            for role in roles:
                self._create(ds, role, rev, s, 0)
            return
        if any(
            role["name"] not in new
            or _status(new[role["name"]], "readyReplicas") != _replicas(new[role["name"]])
            for role in roles
        ):
            return  # only the new revision's readiness gates a step
        names = [r["name"] for r in roles] + sorted(
            {label(o, L.DS_ROLE) for o in old} - {r["name"] for r in roles}
        )
        vectors = []
        for rname in names:
            role_spec = next((r for r in roles if r["name"] == rname), None)
            role_old = [o for o in old if label(o, L.DS_ROLE) == rname]
            target = desired.get(rname, 0)
            cur_new = _replicas(new[rname]) if rname in new else 0
            if rname in external:
                target = max(target, cur_new)  # External roles never shrink the new revision mid-rollout
            strategy = (role_spec or {}).get("spec", {}).get("rolloutStrategy") or {}
            ru = strategy.get("rollingUpdateConfiguration")
            surge, unavail = ds_planner.role_limits(ru, target)
            vectors.append(
                ds_planner.RoleVector(
                    rname,
                    sum(int(annotation(o, L.DS_INITIAL_REPLICAS) or _replicas(o)) for o in role_old),
                    sum(_replicas(o) for o in role_old),
                    cur_new,
                    target,
                    surge,
                    unavail,
                )
            )
        step = ds_planner.compute_next_step(vectors)
        log = self.steps.setdefault((ns, ds["metadata"]["name"], s), [])
        if not log:
            log.append((tuple(v.old for v in vectors), tuple(v.new for v in vectors)))
        if step is not None:
            log.append((step.old, step.new))
        if step is None:
            self.c.emit_event(
                ds,
                "RollingUpdateCompleted",
                f"Rolling update to revision {rev} completed",
                component="disaggregatedset",
            )
            return
        for vec, want_old, want_new in zip(vectors, step.old, step.new, strict=True):
            if vec.name in new and want_new != vec.new:
                self._scale(new[vec.name], want_new)
            self._drain_old(old_revs, vec.name, vec.old - want_old)

    def _drain_old(self, old_revs: list[list[dict]], role: str, reduce: int) -> None:
        for objs in old_revs:  # newest old revision first
            if reduce <= 0:
                return
            for o in objs:
                if label(o, L.DS_ROLE) != role or _replicas(o) == 0:
                    continue
                take = min(reduce, _replicas(o))
                reduce -= take
                if _replicas(o) - take == 0:
                    for other in objs:  # a revision whose role reached 0 goes to 0 as a whole
                        if _replicas(other):
                            self._scale(other, 0)
                else:
                    self._scale(o, _replicas(o) - take)

    def _create(self, ds: dict, role: dict, rev: str, s: int, replicas: int) -> None:
        ns, dname = ds["metadata"]["namespace"], ds["metadata"]["name"]
        auto = {
            "app": f"{dname}-{s}-{role['name']}",
            L.DS_NAME: dname,
            L.DS_ROLE: role["name"],
            L.DS_SLICE: str(s),
            L.DS_REVISION: rev,
        }
        spec = clone(role.get("spec") or {})
        spec["replicas"] = replicas
        lwt = spec.setdefault("leaderWorkerTemplate", {})
        for tkey in ("leaderTemplate", "workerTemplate"):
            if lwt.get(tkey) is not None:
                tm = lwt[tkey].setdefault("metadata", {})
                tm["labels"] = {**(tm.get("labels") or {}), **auto}
        rmeta = role.get("metadata") or {}
        # created through the API on a real cluster: the CRD's structural defaults and the LWS
        # webhook's (subdomainPolicy, rolloutStrategy, startupPolicy, ...) apply to the child too
        self.c.store.create(
            LWS,
            default_object({
                "apiVersion": L.LWS_API_VERSION,
                "kind": L.LWS_KIND,
                "metadata": {
                    "name": f"{dname}-{s}-{rev}-{role['name']}",
                    "namespace": ns,
                    "labels": {**(rmeta.get("labels") or {}), **auto},
                    "annotations": dict(rmeta.get("annotations") or {}),
                    "ownerReferences": [owner_ref(ds)],
                },
                "spec": spec,
            }),
        )

    def _scale(self, lws: dict, replicas: int) -> None:
        self.c.store.replace(LWS, {**lws, "spec": {**lws["spec"], "replicas": replicas}}, check_version=False)

    def _annotate_initial(self, lws: dict) -> None:
        ann = {**(lws["metadata"].get("annotations") or {}), L.DS_INITIAL_REPLICAS: str(_replicas(lws))}
        self.c.store.replace(
            LWS, {**lws, "metadata": {**lws["metadata"], "annotations": ann}}, check_version=False
        )

    # -- Services and status -----------------------------------------------------------------------------
    def _services(self, ds: dict, roles: list[dict], rev: str) -> None:
        store, ns = self.c.store, ds["metadata"]["namespace"]
        children = self._children(ds)
        ready_revs = set()
        for r in {label(o, L.DS_REVISION) for o in children}:
            lws_r = [o for o in children if label(o, L.DS_REVISION) == r]
            if all(
                any(label(o, L.DS_ROLE) == role["name"] and _status(o, "readyReplicas") >= 1 for o in lws_r)
                for role in roles
            ):
                ready_revs.add(r)
        for o in children:
            r, svc = label(o, L.DS_REVISION), f"{o['metadata']['name']}-prv"
            exists = store.get_raw("services", ns, svc) is not None
            if r == rev and r in ready_revs and not exists:  # only the target revision gets one
                sel = {
                    L.DS_NAME: ds["metadata"]["name"],
                    L.DS_ROLE: label(o, L.DS_ROLE),
                    L.DS_REVISION: r,
                    L.DS_SLICE: label(o, L.DS_SLICE),
                }
                store.create(
                    "services",
                    {
                        "apiVersion": "v1",
                        "kind": "Service",
                        "metadata": {
                            "name": svc,
                            "namespace": ns,
                            "labels": dict(sel),
                            "ownerReferences": [owner_ref(ds)],
                        },
                        "spec": {
                            "clusterIP": "None",
                            "clusterIPs": ["None"],
                            "selector": sel,
                            "type": "ClusterIP",
                        },
                    },
                )
        for svc in self.c.owned_names(ds["metadata"]["uid"], "services"):
            obj = store.get_raw("services", ns, svc)
            if obj is None:
                continue
            r, sl = label(obj, L.DS_REVISION), label(obj, L.DS_SLICE, "0")
            gone_slice = sl.isdigit() and int(sl) >= int((ds.get("spec") or {}).get("slices", 1) or 1)
            if gone_slice or (r != rev and r not in ready_revs):  # not ready on all roles any more
                store.delete("services", ns, svc)

    # -- External scaling: DisaggregatedSetRoleScaler <ds>-<role> -------------------------------------
    def _reconcile_scalers(self, ds: dict, roles: list[dict], children: list[dict]) -> dict[str, int]:
        """Desired replicas of External roles from their scalers, creating missing scalers (seeded
        with the role's current total when it switches from Static, else 1); stale ones go."""
        store, ns, dname = self.c.store, ds["metadata"]["namespace"], ds["metadata"]["name"]
        out: dict[str, int] = {}
        for role in roles:
            if not _is_external(role):
                continue
            sname = f"{dname}-{role['name']}"
            sc = store.get_raw(SCALER, ns, sname)
            if sc is None:
                current = [_replicas(o) for o in children if label(o, L.DS_ROLE) == role["name"]]
                seed = sum(current) if current else 1
                store.create(SCALER, {
                    "apiVersion": L.DS_API_VERSION, "kind": "DisaggregatedSetRoleScaler",
                    "metadata": {"name": sname, "namespace": ns,
                                 "labels": {L.DS_NAME: dname, L.DS_ROLE: role["name"]},
                                 "ownerReferences": [owner_ref(ds)]},
                    "spec": {"replicas": seed}})
                out[role["name"]] = seed
            else:
                out[role["name"]] = int((sc.get("spec") or {}).get("replicas", 1))
        for sname in self.c.owned_names(ds["metadata"]["uid"], SCALER):
            sc = store.get_raw(SCALER, ns, sname)
            if sc is not None and label(sc, L.DS_ROLE) not in out:
                store.delete(SCALER, ns, sname)
        return out

    def _write_scaler_status(self, ds: dict, role: str, replicas: int) -> None:
        ns, dname = ds["metadata"]["namespace"], ds["metadata"]["name"]
        sc = self.c.store.get_raw(SCALER, ns, f"{dname}-{role}")
        if sc is None:
            return
        status = {"replicas": replicas, "observedGeneration": sc["metadata"].get("generation", 1),
                  "selector": f"{L.DS_NAME}={dname},{L.DS_ROLE}={role},{L.WORKER_INDEX}=0"}
        if sc.get("status") != status:
            self.c.store.replace(SCALER, {**sc, "status": status}, subresource="status", check_version=False)

    def _write_status(self, ds: dict, roles: list[dict], rev: str, external: dict[str, int]) -> None:
        store = self.c.store
        children = self._children(ds)
        slices = int((ds.get("spec") or {}).get("slices", 1) or 1)
        role_statuses, available = [], True
        for role in roles:
            mine = [o for o in children if label(o, L.DS_ROLE) == role["name"]]
            st = {
                "name": role["name"],
                "replicas": sum(_status(o, "replicas") for o in mine),
                "readyReplicas": sum(_status(o, "readyReplicas") for o in mine),
                "updatedReplicas": sum(
                    _status(o, "updatedReplicas") for o in mine if label(o, L.DS_REVISION) == rev
                ),
            }
            want = external[role["name"]] if role["name"] in external else _role_replicas(role) * slices
            if _is_external(role):
                if role["name"] not in external:
                    available = False  # an External role without its scaler is never Available
                else:
                    self._write_scaler_status(ds, role["name"], st["replicas"])
            if not (st["replicas"] == st["readyReplicas"] == st["updatedReplicas"] == want):
                available = False
            role_statuses.append(st)
        old = ds.get("status") or {}
        now = rfc3339(self.c.now())
        conds = {c["type"]: dict(c) for c in old.get("conditions") or []}
        gen = ds["metadata"].get("generation", 1)
        for ctype, on, reason, msg in (
            ("Available", available, "AllRolesReady", "All roles are ready"),
            ("Progressing", not available, "RolloutInProgress", "Rollout is in progress"),
        ):
            cstatus = "True" if on else "False"
            c = conds.get(ctype)
            if c is None or c.get("status") != cstatus:
                conds[ctype] = {
                    "type": ctype,
                    "status": cstatus,
                    "reason": reason,
                    "message": msg,
                    "lastTransitionTime": now,
                    "observedGeneration": gen,
                }
            else:
                c["observedGeneration"] = gen
        status = {
            **old,
            "observedGeneration": gen,
            "roleStatuses": role_statuses,
            "conditions": [conds["Available"], conds["Progressing"]],
        }
        if status != old and self.c.config.ds_writes_status:
            store.replace(DS, {**ds, "status": status}, subresource="status", check_version=False)
