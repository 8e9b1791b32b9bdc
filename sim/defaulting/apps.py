"""A StatefulSet's defaults (SetDefaults_StatefulSet, pkg/apis/apps/v1/defaults.go), its template's
pod spec and claim templates, and the field the registry drops while its feature gate is off
(``rollingUpdate.maxUnavailable``, MaxUnavailableStatefulSet: dropStatefulSetDisabledFields).
"""

from __future__ import annotations

from typing import Any

from lwsflow.sim.defaulting.other import default_claim
from lwsflow.sim.defaulting.podspec import default_pod_spec
from lwsflow.sim.defaulting.table import NIL, ZERO, Default, dicts, fill

MAX_UNAVAILABLE_GATE = "MaxUnavailableStatefulSet"
SPEC: tuple[Default, ...] = (
    ("podManagementPolicy", "OrderedReady", ZERO),
    ("replicas", 1, NIL),
    ("revisionHistoryLimit", 10, NIL),
    ("persistentVolumeClaimRetentionPolicy", {}, NIL),
)
RETENTION: tuple[Default, ...] = (("whenDeleted", "Retain", ZERO), ("whenScaled", "Retain", ZERO))


def default_statefulset(sts: dict[str, Any], gates: frozenset[str]) -> None:
    spec = sts.get("spec")
    if not isinstance(spec, dict):
        return
    fill(spec, SPEC)
    fill(spec["persistentVolumeClaimRetentionPolicy"], RETENTION)
    strategy = spec.get("updateStrategy")
    if strategy is None:
        strategy = spec["updateStrategy"] = {}
    if isinstance(strategy, dict):
        if not strategy.get("type"):
            strategy["type"] = "RollingUpdate"
            strategy.setdefault("rollingUpdate", {})
        rolling = strategy.get("rollingUpdate")
        if strategy["type"] == "RollingUpdate" and isinstance(rolling, dict):
            fill(rolling, (("partition", 0, NIL),))
            if MAX_UNAVAILABLE_GATE in gates:
                fill(rolling, (("maxUnavailable", 1, NIL),))
    for template in dicts(spec, "template"):
        default_pod_spec(template.get("spec"))
    for claim in dicts(spec, "volumeClaimTemplates"):
        default_claim(claim)


def drop_disabled(sts: dict[str, Any], old: dict[str, Any] | None, gates: frozenset[str]) -> None:
    """Drop ``maxUnavailable`` while the gate is off, unless the stored object already uses it."""
    if MAX_UNAVAILABLE_GATE in gates or _max_unavailable(old) is not None:
        return
    for rolling in dicts(sts, "spec", "updateStrategy", "rollingUpdate"):
        rolling.pop("maxUnavailable", None)


def _max_unavailable(sts: dict[str, Any] | None) -> object:
    for rolling in dicts(sts, "spec", "updateStrategy", "rollingUpdate"):
        return rolling.get("maxUnavailable")
    return None
