"""Admission for writes through the API: unknown-field handling, defaulting and validation of the
LWS/DS (and InferencePool/HTTPRoute) kinds with the same code path as ``lwsflow validate``
(``lwsflow.controller.api.validation``).

* unknown fields: ``fieldValidation=Strict`` (kubectl's default) answers 400 like kube-apiserver's
  strict decoder; ``Warn`` (the server default) and ``Ignore`` prune them (``Warn`` also returns a
  ``Warning`` header per field);
* then the CRD's structural defaults and the LWS webhook defaults, then validation: problems answer
  422 ``Invalid`` with ``details.causes[]`` {reason, message, field}.
"""

from __future__ import annotations

import re
import time
from typing import Any

from lwsflow.controller.api import schema_check
from lwsflow.controller.errors import BadRequest, FieldError, Unprocessable
from lwsflow.sim import kinds
from lwsflow.sim.apiserver import core_admission, crds, rbac_validation, typeerrors
from lwsflow.sim.defaulting import Defaulter
from lwsflow.sim.store import rfc3339

_CRD_GROUPS = ("leaderworkerset.x-k8s.io", "disaggregatedset.x-k8s.io",
               "inference.networking.k8s.io", "gateway.networking.k8s.io")
_TOKEN = re.compile(r"([^.\[\]]+)|\[(\d+)\]")
_REASONS = (
    ("Required value", "FieldValueRequired"),
    ("Unsupported value", "FieldValueNotSupported"),
    ("Forbidden", "FieldValueForbidden"),
    ("Duplicate value", "FieldValueDuplicate"),
    ("Too many", "FieldValueTooMany"),
    ("Too long", "FieldValueTooLong"),
)


def is_crd(rtype: kinds.ResourceType) -> bool:
    """A custom resource: a packaged upstream CRD's, lwsflow's own, or the kind of an applied CRD."""
    return rtype.group in _CRD_GROUPS or rtype.group == "lwsflow.io" or rtype.key in kinds.SCHEMAS


def _custom_schema(rtype: kinds.ResourceType) -> dict[str, Any] | None:
    """The structural schema of lwsflow's own kind or of an applied CRD's kind (None otherwise)."""
    if rtype.key in kinds.SCHEMAS:
        return kinds.SCHEMAS[rtype.key]
    if rtype.group == "lwsflow.io":
        from lwsflow.controller.api.crd import crd_info

        return crd_info(rtype.plural).schema
    return None


def has_custom_schema(rtype: kinds.ResourceType) -> bool:
    """Whether ``rtype`` is admitted through a structural schema (lwsflow's own kind or an applied CRD),
    whose CEL rules ratchet against the stored object on an update (``schema_errors_for``)."""
    return _custom_schema(rtype) is not None


def schema_of(rtype: kinds.ResourceType) -> dict[str, Any] | None:
    """The structural schema of a custom resource kind: a packaged upstream CRD's, lwsflow's own or
    an applied CRD's (None for core kinds)."""
    custom = _custom_schema(rtype)
    if custom is not None or rtype.group not in _CRD_GROUPS:
        return custom
    from lwsflow.controller.api.crd import crd_info

    try:
        return crd_info(rtype.plural).schema
    except (KeyError, FileNotFoundError):
        return None


def _prune(obj: dict[str, Any], path: str) -> None:
    tokens: list[str | int] = [
        m.group(1) if m.group(1) is not None else int(m.group(2)) for m in _TOKEN.finditer(path)
    ]
    cur: Any = obj
    for t in tokens[:-1]:
        try:
            cur = cur[t]
        except (KeyError, IndexError, TypeError):
            return
    if isinstance(cur, dict):
        cur.pop(tokens[-1], None)


_TYPE_ERROR = re.compile(r"Invalid value: .*: must be of type (\w+)")


def _type_words(e: FieldError, obj: dict[str, Any]) -> FieldError:
    """A type error in kube-apiserver's schema words (``lwsflow validate`` words it shorter):
    ``Invalid value: "string": spec.replicas in body must be of type integer: "string"``."""
    m = _TYPE_ERROR.fullmatch(e.message)
    if m is None:
        return e
    cur: Any = obj
    for t in _TOKEN.finditer(e.path):
        try:
            cur = cur[t.group(1)] if t.group(1) is not None else cur[int(t.group(2))]
        except (KeyError, IndexError, TypeError):
            return e
    kind = schema_check.json_type(cur)
    return FieldError(e.path, f'Invalid value: "{kind}": {e.path} in body must be of type {m.group(1)}: '
                              f'"{kind}"')


def _cause(e: FieldError) -> dict[str, str]:
    reason = next((r for prefix, r in _REASONS if e.message.startswith(prefix)), "FieldValueInvalid")
    if " in body must be of type " in e.message:  # apiextensions reports it as field.TypeInvalid
        reason = "FieldValueTypeInvalid"
    return {"reason": reason, "message": e.message, "field": e.path}


