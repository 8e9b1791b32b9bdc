"""CRD OpenAPI schema validation the way the API server does it, with field paths in its spelling.

* ``jsonschema`` (Draft 4 semantics, like OpenAPI v3.0) checks types, enums, bounds and patterns;
  ``x-kubernetes-int-or-string`` fields carry ``anyOf: [integer, string]`` and no ``type``.
* ``int32`` / ``int64`` formats are range-checked (the Go types would overflow otherwise).
* ``x-kubernetes-validations`` (CEL) rules are evaluated by a real CEL interpreter (``cel``), at every
  node of the object their schema node matches (list items included).
* ``structural_walk`` finds what plain JSON Schema ignores: fields the schema does not know (the
  API server prunes them, or rejects them under ``fieldValidation=Strict``) and duplicate keys in
  ``x-kubernetes-list-type: map|set`` lists.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from functools import cache
from typing import Any

import jsonschema

from lwsflow.controller.api import cel
from lwsflow.controller.api.common import field_path
from lwsflow.controller.api.crd import crd_info
from lwsflow.controller.api.schema_fast import Check, compile_check
from lwsflow.controller.errors import FieldError

INT32 = (-(2**31), 2**31 - 1)
INT64 = (-(2**63), 2**63 - 1)

# embedded core types (pod / PVC templates): no CEL inside, and the bulk of the schema
CORE_TEMPLATE_FIELDS = ("leaderTemplate", "workerTemplate", "volumeClaimTemplates")

# metadata is ObjectMeta, validated by the API server itself rather than by the CRD schema
OBJECT_META_FIELDS = frozenset({
    "name", "generateName", "namespace", "selfLink", "uid", "resourceVersion", "generation",
    "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "labels", "annotations",
    "ownerReferences", "finalizers", "managedFields",
})


def _format_checker() -> jsonschema.FormatChecker:
    checker = jsonschema.FormatChecker()

    def _range(lo: int, hi: int) -> Callable[[object], bool]:
        return lambda v: not isinstance(v, int) or isinstance(v, bool) or lo <= v <= hi

    checker.checks("int32")(_range(*INT32))
    checker.checks("int64")(_range(*INT64))
    return checker


@cache
def _go_pattern(pattern: str) -> re.Pattern[str]:
    # CRD patterns are Go RE2, where a final $ is the end of the text; Python's $ also matches before a
    # trailing newline (so "prefill\n" would pass ^[a-z0-9]...$): anchor it with \Z instead
    if pattern.endswith("$") and not pattern.endswith("\\$"):
        pattern = pattern[:-1] + "\\Z"
    return re.compile(pattern)


def _pattern(v: Any, pattern: str, instance: Any, _schema: Any) -> Iterator[jsonschema.ValidationError]:
    if v.is_type(instance, "string") and not _go_pattern(pattern).search(instance):
        yield jsonschema.ValidationError(f"{instance!r} does not match {pattern!r}")


_Validator = jsonschema.validators.extend(jsonschema.Draft4Validator, {"pattern": _pattern})


@cache
def validator(plural: str) -> jsonschema.Draft4Validator:
    """The compiled (cached) validator of a packaged CRD's schema."""
    return _Validator(crd_info(plural).schema, format_checker=_format_checker())


def _short(value: Any) -> str:
    text = repr(value) if not isinstance(value, str) else f'"{value}"'
    return text if len(text) <= 60 else text[:57] + "..."


def _message(err: jsonschema.ValidationError) -> str:
    v, val, inst = err.validator, err.validator_value, err.instance
    if v == "type":
        return f"Invalid value: {_short(inst)}: must be of type {val}"
    if v == "enum":
        return f"Unsupported value: {_short(inst)}: supported values: " + ", ".join(f'"{x}"' for x in val)
    if v == "minimum":  # Draft 4's boolean exclusiveMinimum is reported under "minimum"
        if err.schema.get("exclusiveMinimum") is True:
            return f"Invalid value: {inst}: must be greater than {val}"
        return f"Invalid value: {inst}: must be greater than or equal to {val}"
    if v == "maximum":
        if err.schema.get("exclusiveMaximum") is True:
            return f"Invalid value: {inst}: must be less than {val}"
        return f"Invalid value: {inst}: must be less than or equal to {val}"
    if v == "pattern":
        return f"Invalid value: {_short(inst)}: should match '{val}'"
    if v == "maxLength":
        return f"Too long: may not be more than {val} characters"
    if v == "minLength":
        return f"Invalid value: {_short(inst)}: should be at least {val} characters long"
    if v == "maxItems":
        return f"Too many: {len(inst)}: must have at most {val} items"
    if v == "minItems":
        return f"Invalid value: {len(inst)} items: must have at least {val} items"
    if v == "anyOf" and err.schema.get("x-kubernetes-int-or-string"):
        return f"Invalid value: {_short(inst)}: must be an integer or a string"
    if v == "format":
        return f"Invalid value: {inst}: does not fit in {val}"
    return str(err.message)


@cache
def fast_check(plural: str) -> Check:
    """``validator(plural)`` compiled to a yes/no answer (schema_fast): True only where it finds nothing."""
    return compile_check(crd_info(plural).schema, _go_pattern)


def schema_errors(obj: dict[str, Any], plural: str) -> list[FieldError]:
    """Every schema violation of an (already defaulted) object, sorted by path."""
    errors = () if fast_check(plural)(obj) else validator(plural).iter_errors(obj)
    return _field_errors(errors, cel_errors(obj, plural))


