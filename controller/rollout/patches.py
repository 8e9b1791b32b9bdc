"""Building the merge patches the engine writes (pure)."""

from __future__ import annotations

from typing import Any

from lwsflow.controller.api.wire import Obj


def merge_diff(current: Any, wanted: Any) -> Any:
    """An RFC 7386 merge patch turning ``current`` into ``wanted`` (keys only in ``current`` -> null).

    Lists and scalars are replaced whole, as merge patch does; the result applied to ``current``
    gives exactly ``wanted``, so rollback restores the recorded template byte for byte.
    """
    if not isinstance(current, dict) or not isinstance(wanted, dict):
        return wanted
    out: dict[str, Any] = {}
    for k in current.keys() - wanted.keys():
        out[k] = None
    for k, v in wanted.items():
        if k not in current:
            out[k] = v
        elif current[k] != v:
            out[k] = merge_diff(current[k], v)
    return out


def partition_patch(partition: int) -> Obj:
    return {"spec": {"rolloutStrategy": {"type": "RollingUpdate",
                                         "rollingUpdateConfiguration": {"partition": partition}}}}


def deep_merge(a: Obj, b: Obj) -> Obj:
    """``a`` with ``b`` merged in (dicts recursively; ``b`` wins)."""
    out = dict(a)
    for k, v in b.items():
        out[k] = deep_merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out
