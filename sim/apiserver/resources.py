"""The resource verbs over a ``Store``: get, list, create, update, patch, delete, deletecollection and
the ``scale`` subresource, with admission, managedFields and dry-run, as kube-apiserver does them.

Read-modify-write verbs (patch, scale) run under the store lock, so they never lose a concurrent
update (kube-apiserver retries them internally on conflict; holding the lock is the equivalent).
"""

from __future__ import annotations

import base64
import copy
import json
from dataclasses import dataclass, field
from typing import Any

from lwsflow.controller.errors import BadRequest, Conflict, Forbidden, NotFound, Unprocessable
from lwsflow.controller.yamlio import MAX_DEPTH, parse_yaml_documents
from lwsflow.sim import claims, kinds, serviceaccounts
from lwsflow.sim.apiserver import apply as ssa
from lwsflow.sim.apiserver import crds
from lwsflow.sim.apiserver.admission import admit, check_unknown, has_custom_schema, is_crd, schema_of
from lwsflow.sim.apiserver.patch import json_merge_patch, json_patch, strategic_merge
from lwsflow.sim.apiserver.routing import Route
from lwsflow.sim.apiserver.typeerrors import typed_patch_error
from lwsflow.sim.namespaces import (
    SYSTEM_NAMESPACES,
    ensure_system_namespaces,
    namespace_defaults,
    purge_namespace,
    require_namespace,
)
from lwsflow.sim.store import Event, Store, dotted, rfc3339

MERGE, JSON_PATCH, STRATEGIC, APPLY = (
    "application/merge-patch+json",
    "application/json-patch+json",
    "application/strategic-merge-patch+json",
    "application/apply-patch+yaml",
)


@dataclass
class WriteOptions:
    """Query parameters of a write."""

    manager: str = ""
    manager_given: bool = False  # fieldManager was on the query (apply requires it; others default it)
    field_validation: str = "Warn"
    dry_run: bool = False
    force: bool = False
    warnings: list[str] = field(default_factory=list)


def decode_body(raw: bytes, content_type: str = "") -> Any:
    """A request body as JSON (or YAML, which apply-patch+yaml and kubectl may send)."""
    if "protobuf" in content_type:
        from lwsflow.sim.apiserver.protobuf import decode_k8s_protobuf

        decoded = decode_k8s_protobuf(raw)
        _check_depth(decoded)  # a RawExtension carries JSON of its own
        return decoded
    try:
        doc = json.loads(raw or b"null")
    except RecursionError:
        raise BadRequest(f"request body nested deeper than {MAX_DEPTH} levels") from None
    except ValueError:
        docs = parse_yaml_documents(raw, source="request body")  # bounded: depth, size, alias bombs
        if len(docs) != 1:
            raise BadRequest("the request body must hold exactly one document") from None
        return docs[0]
    _check_depth(doc)
    return doc


