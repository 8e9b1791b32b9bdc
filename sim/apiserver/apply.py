"""Server-side apply and ``metadata.managedFields``: a compact model of the API server's field manager.

Every write through the API records which manager set which fields (``FieldsV1`` sets: ``f:`` map
keys, ``k:`` list items by merge key, ``v:`` set members; other lists are atomic leaves). An apply
(``kubectl apply --server-side``) merges the applied configuration into the live object, removes the
fields this manager applied before and no longer applies (unless someone else also owns them), and
refuses with 409 when another manager owns a field the apply would change, unless ``force=true``.
Status and scale writes are not tracked (kube-apiserver records them under a subresource; no client
of ours reads that).
"""

from __future__ import annotations

import copy
import json
from typing import Any

from lwsflow.controller.errors import Conflict
from lwsflow.sim.apiserver.patch import MERGE_PRIMITIVE_LISTS, merge_key

Path = tuple[str, ...]
_META_TRACKED = ("labels", "annotations", "finalizers", "ownerReferences")


def field_set(obj: dict[str, Any], *, skip_status: bool = True) -> set[Path]:
    """The leaf fields of a manifest, as managedFields counts them (identity fields excluded)."""
    out: set[Path] = set()
    for k, v in obj.items():
        if k in ("apiVersion", "kind") or (k == "status" and skip_status):
            continue
        if k == "metadata":
            for mk in _META_TRACKED:
                if mk in (v or {}):
                    _walk(v[mk], ("f:metadata", f"f:{mk}"), mk, "metadata", out)
            continue
        _walk(v, (f"f:{k}",), k, "", out)
    return out


def _walk(v: Any, path: Path, field: str, parent: str, out: set[Path]) -> None:
    if isinstance(v, dict) and v:
        for k, sub in v.items():
            _walk(sub, (*path, f"f:{k}"), k, field, out)
        return
    if isinstance(v, list) and v:
        key = merge_key(field, parent)
        if key and all(isinstance(x, dict) and key in x for x in v):
            for item in v:
                ipath = (*path, "k:" + json.dumps({key: item[key]}, separators=(",", ":")))
                out.add((*ipath, "."))
                _walk({k: x for k, x in item.items()}, ipath, field, parent, out)
            return
        if field in MERGE_PRIMITIVE_LISTS:
            out.update((*path, "v:" + json.dumps(x)) for x in v)
            return
    out.add(path)


def _step(cur: Any, elem: str, field: str, parent: str) -> tuple[Any, bool]:
    if elem.startswith("f:"):
        return (cur.get(elem[2:]), elem[2:] in cur) if isinstance(cur, dict) else (None, False)
    if elem.startswith("k:") and isinstance(cur, list):
        want = json.loads(elem[2:])
        for item in cur:
            if isinstance(item, dict) and all(item.get(a) == b for a, b in want.items()):
                return item, True
    if elem.startswith("v:") and isinstance(cur, list):
        val = json.loads(elem[2:])
        return val, val in cur
    return None, False


def value_at(obj: Any, path: Path) -> tuple[Any, bool]:
    cur, field, parent = obj, "", ""
    for elem in path:
        if elem == ".":
            break
        cur, ok = _step(cur, elem, field, parent)
        if not ok:
            return None, False
        if elem.startswith("f:"):
            parent, field = field, elem[2:]
    return cur, True


def remove_path(obj: dict[str, Any], path: Path) -> None:
    """Delete the field (or list item) at ``path`` from ``obj`` in place, when present."""
    path = path[:-1] if path and path[-1] == "." else path
    holder, ok = value_at(obj, path[:-1]) if len(path) > 1 else (obj, True)
    if not ok:
        return
    last = path[-1]
    if last.startswith("f:") and isinstance(holder, dict):
        holder.pop(last[2:], None)
    elif isinstance(holder, list):
        item, found = _step(holder, last, "", "")
        if found:
            holder.remove(item)
    if not holder and len(path) > 1:
        remove_path(obj, path[:-1])  # a map or list emptied by the removal goes too, as upstream


def to_fields_v1(paths: set[Path]) -> dict[str, Any]:
    tree: dict[str, Any] = {}
    for p in sorted(paths):
        node = tree
        for elem in p:
            node = node.setdefault(elem, {})
    return tree


def from_fields_v1(tree: dict[str, Any], prefix: Path = ()) -> set[Path]:
    out: set[Path] = set()
    for k, v in tree.items():
        if v:
            out |= from_fields_v1(v, (*prefix, k))
        else:
            out.add((*prefix, k))
    return out


def ssa_merge(live: Any, applied: Any, field: str = "", parent: str = "") -> Any:
    """Merge an applied configuration into the live object: maps recurse, keyed lists merge by key."""
    if isinstance(applied, dict) and isinstance(live, dict):
        out = dict(live)
        for k, v in applied.items():
            out[k] = ssa_merge(live.get(k), v, k, field)
        return out
    if isinstance(applied, list) and isinstance(live, list):
        key = merge_key(field, parent)
        if key and all(isinstance(x, dict) and key in x for x in applied + live):
            items = [copy.deepcopy(x) for x in live]
            for item in applied:
                idx = next((i for i, c in enumerate(items) if c.get(key) == item[key]), None)
                if idx is None:
                    items.append(copy.deepcopy(item))
                else:
                    items[idx] = ssa_merge(items[idx], item, field, parent)
            return items
        if field in MERGE_PRIMITIVE_LISTS:
            return live + [x for x in applied if x not in live]
    return copy.deepcopy(applied)


