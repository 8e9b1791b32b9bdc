"""Defaults of the other core kinds the project writes: a PersistentVolumeClaim (SetDefaults_
PersistentVolumeClaim and _Spec), a HorizontalPodAutoscaler (autoscaling/v2 SetDefaults_
HorizontalPodAutoscaler: minReplicas, the 80% CPU metric, the scaling rules of a given behavior).
Leases and ConfigMaps have none that show on the wire.
"""

from __future__ import annotations

import copy
from typing import Any

from lwsflow.sim.defaulting.table import NIL, Default, dicts, fill

CLAIM_SPEC: tuple[Default, ...] = (("volumeMode", "Filesystem", NIL),)
HPA_SPEC: tuple[Default, ...] = (
    ("minReplicas", 1, NIL),
    ("metrics", [{"type": "Resource", "resource": {"name": "cpu", "target": {
        "type": "Utilization", "averageUtilization": 80}}}], NIL),
)
_SCALE_UP = {"stabilizationWindowSeconds": 0, "selectPolicy": "Max", "policies": [
    {"type": "Pods", "value": 4, "periodSeconds": 15},
    {"type": "Percent", "value": 100, "periodSeconds": 15},
]}
_SCALE_DOWN = {"selectPolicy": "Max", "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}]}


def default_claim(claim: dict[str, Any]) -> None:
    for spec in dicts(claim, "spec"):
        fill(spec, CLAIM_SPEC)
    status = claim.get("status")
    if status is None:
        claim["status"] = {"phase": "Pending"}
    elif isinstance(status, dict) and not status.get("phase"):
        claim["status"] = {**status, "phase": "Pending"}  # a new dict: the stored status may be shared


def default_hpa(hpa: dict[str, Any]) -> None:
    spec = hpa.get("spec")
    if not isinstance(spec, dict):
        return
    if spec.get("metrics") == []:
        del spec["metrics"]
    fill(spec, HPA_SPEC)
    behavior = spec.get("behavior")
    if isinstance(behavior, dict):  # each missing part of a rule from the defaults
        for key, rules in (("scaleUp", _SCALE_UP), ("scaleDown", _SCALE_DOWN)):
            given = behavior.get(key)
            mine = {k: v for k, v in given.items() if v is not None} if isinstance(given, dict) else {}
            behavior[key] = {**copy.deepcopy(rules), **mine}
