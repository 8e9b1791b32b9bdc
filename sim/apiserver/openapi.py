"""OpenAPI v3 documents, enough for ``kubectl apply``/``create`` with their default validation.

kubectl (1.27+) asks ``/openapi/v3`` for the group-version documents and looks for a PATCH operation
carrying the kind's ``x-kubernetes-group-version-kind`` and a ``fieldValidation`` query parameter:
when found it leaves validation to the server (``fieldValidation=Strict``) instead of validating on
the client. kubectl's apply builds a strategic merge patch from OpenAPI only when the PATCH request
body lists ``application/strategic-merge-patch+json``; we never list it, so kubectl falls back to its
compiled-in types for core kinds and to a JSON merge patch for the CRDs, exactly as against a real
cluster. The CRDs' published schemas go into ``components`` so ``kubectl explain lws`` works.
"""

from __future__ import annotations

import hashlib
import json
from functools import cache
from typing import Any

from lwsflow.sim import kinds
from lwsflow.sim.apiserver.routing import group_versions

_CRD_PLURALS = ("leaderworkersets", "disaggregatedsets", "disaggregatedsetrolescalers",
                "rolloutpolicies",  # incluster: + lwsflow's own CRD
                "inferencepools", "httproutes")  # llm-d's request path (docs/llm-d.md)
_JSON = {"schema": {"type": "object"}}
_PATCH_TYPES = ("application/json-patch+json", "application/merge-patch+json", "application/apply-patch+yaml")


def _param(name: str, kind: str = "string") -> dict[str, Any]:
    return {"name": name, "in": "query", "schema": {"type": kind}, "uniqueItems": True}


def _op(
    t: kinds.ResourceType,
    action: str,
    op_id: str,
    params: list[dict[str, Any]],
    body_types: tuple[str, ...] = (),
) -> dict[str, Any]:
    op: dict[str, Any] = {
        "operationId": op_id,
        "x-kubernetes-action": action,
        "parameters": params,
        "x-kubernetes-group-version-kind": {"group": t.group, "version": t.version, "kind": t.kind},
        "responses": {"200": {"description": "OK", "content": {"application/json": _JSON}}},
    }
    if body_types:
        op["requestBody"] = {"content": {ct: _JSON for ct in body_types}, "required": True}
    return op


def paths_for(t: kinds.ResourceType) -> dict[str, Any]:
    prefix = f"/apis/{t.group}/{t.version}" if t.group else "/api/v1"
    base = f"{prefix}/namespaces/{{namespace}}/{t.plural}" if t.namespaced else f"{prefix}/{t.plural}"
    write = [_param("dryRun"), _param("fieldManager"), _param("fieldValidation")]
    patch = [*write, _param("force", "boolean")]
    item = {
        "get": _op(t, "get", f"read{t.kind}", []),
        "put": _op(t, "put", f"replace{t.kind}", write, ("application/json", "application/yaml")),
        "patch": _op(t, "patch", f"patch{t.kind}", patch, _PATCH_TYPES),
        "delete": _op(t, "delete", f"delete{t.kind}", [_param("dryRun"), _param("propagationPolicy")]),
    }
    paths: dict[str, Any] = {
        base: {
            "get": _op(
                t,
                "list",
                f"list{t.kind}",
                [_param("labelSelector"), _param("fieldSelector"), _param("watch", "boolean")],
            ),
            "post": _op(t, "post", f"create{t.kind}", write, ("application/json", "application/yaml")),
            "delete": _op(t, "deletecollection", f"deleteCollection{t.kind}", [_param("labelSelector")]),
        },
        f"{base}/{{name}}": item,
    }
    if t.has_status:
        paths[f"{base}/{{name}}/status"] = {k: item[k] for k in ("get", "put", "patch")}
    if t.has_scale:
        paths[f"{base}/{{name}}/scale"] = {k: item[k] for k in ("get", "put", "patch")}
    return paths


def _schema_of(t: kinds.ResourceType) -> dict[str, Any] | None:
    """The published schema of a custom kind: packaged, or from an applied CRD; None for core kinds."""
    if t.key in kinds.SCHEMAS:
        return kinds.SCHEMAS[t.key]
    if t.plural not in _CRD_PLURALS:
        return None
    from lwsflow.controller.api.crd import crd_info

    return crd_info(t.plural).schema


def schemas_for(t: kinds.ResourceType) -> dict[str, Any]:
    published = _schema_of(t)
    if published is None:
        return {}
    schema = dict(published)
    schema["x-kubernetes-group-version-kind"] = [{"group": t.group, "version": t.version, "kind": t.kind}]
    rev = ".".join(reversed(t.group.split(".")))
    return {f"{rev}.{t.version}.{t.kind}": schema}


def gv_path(group: str, version: str) -> str:
    return f"apis/{group}/{version}" if group else "api/v1"


def gv_document(group: str, version: str) -> bytes:
    """The serialized OpenAPI v3 document of one group-version (cached: the CRD schemas are large)."""
    return _gv_document(group, version, kinds.generation())


@cache
def _gv_document(group: str, version: str, _generation: int) -> bytes:
    paths: dict[str, Any] = {}
    schemas: dict[str, Any] = {}
    for t in kinds.ALL:
        if t.group == group and t.version == version:
            paths.update(paths_for(t))
            schemas.update(schemas_for(t))
    doc = {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.37.1"},
        "paths": paths,
        "components": {"schemas": schemas},
    }
    return json.dumps(doc, separators=(",", ":")).encode()


def _hash(group: str, version: str) -> str:
    return hashlib.sha512(gv_document(group, version)).hexdigest()[:32].upper()


def root_document() -> bytes:
    return _root_document(kinds.generation())


@cache
def _root_document(_generation: int) -> bytes:
    paths = {
        gv_path(g, v): {"serverRelativeURL": f"/openapi/v3/{gv_path(g, v)}?hash={_hash(g, v)}"}
        for g, v in group_versions()
    }
    return json.dumps({"paths": paths}).encode()


def document_for_path(path: str) -> bytes | None:
    """The document for ``/openapi/v3/<gv path>`` (None when unknown)."""
    rest = path.removeprefix("/openapi/v3/").strip("/")
    for g, v in group_versions():
        if gv_path(g, v) == rest:
            return gv_document(g, v)
    return None