def _check_depth(doc: Any) -> None:
    """Refuse JSON nested deeper than the YAML loader allows (the patch code recurses over it)."""
    stack: list[tuple[Any, int]] = [(doc, 0)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise BadRequest(f"request body nested deeper than {MAX_DEPTH} levels")
        if isinstance(node, dict):
            stack.extend((v, depth + 1) for v in node.values())
        elif isinstance(node, list):
            stack.extend((v, depth + 1) for v in node)


class Unsupported(BadRequest):
    status, reason = 415, "UnsupportedMediaType"


def _continue_token(ns: str, name: str, rv: int) -> str:
    return base64.urlsafe_b64encode(json.dumps([ns, name, rv]).encode()).decode()


class Resources:
    """Verbs on the objects of one store."""

    def __init__(self, store: Store) -> None:
        self.store = store
        ensure_system_namespaces(store)
        store.subscribe(_serve_crds)  # an applied CRD's kind is served once it is stored

    # -- reads ---------------------------------------------------------------------------------------
    def get(self, route: Route) -> dict[str, Any]:
        obj = self.store.get(route.rtype.key, route.namespace, route.name)
        return self.scale_of(route.rtype, obj) if route.subresource == "scale" else obj

    def list(self, route: Route, q: dict[str, str]) -> dict[str, Any]:
        items, rv = self.store.list(
            route.rtype.key, route.namespace or None, q.get("labelSelector", ""), q.get("fieldSelector", "")
        )
        meta: dict[str, Any] = {"resourceVersion": str(rv)}
        token = q.get("continue")
        if token:
            try:
                ns, name, rv0 = json.loads(base64.urlsafe_b64decode(token))
            except ValueError:
                raise BadRequest("invalid continue token") from None
            items = [
                o for o in items if (o["metadata"].get("namespace", ""), o["metadata"]["name"]) > (ns, name)
            ]
            meta["resourceVersion"] = str(rv0)
        limit = int(q.get("limit") or 0)
        if limit > 0 and len(items) > limit:
            last = items[limit - 1]["metadata"]
            meta["continue"] = _continue_token(
                last.get("namespace", ""), last["name"], int(meta["resourceVersion"])
            )
            meta["remainingItemCount"] = len(items) - limit
            items = items[:limit]
        t = route.rtype
        return {"kind": t.list_kind, "apiVersion": t.api_version, "metadata": meta, "items": items}

    # -- writes --------------------------------------------------------------------------------------
    def _check_identity(self, route: Route, obj: Any) -> dict[str, Any]:
        if not isinstance(obj, dict):
            raise BadRequest("the request body must be a JSON object")
        t = route.rtype
        if obj.get("kind", t.kind) != t.kind or obj.get("apiVersion", t.api_version) != t.api_version:
            raise BadRequest(
                f"the API version in the data ({obj.get('apiVersion')}) does not match the "
                f"expected API version ({t.api_version}) or kind {obj.get('kind')} != {t.kind}"
            )
        meta = obj.setdefault("metadata", {})
        if not isinstance(meta, dict):
            raise BadRequest("metadata must be an object")
        if t.namespaced:
            if meta.get("namespace") and route.namespace and meta["namespace"] != route.namespace:
                raise BadRequest(
                    "the namespace of the provided object does not match the namespace sent on the request"
                )
            meta["namespace"] = route.namespace or meta.get("namespace") or "default"
        if route.name and meta.get("name") and meta["name"] != route.name:
            raise BadRequest("the name of the object does not match the name on the URL")
        if route.name:
            meta["name"] = route.name
        return obj

    def create(self, route: Route, body: Any, opts: WriteOptions) -> dict[str, Any]:
        obj = self._check_identity(route, body)
        obj.setdefault("apiVersion", route.rtype.api_version)
        obj.setdefault("kind", route.rtype.kind)
        if route.rtype.has_status and route.rtype.key != kinds.NAMESPACE.key:
            obj.pop("status", None)  # status is written through the status subresource only
        for k in ("resourceVersion", "uid", "creationTimestamp", "generation", "deletionTimestamp",
                  "deletionGracePeriodSeconds"):
            obj["metadata"].pop(k, None)
        if route.rtype is kinds.NAMESPACE:
            namespace_defaults(obj)  # no namespace controller: Active at once
        if route.rtype is kinds.PVC:
            claims.bind(obj)  # no storage model: bound at once
        if route.rtype is kinds.EVENT:
            now = rfc3339(self.store.now())
            obj.setdefault("firstTimestamp", now)
            obj.setdefault("lastTimestamp", now)
        require_namespace(self.store, route.rtype, obj["metadata"].get("namespace", ""))
        if route.rtype is kinds.POD:
            serviceaccounts.admit_pod(self.store, obj)
        obj, opts.warnings = admit(route.rtype, obj, None, opts.field_validation, self.store.defaulter)
        ssa.record_update(None, obj, opts.manager, rfc3339(self.store.now()))
        if opts.dry_run:
            return obj
        return self.store.create(route.rtype.key, obj)

    def update(self, route: Route, body: Any, opts: WriteOptions) -> dict[str, Any]:
        if route.subresource == "scale":
            return self._write_scale(route, lambda _scale: body, opts)
        obj = self._check_identity(route, body)
        with self.store.lock:
            old = self.store.get(route.rtype.key, route.namespace, route.name)
            if is_crd(route.rtype) and not obj["metadata"].get("resourceVersion"):
                raise Unprocessable(
                    f'{route.rtype.kind}.{route.rtype.group} "{route.name}" is invalid: '
                    "metadata.resourceVersion: Invalid value: 0: must be specified for an update"
                )
            return self._commit(route, old, obj, opts)

    def patch(self, route: Route, raw: bytes, content_type: str, opts: WriteOptions) -> dict[str, Any]:
        ctype = content_type.split(";")[0].strip()
        if ctype == STRATEGIC and is_crd(route.rtype):
            raise Unsupported(
                f"the body of the request was in an unknown format - accepted media types "
                f"include: {JSON_PATCH}, {MERGE}, {APPLY}"
            )
        if ctype not in (MERGE, JSON_PATCH, STRATEGIC, APPLY):
            raise Unsupported(
                f"the body of the request was in an unknown format - accepted media types "
                f"include: {JSON_PATCH}, {MERGE}, {APPLY}, {STRATEGIC}"
            )
        body = decode_body(raw)
        if route.subresource == "scale":
            return self._write_scale(route, lambda scale: self._patched(scale, body, ctype), opts)
        with self.store.lock:
            old = self.store.try_get(route.rtype.key, route.namespace, route.name)
            if ctype == APPLY:
                return self._apply(route, old, body, opts)
            if old is None:
                raise NotFound(
                    f'{route.rtype.key} "{route.name}" not found',
                    details={"name": route.name, "group": route.rtype.group, "kind": route.rtype.plural},
                )
            new = self._patched(old, body, ctype)
            if not isinstance(new, dict):
                raise BadRequest("the patch does not produce an object")
            if not isinstance(body, dict) or "resourceVersion" not in (body.get("metadata") or {}):
                new.setdefault("metadata", {})["resourceVersion"] = old["metadata"]["resourceVersion"]
            return self._commit(route, old, new, opts)

    @staticmethod
    def _patched(obj: dict[str, Any], body: Any, ctype: str) -> Any:
        if ctype == JSON_PATCH:
            return json_patch(obj, body)
        if not isinstance(body, dict):
            raise BadRequest("a merge patch must be a JSON object")
        return strategic_merge(obj, body) if ctype == STRATEGIC else json_merge_patch(obj, body)

    def _apply(
        self, route: Route, old: dict[str, Any] | None, body: Any, opts: WriteOptions
    ) -> dict[str, Any]:
        if not opts.manager_given:
            raise BadRequest("PATCH requests with apply-patch+yaml require fieldManager to be set")
        applied = self._check_identity(route, body)
        if not applied.get("apiVersion") or not applied.get("kind"):
            raise BadRequest("apply patches must set apiVersion and kind")
        now = rfc3339(self.store.now())
        schema = schema_of(route.rtype) if route.subresource != "status" else None
        if old is None:
            require_namespace(self.store, route.rtype, route.namespace)
            opts.warnings = check_unknown(route.rtype, applied, opts.field_validation)
            if schema is not None and (err := typed_patch_error(route.rtype, applied, schema)):
                raise err
            new = ssa.apply(
                {
                    "apiVersion": applied["apiVersion"],
                    "kind": applied["kind"],
                    "metadata": {"name": route.name, "namespace": route.namespace},
                },
                applied,
                opts.manager,
                opts.force,
                now,
            )
            if route.rtype is kinds.NAMESPACE:
                namespace_defaults(new)
            if route.rtype is kinds.PVC:
                claims.bind(new)
            if route.rtype is kinds.POD:
                serviceaccounts.admit_pod(self.store, new)
            new, _ = admit(route.rtype, new, None, "Ignore", self.store.defaulter)
            if opts.dry_run:
                return new
            return self.store.create(route.rtype.key, new)
        # unknown fields are refused or pruned before they get an owner
        opts.warnings = check_unknown(route.rtype, applied, opts.field_validation)
        if schema is not None and (err := typed_patch_error(route.rtype, applied, schema)):
            raise err  # structured-merge-diff types the patch first
        if route.subresource == "status":  # status applies merge; their ownership is not tracked
            new = {**old, "status": ssa.ssa_merge(old.get("status") or {}, applied.get("status") or {})}
        else:
            new = ssa.apply(old, applied, opts.manager, opts.force, now)
        obj, _ = admit(route.rtype, new, old, "Ignore", self.store.defaulter)
        if opts.dry_run:
            return obj
        return self.store.replace(route.rtype.key, obj, subresource=route.subresource, check_version=False)

    def _commit(
        self, route: Route, old: dict[str, Any], new: dict[str, Any], opts: WriteOptions
    ) -> dict[str, Any]:
        t = route.rtype
        new["metadata"]["namespace"] = route.namespace
        if not t.namespaced:
            new["metadata"].pop("namespace", None)
        new.setdefault("apiVersion", t.api_version)
        new.setdefault("kind", t.kind)
        if route.subresource == "status":
            candidate = {**old, "status": new.get("status")}
            candidate["metadata"] = {
                **old["metadata"],
                "resourceVersion": new["metadata"].get("resourceVersion"),
            }
            # the spec is unchanged, so the update rules (about spec fields) have nothing to compare; a
            # structural schema's CEL rules get the stored object, to let its unchanged spec pass
            # (kube-apiserver's ratcheting: a policy stored before a rule existed still takes status)
            obj, opts.warnings = admit(t, candidate, old if has_custom_schema(t) else None, "Ignore")
        else:
            if t.has_status:
                new = (
                    {**new, "status": old.get("status")}
                    if "status" in old
                    else {k: v for k, v in new.items() if k != "status"}
                )
            obj, opts.warnings = admit(t, new, old, opts.field_validation, self.store.defaulter)
            # ownership is the server's record: managedFields sent by the client are not taken over
            ssa.record_update(old, obj, opts.manager, rfc3339(self.store.now()))
        if opts.dry_run:
            return obj
        return self.store.replace(t.key, obj, subresource=route.subresource)

    def delete(self, route: Route, q: dict[str, str], body: Any) -> dict[str, Any]:
        opts = body if isinstance(body, dict) else {}
        propagation = q.get("propagationPolicy") or opts.get("propagationPolicy") or "Background"
        rv = (opts.get("preconditions") or {}).get("resourceVersion")
        grace = _grace_period(q, opts)
        if q.get("dryRun") == "All" or "All" in (opts.get("dryRun") or []):
            return self.store.get(route.rtype.key, route.namespace, route.name)
        if route.rtype is kinds.NAMESPACE and route.name in SYSTEM_NAMESPACES:
            raise Forbidden(
                f'namespaces "{route.name}" is forbidden: this namespace may not be deleted',
                details={"name": route.name, "kind": "namespaces"},
            )
        with self.store.lock:
            obj = self.store.delete(
                route.rtype.key, route.namespace, route.name, propagation=propagation, resource_version=rv,
                grace_period=grace,
            )
            if route.rtype is kinds.NAMESPACE:
                purge_namespace(self.store, route.name)
        if self.store.try_get(route.rtype.key, route.namespace, route.name) is not None:
            return obj  # still there (finalizers pending): the API answers with the object
        t = route.rtype
        return {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Success",
            "details": {
                "name": route.name,
                "group": t.group,
                "kind": t.plural,
                "uid": obj["metadata"].get("uid"),
            },
        }

    def delete_collection(self, route: Route, q: dict[str, str]) -> dict[str, Any]:
        items, _ = self.store.list(
            route.rtype.key, route.namespace or None, q.get("labelSelector", ""), q.get("fieldSelector", "")
        )
        gone = []
        for o in items:
            try:
                gone.append(
                    self.store.delete(
                        route.rtype.key,
                        o["metadata"].get("namespace", ""),
                        o["metadata"]["name"],
                        propagation=q.get("propagationPolicy") or "Background",
                        grace_period=_grace_period(q, {}),
                    )
                )
            except NotFound:
                continue
        t = route.rtype
        return {"kind": t.list_kind, "apiVersion": t.api_version, "metadata": {}, "items": gone}

    # -- scale ---------------------------------------------------------------------------------------
    @staticmethod
    def scale_of(t: kinds.ResourceType, obj: dict[str, Any]) -> dict[str, Any]:
        """The autoscaling/v1 Scale view of an object, from the kind's scale paths."""
        selector = dotted(obj, t.scale_selector_path) if t.scale_selector_path else None
        if selector is None and t is kinds.STATEFULSET:
            labels = dotted(obj, "spec.selector.matchLabels") or {}
            selector = ",".join(f"{k}={v}" for k, v in sorted(labels.items()))
        meta = obj["metadata"]
        status: dict[str, Any] = {"replicas": int(dotted(obj, t.scale_status_path) or 0)}
        if selector:
            status["selector"] = selector
        return {
            "kind": "Scale",
            "apiVersion": "autoscaling/v1",
            "metadata": {
                k: meta[k]
                for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
                if k in meta
            },
            "spec": {"replicas": int(dotted(obj, t.scale_spec_path) or 0)},
            "status": status,
        }

    def _write_scale(self, route: Route, make: Any, opts: WriteOptions) -> dict[str, Any]:
        t = route.rtype
        with self.store.lock:
            old = self.store.get(t.key, route.namespace, route.name)
            scale = make(self.scale_of(t, old))
            if not isinstance(scale, dict):
                raise BadRequest("the request body must be a Scale object")
            want_rv = (scale.get("metadata") or {}).get("resourceVersion")
            if want_rv and want_rv != old["metadata"]["resourceVersion"]:
                raise Conflict(
                    f'Operation cannot be fulfilled on {t.plural}.{t.group} "{route.name}": the '
                    "object has been modified; please apply your changes to the latest version "
                    "and try again"
                )
            replicas = (scale.get("spec") or {}).get("replicas")
            if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
                raise Unprocessable(
                    f'Scale.autoscaling "{route.name}" is invalid: spec.replicas: Invalid '
                    f"value: {replicas!r}: must be greater than or equal to 0",
                    details={
                        "causes": [
                            {
                                "reason": "FieldValueInvalid",
                                "field": "spec.replicas",
                                "message": "must be greater than or equal to 0",
                            }
                        ]
                    },
                )
            new = copy.deepcopy(old)
            _set_dotted(new, t.scale_spec_path, replicas)
            main = Route(t, route.namespace, route.name, "")
            obj = self._commit(main, old, new, opts)
            return self.scale_of(t, obj)


def _grace_period(q: dict[str, str], opts: dict[str, Any]) -> int | None:
    """DeleteOptions.gracePeriodSeconds from the body or the query (``kubectl delete --grace-period``)."""
    raw = opts.get("gracePeriodSeconds", q.get("gracePeriodSeconds"))
    if raw is None or raw == "":
        return None
    try:
        return int(raw)
    except (TypeError, ValueError):
        raise BadRequest(f"invalid gracePeriodSeconds: {raw!r}") from None


def _set_dotted(obj: dict[str, Any], path: str, value: Any) -> None:
    parts = path.split(".")
    cur = obj
    for part in parts[:-1]:
        cur = cur.setdefault(part, {})
    cur[parts[-1]] = value


def _serve_crds(ev: Event) -> None:
    if ev.key == kinds.CRD.key:
        crds.on_event(ev.type, ev.object)