def invalid(rtype: kinds.ResourceType, name: str, errors: list[FieldError]) -> Unprocessable:
    """The 422 kube-apiserver answers for an invalid object."""
    text = (
        "; ".join(str(e) for e in errors)
        if len(errors) == 1
        else "[" + ", ".join(str(e) for e in errors) + "]"
    )
    qual = f"{rtype.kind}.{rtype.group}" if rtype.group else rtype.kind
    return Unprocessable(
        f'{qual} "{name}" is invalid: {text}',
        details={
            "name": name,
            "group": rtype.group,
            "kind": rtype.kind,
            "causes": [_cause(e) for e in errors],
        },
    )


def check_unknown(rtype: kinds.ResourceType, obj: dict[str, Any], field_validation: str) -> list[str]:
    """Refuse (Strict) or prune in place (Warn, Ignore) fields the kind's schema does not know."""
    if not is_crd(rtype):
        return []
    from lwsflow.controller.api.validation import unknown_fields

    schema = _custom_schema(rtype)
    if schema is not None:
        from lwsflow.controller.api.schema_check import structural_walk

        unknown: list[str] = []
        implicit = {"apiVersion": {"type": "string"}, "kind": {"type": "string"},
                    "metadata": {"type": "object"}}
        # apiVersion, kind and metadata are every object's, whether the schema lists them or not
        root = {**schema, "properties": {**implicit, **(schema.get("properties") or {})}}
        structural_walk(obj, root, [], unknown, [], root=True)
    else:
        unknown = unknown_fields(obj)
    if not unknown:
        return []
    if field_validation == "Strict":
        listed = ", ".join(f'unknown field "{p}"' for p in unknown)
        raise BadRequest(
            f'{rtype.kind} in version "{rtype.version}" cannot be handled as a '
            f"{rtype.kind}: strict decoding error: {listed}"
        )
    for p in sorted(unknown, key=len, reverse=True):
        _prune(obj, p)
    return [] if field_validation == "Ignore" else [f'unknown field "{p}"' for p in unknown]


def admit(
    rtype: kinds.ResourceType, obj: dict[str, Any], old: dict[str, Any] | None, field_validation: str,
    defaulter: Defaulter | None = None,
) -> tuple[dict[str, Any], list[str]]:
    """The object to store (pruned, defaulted) and the warnings; raises 400/422 as the API does.
    ``defaulter``: the store's, so that validation and a dry run see the defaulted object."""
    name = (obj.get("metadata") or {}).get("name") or (obj.get("metadata") or {}).get("generateName", "")
    if rtype.group == rbac_validation.GROUP:
        rbac_validation.default(rtype, obj)
        problems = rbac_validation.validate(rtype, obj, old)
        if problems:
            raise invalid(rtype, name, problems)
        return obj, []
    if rtype is kinds.CRD:
        crds.check_decodable(obj)
        crds.default(obj)
        if errors := crds.validate(obj):
            raise invalid(rtype, name, errors)
        obj["status"] = crds.status_of(obj, rfc3339(time.time()))
        return obj, []
    schema = _custom_schema(rtype)
    if schema is not None:  # lwsflow's own CRD or an applied one: its structural schema, as apiextensions
        from lwsflow.controller.api.defaults import apply_structural_defaults
        from lwsflow.controller.api.schema_check import schema_errors_for

        warnings = check_unknown(rtype, obj, field_validation)
        apply_structural_defaults(obj, schema)
        if errors := schema_errors_for(obj, schema, old):
            raise invalid(rtype, name, errors)
        return obj, warnings
    if not is_crd(rtype):
        core_admission.default(rtype, obj)
        if defaulter is not None:
            defaulter.default(rtype.key, obj, old)
        errors = core_admission.validate(rtype, obj, old)
        if errors:
            raise invalid(rtype, name, errors)
        return obj, []
    from lwsflow.controller.api.defaults import default_object
    from lwsflow.controller.api.validation import validate_object, validate_update

    warnings = check_unknown(rtype, obj, field_validation)
    schema = schema_of(rtype)
    if schema is not None and (denied := typeerrors.webhook_decode_error(rtype, obj, schema)):
        raise denied  # upstream's mutating webhook decodes the object before any schema check
    meta_name = (obj.get("metadata") or {}).get("name")
    # the API server's own check of a custom resource's name (RFC 1123 subdomain) fails the request
    # before any validating webhook (the LWS one wants a DNS-1035 label) is called
    if old is None and meta_name and (errors := core_admission.name_errors(str(meta_name))):
        raise invalid(rtype, name, errors)
    obj = default_object(obj)
    errors = [_type_words(e, obj) for e in validate_object(obj)]
    if old is not None:
        errors += validate_update(old, obj)
    if errors:
        raise invalid(rtype, name, errors)
    return obj, warnings
