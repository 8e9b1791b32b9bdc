"""Defaulting like the API server (CRD structural defaults) followed by the LWS mutating webhook.

Order matters and follows the API server: structural ``default:`` values of the CRD schema first
(so ``rollingUpdateConfiguration`` sub-fields are filled only where the configuration is present),
then the LWS webhook defaults of lws-semantics.md section a. The DS webhook adds no defaults: its
roles keep a missing ``rollingUpdateConfiguration`` (the DS planner then uses surge 1, unavailable 0).
"""

from __future__ import annotations

import copy
import marshal
from typing import Any

from lwsflow.controller.api.crd import crd_for_object
from lwsflow.controller.api.labels import LWS_KIND


def apply_structural_defaults(value: Any, schema: dict[str, Any]) -> None:
    """In place, as apiextensions' ``structuraldefaulting.Default``.

    Missing properties (or nulls in non-nullable ones) get a deep copy of their ``default``; then the
    walk descends into every property, including the ones just defaulted. A null in a non-nullable
    property without a default is pruned, as the API server does before validation.
    """
    if isinstance(value, dict):
        props: dict[str, Any] = schema.get("properties") or {}
        for key, prop in props.items():
            present = key in value
            if present and value[key] is None and not prop.get("nullable"):
                if "default" in prop:
                    value[key] = copy.deepcopy(prop["default"])
                else:
                    del value[key]
            elif not present and "default" in prop:
                value[key] = copy.deepcopy(prop["default"])
        extra = schema.get("additionalProperties")
        for key, child in value.items():
            if key in props:
                apply_structural_defaults(child, props[key])
            elif isinstance(extra, dict):
                apply_structural_defaults(child, extra)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for child in value:
            apply_structural_defaults(child, schema["items"])


def apply_lws_webhook_defaults(spec: dict[str, Any]) -> None:
    """In place, the LWS mutating webhook (leaderworkerset_webhook.go L53-L82) on an LWS ``spec``."""
    lwt = spec.get("leaderWorkerTemplate")
    if isinstance(lwt, dict) and lwt.get("restartPolicy") == "Default":
        lwt["restartPolicy"] = "None"  # the deprecated spelling means no group action
    strategy = spec.get("rolloutStrategy")
    if strategy is None:
        # RolloutStrategy is a value (not pointer) struct upstream, so an absent one reads as empty
        strategy = spec["rolloutStrategy"] = {}
    if isinstance(strategy, dict):
        strategy.setdefault("type", "RollingUpdate")
        if strategy.get("type") == "RollingUpdate" and strategy.get("rollingUpdateConfiguration") is None:
            strategy["rollingUpdateConfiguration"] = {"partition": 0, "maxUnavailable": 1, "maxSurge": 0}
    if spec.get("networkConfig") is None:
        spec["networkConfig"] = {"subdomainPolicy": "Shared"}


def wire_copy(obj: Any) -> Any:
    """A deep copy; through ``marshal`` (C, several times faster than ``copy.deepcopy``) when the
    object is made only of exact dicts, lists, strings, numbers, booleans and None, as wire objects are."""
    try:
        return marshal.loads(marshal.dumps(obj))
    except ValueError:  # a subclass or another type: marshal refuses it
        return copy.deepcopy(obj)


def default_object(obj: dict[str, Any]) -> dict[str, Any]:
    """A defaulted deep copy of an LWS / DS / DS role scaler manifest (other kinds: a plain copy)."""
    out: dict[str, Any] = wire_copy(obj)
    crd = crd_for_object(out)
    if crd is None:
        return out
    apply_structural_defaults(out, crd.schema)
    if crd.kind == LWS_KIND and isinstance(out.get("spec"), dict):
        apply_lws_webhook_defaults(out["spec"])
    return out