def _entries(obj: dict[str, Any]) -> list[dict[str, Any]]:
    return list(obj.get("metadata", {}).get("managedFields") or [])


def _owned(entry: dict[str, Any]) -> set[Path]:
    return from_fields_v1(entry.get("fieldsV1") or {})


def _entry(manager: str, operation: str, api_version: str, now: str, paths: set[Path]) -> dict[str, Any]:
    return {
        "manager": manager,
        "operation": operation,
        "apiVersion": api_version,
        "time": now,
        "fieldsType": "FieldsV1",
        "fieldsV1": to_fields_v1(paths),
    }


def _set_entries(obj: dict[str, Any], entries: list[dict[str, Any]]) -> None:
    kept = [e for e in entries if e.get("fieldsV1")]
    meta = obj.setdefault("metadata", {})
    if kept:
        meta["managedFields"] = kept
    else:
        meta.pop("managedFields", None)


def record_update(old: dict[str, Any] | None, new: dict[str, Any], manager: str, now: str) -> None:
    """Give ``manager`` (operation Update) the fields this write changed, in ``new`` in place."""
    new_fields = field_set(new)
    changed = {p for p in new_fields if old is None or value_at(old, p) != value_at(new, p)}
    entries = []
    mine: set[Path] = set(changed)
    previous: dict[str, Any] | None = None
    for e in _entries(old or {}):
        owned = _owned(e) & new_fields
        if e.get("manager") == manager and e.get("operation") == "Update":
            mine |= owned
            previous = e
            continue
        entries.append(
            e
            if not owned & changed and owned == _owned(e)
            else dict(e, fieldsV1=to_fields_v1(owned - changed))
        )
    if previous is not None and mine == _owned(previous):
        entries.append(previous)  # nothing new owned: keep the entry (and its time): a no-op stays a no-op
    elif mine:
        entries.append(_entry(manager, "Update", new.get("apiVersion", ""), now, mine))
    _set_entries(new, entries)


def apply(
    live: dict[str, Any], applied: dict[str, Any], manager: str, force: bool, now: str
) -> dict[str, Any]:
    """The object after ``manager`` applies ``applied`` to ``live`` (409 Conflict on contested fields)."""
    applied_fields = field_set(applied)
    entries = _entries(live)
    previous: set[Path] = set()
    others: list[tuple[dict[str, Any], set[Path]]] = []
    for e in entries:
        if e.get("manager") == manager and e.get("operation") == "Apply":
            previous = _owned(e)
        else:
            others.append((e, _owned(e)))
    # "." marks a list item's existence, not a value: only leaves can conflict
    conflicts = [
        (e["manager"], p)
        for e, owned in others
        for p in sorted(owned & applied_fields)
        if p[-1] != "." and value_at(live, p) != value_at(applied, p)
    ]
    if conflicts and not force:
        raise _conflict_error(conflicts, str(applied.get("apiVersion", "")))
    out = copy.deepcopy(live)
    still_owned = set().union(*(owned for _, owned in others)) if others else set()
    dropped = previous - applied_fields - still_owned
    # a dropped list item goes whole: skip its own leaves (removing them first would change its key)
    items = {p[:-1] for p in dropped if p[-1] == "."}
    for p in sorted(dropped, key=len, reverse=True):
        if p[-1] == "." or not any(p[:k] in items for k in range(1, len(p))):
            remove_path(out, p)
    body = {k: v for k, v in applied.items() if k not in ("metadata", "status")}
    out = ssa_merge(out, body)
    ameta = applied.get("metadata") or {}
    ometa = out.setdefault("metadata", {})
    for mk in _META_TRACKED:
        if mk in ameta:
            ometa[mk] = ssa_merge(ometa.get(mk), ameta[mk], mk, "metadata")
    taken = {p for _, p in conflicts}  # with force, the applier takes the contested fields over
    new_entries = [dict(e, fieldsV1=to_fields_v1(owned - taken)) for e, owned in others]
    new_entries.append(_entry(manager, "Apply", applied.get("apiVersion", ""), now, applied_fields))
    _set_entries(out, new_entries)
    return out


def render_path(path: Path) -> str:
    """A field path as kube-apiserver prints it: ``.spec.containers[name="nginx"].image``."""
    out = ""
    for elem in path:
        if elem.startswith("f:"):
            out += "." + elem[2:]
        elif elem.startswith("k:"):
            out += "[" + ",".join(f"{k}={json.dumps(v)}" for k, v in json.loads(elem[2:]).items()) + "]"
        elif elem.startswith("v:"):
            out += f"[={elem[2:]}]"
    return out


def _conflict_error(conflicts: list[tuple[str, Path]], api_version: str) -> Conflict:
    causes = [
        {"reason": "FieldManagerConflict", "message": f'conflict with "{m}"', "field": render_path(p)}
        for m, p in conflicts
    ]
    managers = sorted({m for m, _ in conflicts})
    who = ", ".join(f'"{m}"' for m in managers)
    if len(conflicts) == 1:
        msg = f"Apply failed with 1 conflict: conflict with {who} using {api_version}: {causes[0]['field']}"
    else:
        listed = "".join(f"\n- {c['field']}" for c in causes)
        msg = (
            f"Apply failed with {len(conflicts)} conflicts: conflicts with {who} using {api_version}:{listed}"
        )
    return Conflict(msg, details={"causes": causes})