def schema_errors_for(obj: dict[str, Any], schema: dict[str, Any],
                      old: dict[str, Any] | None = None) -> list[FieldError]:
    """``schema_errors`` against a schema that is not packaged (a CRD applied to the embedded cluster);
    ``old``: the stored object of an update, whose unchanged values the CEL rules pass
    (``cel.violations``)."""
    errors = _Validator(schema, format_checker=_format_checker()).iter_errors(obj)
    before: Any = old if old is not None else cel.NO_OLD
    rules = [FieldError(v.path, v.message) for v in cel.violations(obj, schema, skip=(), old=before)] \
        if cel.has_rules(schema, ()) else []
    return _field_errors(errors, rules, in_body=True)


def _in_body(err: jsonschema.ValidationError, path: str) -> str | None:
    """kube-openapi's own wording, which apiextensions passes through as ``Invalid value`` for the
    bounds and patterns of a custom resource (``spec.size in body should be greater than 0``)."""
    v, val, inst = err.validator, err.validator_value, err.instance
    if v == "minimum":
        rel = "greater than" if err.schema.get("exclusiveMinimum") is True else "greater than or equal to"
    elif v == "maximum":
        rel = "less than" if err.schema.get("exclusiveMaximum") is True else "less than or equal to"
    elif v == "pattern":
        return f"Invalid value: {_short(inst)}: {path} in body should match '{val}'"
    elif v == "type" and isinstance(val, str):
        kind = json_type(inst)
        return f'Invalid value: "{kind}": {path} in body must be of type {val}: "{kind}"'

    else:
        return None
    return f"Invalid value: {inst}: {path} in body should be {rel} {val}"


def json_type(value: Any) -> str:
    """kube-openapi's name of a JSON value's type, as its validation errors quote it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _field_errors(errors: Iterable[jsonschema.ValidationError], rules: list[FieldError], *,
                  in_body: bool = False) -> list[FieldError]:
    out: list[FieldError] = []
    for err in errors:
        parts = list(err.absolute_path)
        if err.validator == "required":
            inst = err.instance if isinstance(err.instance, dict) else {}
            for name in err.validator_value:
                if name not in inst:
                    out.append(FieldError(field_path([*parts, name]), "Required value"))
            continue
        path = field_path(parts)
        out.append(FieldError(path, (in_body and _in_body(err, path)) or _message(err)))
    out.extend(rules)
    return sorted(set(out), key=lambda e: (e.path, e.message))


# -- CEL (x-kubernetes-validations) ---------------------------------------------------------------

@cache
def _has_rules(plural: str) -> bool:
    return cel.has_rules(crd_info(plural).schema, CORE_TEMPLATE_FIELDS)


def cel_errors(obj: dict[str, Any], plural: str) -> list[FieldError]:
    """The CRD's CEL rules the object breaks, as the API server words them (``controller/api/cel``)."""
    if not _has_rules(plural):
        return []
    return [FieldError(v.path, v.message)
            for v in cel.violations(obj, crd_info(plural).schema, skip=CORE_TEMPLATE_FIELDS)]


# -- what JSON Schema cannot see: unknown fields and list-map keys ---------------------------------

def structural_walk(value: Any, schema: dict[str, Any], parts: list[str | int],
                    unknown: list[str], dupes: list[FieldError], *, root: bool = False) -> None:
    """Walk ``value`` along ``schema``, collecting unknown-field paths and duplicate list keys."""
    if schema.get("x-kubernetes-preserve-unknown-fields") and "properties" not in schema:
        return
    if isinstance(value, dict):
        props = schema.get("properties")
        extra = schema.get("additionalProperties")
        for key, child in value.items():
            here = [*parts, key]
            if root and key == "metadata" and isinstance(child, dict):
                unknown.extend(field_path([*here, k]) for k in child if k not in OBJECT_META_FIELDS)
            elif props and key in props:
                structural_walk(child, props[key], here, unknown, dupes)
            elif isinstance(extra, dict):
                structural_walk(child, extra, here, unknown, dupes)
            elif props is not None and not extra and not schema.get("x-kubernetes-preserve-unknown-fields"):
                unknown.append(field_path(here))
    elif isinstance(value, list):
        items = schema.get("items")
        if not isinstance(items, dict):
            return
        list_type = schema.get("x-kubernetes-list-type")
        keys = schema.get("x-kubernetes-list-map-keys") or []
        seen: set[Any] = set()
        for i, child in enumerate(value):
            if list_type == "map" and keys and isinstance(child, dict):
                ident = tuple(_hashable(child.get(k, items.get("properties", {}).get(k, {}).get("default")))
                              for k in keys)
                if ident in seen:
                    what = ", ".join(f"{k}: {_short(v)}" for k, v in zip(keys, ident, strict=True))
                    dupes.append(FieldError(field_path([*parts, i]), f"Duplicate value: {{{what}}}"))
                seen.add(ident)
            elif list_type == "set":
                ident = _hashable(child)
                if ident in seen:
                    dupes.append(FieldError(field_path([*parts, i]), f"Duplicate value: {_short(child)}"))
                seen.add(ident)
            structural_walk(child, items, [*parts, i], unknown, dupes)


def _hashable(v: Any) -> Any:
    if isinstance(v, dict):
        return tuple(sorted((k, _hashable(x)) for k, x in v.items()))
    if isinstance(v, list):
        return tuple(_hashable(x) for x in v)
    return v
