"""Kubernetes scheduling semantics shared by the embedded cluster's scheduler and the rollout's
capacity check (one definition, so both agree on what may run where)."""

from __future__ import annotations

from collections.abc import Iterable

from lwsflow.controller.api.wire import Obj


def tolerates(tolerations: Iterable[Obj], taint: Obj) -> bool:
    """Whether a pod with ``tolerations`` may schedule on a node with ``taint`` (core/v1 rules)."""
    if taint.get("effect") == "PreferNoSchedule":
        return True
    for t in tolerations:
        if t.get("effect") and t.get("effect") != taint.get("effect"):
            continue
        if t.get("operator") == "Exists" and (not t.get("key") or t.get("key") == taint.get("key")):
            return True
        if t.get("key") == taint.get("key") and t.get("value", "") == taint.get("value", ""):
            return True
    return False
