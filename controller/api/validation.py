"""Validate LWS / DS manifests the way the API server and the upstream webhooks do.

``validate_object`` = defaulting (CRD structural defaults, then the LWS mutating webhook), the CRD
OpenAPI schema (jsonschema plus the CEL rules by hand), duplicate list-map keys, then the validating
webhook rules. ``validate_update`` adds the rules that compare old and new. ``unknown_fields`` lists
what the API server would prune (or reject under ``fieldValidation=Strict``).

The embedded API server calls these on every write, so everything compiled is cached per process;
warm validation of one object takes about a millisecond.
"""

from __future__ import annotations

import re
from typing import Any

from lwsflow.controller.api.common import as_dict
from lwsflow.controller.api.crd import crd_for_object
from lwsflow.controller.api.defaults import default_object
from lwsflow.controller.api.ds_webhook import ds_errors
from lwsflow.controller.api.labels import DS_KIND, LWS_KIND
from lwsflow.controller.api.lws_webhook import lws_errors
from lwsflow.controller.api.schema_check import CORE_TEMPLATE_FIELDS, schema_errors, structural_walk
from lwsflow.controller.errors import FieldError

# LWS v1.0 fields the pinned CRD does not define: the typed API accepts them, so they are not unknown
_V1_EXTENSIONS = re.compile(
    r"^spec(\.roles\[\d+\]\.spec)?\.(groupIdentity|leaderWorkerTemplate\.(maxGroupRestarts|restartBackoff))\Z")
_TEMPLATES = re.compile(rf"\.({'|'.join(CORE_TEMPLATE_FIELDS)})\b")


def _kind_error(obj: Any) -> list[FieldError] | None:
    if not isinstance(obj, dict):
        return [FieldError("", "an object must be a mapping")]
    if crd_for_object(obj) is None:
        return [FieldError("kind", f"unsupported kind: apiVersion {obj.get('apiVersion')!r}, "
                                   f"kind {obj.get('kind')!r}")]
    return None


def validate_object(obj: dict[str, Any]) -> list[FieldError]:
    """Every problem of one LWS / DS / DS role scaler manifest, sorted by field path; [] when valid."""
    bad = _kind_error(obj)
    if bad is not None:
        return bad
    crd = crd_for_object(obj)
    assert crd is not None
    defaulted = default_object(obj)
    errors = schema_errors(defaulted, crd.plural)
    dupes: list[FieldError] = []
    structural_walk(defaulted, crd.schema, [], [], dupes, root=True)
    errors.extend(dupes)
    if crd.kind == LWS_KIND:
        errors.extend(lws_errors(defaulted))
    elif crd.kind == DS_KIND:
        errors.extend(ds_errors(defaulted))
    elif not as_dict(defaulted.get("metadata")).get("name"):
        errors.append(FieldError("metadata.name", "Required value"))
    unique = list(dict.fromkeys(errors))  # first occurrence of each, in order
    return sorted(unique, key=lambda e: e.path)


def validate_update(old: dict[str, Any], new: dict[str, Any]) -> list[FieldError]:
    """Rules that compare the stored object with its replacement (call ``validate_object`` too).

    * ``spec.leaderWorkerTemplate.subGroupPolicy`` is immutable: it can be neither added, removed
      nor changed (compared after defaulting, as stored).
    * ``spec.networkConfig.subdomainPolicy`` may not be set to null once set: an explicit
      ``networkConfig: null`` or ``subdomainPolicy: null`` is rejected (an absent networkConfig is
      defaulted back to Shared by the webhook, which is a legitimate change).
    """
    bad = _kind_error(new)
    if bad is not None:
        return bad
    if not isinstance(old, dict) or (old.get("apiVersion"), old.get("kind")) != (new.get("apiVersion"),
                                                                                   new.get("kind")):
        return [FieldError("kind", "Invalid value: apiVersion and kind cannot change on update")]
    if new.get("kind") != LWS_KIND:
        return []
    errors: list[FieldError] = []
    old_d, new_d = default_object(old), default_object(new)
    old_sgp = as_dict(as_dict(old_d.get("spec")).get("leaderWorkerTemplate")).get("subGroupPolicy")
    new_sgp = as_dict(as_dict(new_d.get("spec")).get("leaderWorkerTemplate")).get("subGroupPolicy")
    if old_sgp != new_sgp:
        errors.append(FieldError("spec.leaderWorkerTemplate.subGroupPolicy",
                                 "Invalid value: field is immutable"))
    old_policy = as_dict(as_dict(old_d.get("spec")).get("networkConfig")).get("subdomainPolicy")
    raw_spec = as_dict(new.get("spec"))
    nulled = ("networkConfig" in raw_spec and raw_spec["networkConfig"] is None) or (
        isinstance(raw_spec.get("networkConfig"), dict)
        and raw_spec["networkConfig"].get("subdomainPolicy") is None)
    if old_policy is not None and nulled:
        errors.append(FieldError("spec.networkConfig.subdomainPolicy",
                                 "Forbidden: cannot be set to null once set"))
    return errors


def unknown_fields(obj: dict[str, Any], *, include_templates: bool = True) -> list[str]:
    """Paths of fields the CRD schema does not know (what the API server would prune).

    ``x-kubernetes-preserve-unknown-fields`` subtrees are exempt; so are the LWS v1.0 fields the
    typed API accepts. ``include_templates=False`` skips the embedded pod / claim templates.
    """
    if _kind_error(obj) is not None:
        return []
    crd = crd_for_object(obj)
    assert crd is not None
    found: list[str] = []
    structural_walk(obj, crd.schema, [], found, [], root=True)
    out = [p for p in found if not _V1_EXTENSIONS.match(p)]
    if not include_templates:
        out = [p for p in out if not _TEMPLATES.search(p)]
    return out

