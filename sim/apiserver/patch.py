"""The patch formats the API server accepts: JSON merge (RFC 7386), JSON patch (RFC 6902) and
strategic merge (core kinds; lists merged by the Kubernetes ``patchMergeKey`` of each field).

Errors are ``BadRequest``/``Unprocessable`` as kube-apiserver answers them; a failing JSON-patch
``test`` operation is 422 like upstream.
"""

from __future__ import annotations

import copy
from typing import Any

from lwsflow.controller.errors import BadRequest, Unprocessable

# patchMergeKey of list fields in the core API types (k8s.io/api), by field name; the parent field
# disambiguates where one name has two keys (container ports vs service ports).
MERGE_KEYS: dict[str, str] = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "env": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "imagePullSecrets": "name",
    "ownerReferences": "uid",
    "conditions": "type",
    "hostAliases": "ip",
    "topologySpreadConstraints": "topologyKey",
    "resourceClaims": "name",
    "containerStatuses": "name",
    "initContainerStatuses": "name",
    "addresses": "type",
    "taints": "key",
    "podIPs": "ip",
    "resizePolicy": "resourceName",
    "claims": "name",
    "schedulingGates": "name",
}
_PORT_KEY = {
    "containers": "containerPort",
    "initContainers": "containerPort",
    "ephemeralContainers": "containerPort",
}
MERGE_PRIMITIVE_LISTS = frozenset({"finalizers"})


def merge_key(field: str, parent: str) -> str | None:
    if field == "ports":
        return _PORT_KEY.get(parent, "port")
    return MERGE_KEYS.get(field)


def json_merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge recursively, ``null`` deletes, everything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = json_merge_patch(out.get(k), v)
    return out


# -- RFC 6902 ------------------------------------------------------------------------------------------
def _tokens(pointer: str) -> list[str]:
    if pointer == "":
        return []
    if not pointer.startswith("/"):
        raise BadRequest(f"invalid JSON pointer {pointer!r}")
    return [t.replace("~1", "/").replace("~0", "~") for t in pointer[1:].split("/")]


def _parent(doc: Any, tokens: list[str], op: str) -> tuple[Any, str]:
    cur = doc
    for t in tokens[:-1]:
        if isinstance(cur, dict) and t in cur:
            cur = cur[t]
        elif isinstance(cur, list) and t.isdigit() and int(t) < len(cur):
            cur = cur[int(t)]
        else:
            raise Unprocessable(
                f"the server rejected our request due to an error in our request: "
                f"{op} operation does not apply: doc is missing path"
            )
    return cur, tokens[-1]


def _get(doc: Any, pointer: str, op: str) -> Any:
    tokens = _tokens(pointer)
    if not tokens:
        return doc
    parent, last = _parent(doc, tokens, op)
    if isinstance(parent, dict) and last in parent:
        return parent[last]
    if isinstance(parent, list) and last.isdigit() and int(last) < len(parent):
        return parent[int(last)]
    raise Unprocessable(f"{op} operation does not apply: doc is missing path: {pointer}")


def _add(doc: Any, pointer: str, value: Any) -> Any:
    tokens = _tokens(pointer)
    if not tokens:
        return value
    parent, last = _parent(doc, tokens, "add")
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        if last == "-":
            parent.append(value)
        elif last.isdigit() and int(last) <= len(parent):
            parent.insert(int(last), value)
        else:
            raise Unprocessable(f"add operation does not apply: index out of range: {pointer}")
    else:
        raise Unprocessable(f"add operation does not apply: doc is missing path: {pointer}")
    return doc


def _remove(doc: Any, pointer: str, op: str = "remove") -> Any:
    tokens = _tokens(pointer)
    parent, last = _parent(doc, tokens, op)
    if isinstance(parent, dict) and last in parent:
        return parent.pop(last)
    if isinstance(parent, list) and last.isdigit() and int(last) < len(parent):
        return parent.pop(int(last))
    raise Unprocessable(f"{op} operation does not apply: doc is missing path: {pointer}")


def json_patch(doc: Any, ops: Any) -> Any:
    """RFC 6902 on a copy of ``doc``: add, remove, replace, move, copy, test."""
    if not isinstance(ops, list):
        raise BadRequest("json patch must be a list of operations")
    doc = copy.deepcopy(doc)
    for op in ops:
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise BadRequest(f"invalid json patch operation: {op!r}")
        kind, path = op["op"], op["path"]
        if kind in ("add", "replace", "test") and "value" not in op:
            raise BadRequest(f"{kind} operation requires a value")
        if kind == "add":
            doc = _add(doc, path, copy.deepcopy(op["value"]))
        elif kind == "remove":
            _remove(doc, path)
        elif kind == "replace":
            _remove(doc, path, "replace")
            doc = _add(doc, path, copy.deepcopy(op["value"]))
        elif kind == "move":
            value = _remove(doc, op.get("from", ""), "move")
            doc = _add(doc, path, value)
        elif kind == "copy":
            doc = _add(doc, path, copy.deepcopy(_get(doc, op.get("from", ""), "copy")))
        elif kind == "test":
            if _get(doc, path, "test") != op["value"]:
                raise Unprocessable(f"testing value {path} failed")
        else:
            raise BadRequest(f"unknown json patch operation {kind!r}")
    return doc


# -- strategic merge -----------------------------------------------------------------------------------
_DIRECTIVE = "$patch"
_ORDER = "$setElementOrder/"
_DELETE_PRIM = "$deleteFromPrimitiveList/"
_RETAIN = "$retainKeys"


def strategic_merge(target: Any, patch: Any, field: str = "", parent: str = "") -> Any:
    """Apply a strategic merge patch (directives ``$patch``, ``$setElementOrder``,
    ``$deleteFromPrimitiveList``, ``$retainKeys`` included) to a copy of ``target``."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if not isinstance(target, dict):
        target = {}
    directive = patch.get(_DIRECTIVE)
    if directive == "delete":
        return None
    if directive == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != _DIRECTIVE}
    out = dict(target)
    retain = patch.get(_RETAIN)
    if isinstance(retain, list):
        out = {k: v for k, v in out.items() if k in retain}
    orders: dict[str, list[Any]] = {}
    for k, v in patch.items():
        if k in (_DIRECTIVE, _RETAIN):
            continue
        if k.startswith(_ORDER):
            orders[k[len(_ORDER) :]] = v if isinstance(v, list) else []
            continue
        if k.startswith(_DELETE_PRIM):
            name = k[len(_DELETE_PRIM) :]
            if isinstance(out.get(name), list):
                out[name] = [x for x in out[name] if x not in (v or [])]
            continue
        if v is None:
            out.pop(k, None)
        elif isinstance(v, list):
            out[k] = _merge_list(out.get(k), v, k, field)
        elif isinstance(v, dict):
            merged = strategic_merge(out.get(k), v, k, field)
            if merged is None:
                out.pop(k, None)
            else:
                out[k] = merged
        else:
            out[k] = v
    for name, order in orders.items():
        if isinstance(out.get(name), list):
            out[name] = _reorder(out[name], order, merge_key(name, field))
    return out


def _merge_list(current: Any, patch: list[Any], field: str, parent: str) -> list[Any]:
    current = current if isinstance(current, list) else []
    if field in MERGE_PRIMITIVE_LISTS:
        return current + [x for x in patch if x not in current]
    key = merge_key(field, parent)
    if key is None or not all(isinstance(x, dict) for x in patch):
        return [x for x in copy.deepcopy(patch) if not (isinstance(x, dict) and x.get(_DIRECTIVE))]
    if any(isinstance(x, dict) and x.get(_DIRECTIVE) == "replace" for x in patch):
        return [x for x in copy.deepcopy(patch) if x.get(_DIRECTIVE) != "replace"]
    out = [copy.deepcopy(x) for x in current]
    for item in patch:
        idx = next(
            (i for i, c in enumerate(out) if isinstance(c, dict) and c.get(key) == item.get(key)), None
        )
        if item.get(_DIRECTIVE) == "delete":
            if idx is not None:
                out.pop(idx)
            continue
        if idx is None:
            out.append(strategic_merge({}, item, field, parent))
        else:
            out[idx] = strategic_merge(out[idx], item, field, parent)
    return out


def _reorder(items: list[Any], order: list[Any], key: str | None) -> list[Any]:
    def ident(x: Any) -> Any:
        return x.get(key) if key and isinstance(x, dict) else x

    rank = {repr(o.get(key) if key and isinstance(o, dict) else o): i for i, o in enumerate(order)}
    return sorted(items, key=lambda x: rank.get(repr(ident(x)), len(rank)))
