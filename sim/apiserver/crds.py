"""The CustomResourceDefinition API (apiextensions.k8s.io/v1) of the embedded cluster.

A CRD written through the API is decoded, defaulted and validated the way kube-apiserver's
apiextensions server does it (the subset of ``ValidateCustomResourceDefinition`` listed in
docs/embedded-cluster.md, with its messages), stored with the ``NamesAccepted`` and ``Established``
conditions set at once (there is no naming controller to wait for), and its storage version is then
served as a kind of its own (``kinds.register``): discovery, CRUD, watch, OpenAPI, and admission
through the CRD's structural schema (defaults, unknown fields pruned or refused, schema validation).

Hand-written because there is no Python implementation of apiextensions' validation to reuse; the
rules are few and their wording is compared with kube-apiserver's in tests/conformance/test_crd_api.py.
"""

from __future__ import annotations

import re
from typing import Any

from lwsflow.controller.errors import BadRequest, FieldError
from lwsflow.sim import kinds

GROUP = "apiextensions.k8s.io"
_DNS1035 = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
# as k8s.io/apimachinery/pkg/util/validation words them
DNS1035_MSG = ("a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
               "alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', "
               "regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')")
SUBDOMAIN_MSG = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
                 "'-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', "
                 "regex used for "
                 r"validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")
OPENAPI_TYPES = ("array", "boolean", "integer", "number", "object", "string")
# JSONSchemaProps fields that are Go bools: any other JSON type fails to decode (a 400, not a 422)
_BOOL_FIELDS = ("exclusiveMinimum", "exclusiveMaximum", "uniqueItems", "nullable",
                "x-kubernetes-preserve-unknown-fields", "x-kubernetes-int-or-string",
                "x-kubernetes-embedded-resource")
_JUNCTORS = ("allOf", "anyOf", "oneOf", "not")
# what a schema under a logic junctor may not carry ("must be empty/undefined/false to be structural")
_NESTED_FORBIDDEN = (
    ("type", "must be empty to be structural"),
    ("additionalProperties", "must be undefined to be structural"),
    ("default", "must be undefined to be structural"),
    ("title", "must be empty to be structural"),
    ("description", "must be empty to be structural"),
    ("nullable", "must be false to be structural"),
    ("x-kubernetes-preserve-unknown-fields", "must be false to be structural"),
    ("x-kubernetes-embedded-resource", "must be false to be structural"),
    ("x-kubernetes-int-or-string", "must be false to be structural"),
)


def _go_json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def check_decodable(obj: dict[str, Any]) -> None:
    """400 where kube-apiserver cannot decode the CRD into its Go types (a number where a bool goes:
    the JSON Schema 2020 spelling of ``exclusiveMinimum``), worded as its decoder does."""
    def walk(node: Any, go_path: str) -> None:
        if isinstance(node, list):
            for item in node:
                walk(item, go_path)
            return
        if not isinstance(node, dict):
            return
        for key in _BOOL_FIELDS:
            if key in node and not isinstance(node[key], bool):
                raise BadRequest(
                    'CustomResourceDefinition in version "v1" cannot be handled as a '
                    "CustomResourceDefinition: "
                    f"json: cannot unmarshal {_go_json_type(node[key])} into Go struct field "
                    f"JSONSchemaProps{go_path}.{key} of type bool")
        for key, child in node.items():
            if key in ("properties", "patternProperties", "definitions", "dependencies"):
                for sub in (child or {}).values() if isinstance(child, dict) else ():
                    walk(sub, f"{go_path}.{key}")
            elif key in ("items", "additionalProperties", "additionalItems", "not", *_JUNCTORS[:3]):
                walk(child, f"{go_path}.{key}")
    for version in ((obj.get("spec") or {}).get("versions") or []):
        schema = ((version or {}).get("schema") or {}).get("openAPIV3Schema")
        walk(schema, ".spec.versions.schema.openAPIV3Schema")


def default(obj: dict[str, Any]) -> None:
    """In place, the CRD defaults kube-apiserver fills (names, conversion)."""
    spec = obj.setdefault("spec", {})
    names = spec.setdefault("names", {})
    if names.get("kind"):
        names.setdefault("singular", str(names["kind"]).lower())
        names.setdefault("listKind", f"{names['kind']}List")
    spec.setdefault("conversion", {"strategy": "None"})


def _dns1035(path: str, value: str, prefix: str = "") -> list[FieldError]:
    if len(value) > 63:
        return [FieldError(path, f'Invalid value: "{value}": {prefix}must be no more than 63 characters')]
    if not _DNS1035.fullmatch(value):
        return [FieldError(path, f'Invalid value: "{value}": {prefix}{DNS1035_MSG}')]
    return []


def _names_errors(names: dict[str, Any]) -> list[FieldError]:
    out: list[FieldError] = []
    base = "spec.names"
    for key in ("plural", "singular"):
        if names.get(key):
            out += _dns1035(f"{base}.{key}", str(names[key]))
    for key in ("kind", "listKind"):
        if names.get(key):
            errs = _dns1035(f"{base}.{key}", str(names[key]).lower())
            out += [FieldError(e.path, e.message.replace(f'"{str(names[key]).lower()}": ',
                                                         f'"{names[key]}": may have mixed case, but should '
                                                         "otherwise match: ", 1)) for e in errs]
    for i, short in enumerate(names.get("shortNames") or []):
        out += _dns1035(f"{base}.shortNames[{i}]", str(short))
    if not names.get("plural"):
        out.append(FieldError(f"{base}.plural", "Required value"))
    if not names.get("singular"):
        out.append(FieldError(f"{base}.singular", "Required value"))
    if not names.get("kind"):
        out.append(FieldError(f"{base}.kind", "Required value"))
    if not names.get("listKind"):
        out.append(FieldError(f"{base}.listKind", "Required value"))
    return out


def _structural(node: Any, path: str, level: str, out: list[FieldError]) -> None:
    """apiextensions' structural-schema invariants (schema/validation.go), ``level`` root/field/item,
    in its order: a node's children before its own junctors and type."""
    if not isinstance(node, dict):
        return
    if node.get("type") == "array" and "items" not in node:
        out.append(FieldError(f"{path}.items", "Required value: must be specified"))
    if isinstance(node.get("items"), dict):
        _structural(node["items"], f"{path}.items", "item", out)
    for key, child in sorted((node.get("properties") or {}).items()):
        _structural(child, f"{path}.properties[{key}]", "field", out)
    if isinstance(node.get("additionalProperties"), dict):
        if level == "root":
            out.append(FieldError(f"{path}.additionalProperties", "Forbidden: must not be used at the root"))
        _structural(node["additionalProperties"], f"{path}.additionalProperties", "field", out)
    int_or_string = node.get("x-kubernetes-int-or-string") is True
    if int_or_string and node.get("x-kubernetes-preserve-unknown-fields") is True:
        out.append(FieldError(f"{path}.x-kubernetes-preserve-unknown-fields",
                              "Invalid value: true: must be false if x-kubernetes-int-or-string is true"))
    for junctor in ("anyOf", "allOf", "oneOf", "not"):
        branches = node.get(junctor)
        if branches is None:
            continue
        if int_or_string and junctor == "anyOf" and branches == [{"type": "integer"}, {"type": "string"}]:
            continue  # the one int-or-string pattern a structural schema allows
        if isinstance(branches, list):
            for i, branch in enumerate(branches):
                _nested(branch, f"{path}.{junctor}[{i}]", out)
        else:
            _nested(branches, f"{path}.{junctor}", out)
    if not node.get("type") and not int_or_string and not node.get("x-kubernetes-preserve-unknown-fields"):
        where = {"root": "at the root", "item": "for specified array items",
                 "field": "for specified object fields"}[level]
        out.append(FieldError(f"{path}.type", f"Required value: must not be empty {where}"))
    if level == "root" and node.get("type") not in (None, "", "object"):
        out.append(FieldError(f"{path}.type", f'Invalid value: "{node["type"]}": must be object at the root'))


def _nested(node: Any, path: str, out: list[FieldError]) -> None:
    """What a schema under a logic junctor may not carry (``validateNestedValueValidation``)."""
    if not isinstance(node, dict):
        return
    for junctor in ("anyOf", "allOf", "oneOf"):
        for i, branch in enumerate(node.get(junctor) or []):
            _nested(branch, f"{path}.{junctor}[{i}]", out)
    if isinstance(node.get("not"), dict):
        _nested(node["not"], f"{path}.not", out)
    if isinstance(node.get("items"), dict):
        _nested(node["items"], f"{path}.items", out)
    for key, child in sorted((node.get("properties") or {}).items()):
        _nested(child, f"{path}.properties[{key}]", out)
    for key, why in _NESTED_FORBIDDEN:
        if key in node and node[key] not in (False, None, ""):
            out.append(FieldError(f"{path}.{key}", f"Forbidden: {why}"))


def _openapi(node: Any, path: str, out: list[FieldError]) -> None:
    """``ValidateCustomResourceDefinitionOpenAPISchema``: what OpenAPI v3 in a CRD may not use."""
    if not isinstance(node, dict):
        return
    if node.get("type") and node["type"] not in OPENAPI_TYPES:
        supported = ", ".join(f'"{t}"' for t in OPENAPI_TYPES)
        out.append(FieldError(f"{path}.type",
                              f'Unsupported value: "{node["type"]}": supported values: {supported}'))
    for key in ("id", "additionalItems", "patternProperties", "definitions", "dependencies"):
        if node.get(key):
            out.append(FieldError(f"{path}.{key}", f"Forbidden: {key} is not supported"))
    if "$ref" in node:
        out.append(FieldError(f"{path}.$ref", "Forbidden: $ref is not supported"))
    if node.get("type") == "null":
        out.append(FieldError(f"{path}.type",
                              "Forbidden: type cannot be set to null, use nullable as an alternative"))
    if isinstance(node.get("items"), list):
        out.append(FieldError(f"{path}.items", "Forbidden: items must be a schema object and not an array"))
    if node.get("uniqueItems") is True:
        out.append(FieldError(f"{path}.uniqueItems", "Forbidden: uniqueItems cannot be set to true since the "
                                                    "runtime complexity becomes quadratic"))
    extra = node.get("additionalProperties")
    if extra is not None:
        if node.get("properties") and (extra is False or isinstance(extra, dict)):
            out.append(FieldError(f"{path}.additionalProperties",
                                  "Forbidden: additionalProperties and properties are mutual exclusive"))
        _openapi(extra, f"{path}.additionalProperties", out)
    for key, child in sorted((node.get("properties") or {}).items()):
        _openapi(child, f"{path}.properties[{key}]", out)
    _openapi(node.get("not"), f"{path}.not", out)
    for junctor in ("allOf", "oneOf", "anyOf"):
        for i, branch in enumerate(node.get(junctor) or []):
            _openapi(branch, f"{path}.{junctor}[{i}]", out)
    _openapi(node.get("items"), f"{path}.items", out)


def _schema_errors(schema: Any, path: str) -> list[FieldError]:
    if not isinstance(schema, dict):
        return [FieldError(path, "Required value: schemas are required")]
    out: list[FieldError] = []
    _structural(schema, path, "root", out)
    _openapi(schema, path, out)
    return out


def validate(obj: dict[str, Any]) -> list[FieldError]:
    """What ``ValidateCustomResourceDefinition`` refuses, of the rules this API models, in its order:
    metadata, group, scope, versions and their schemas, names."""
    out: list[FieldError] = []
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    names = spec.get("names") or {}
    group = str(spec.get("group") or "")
    name = str(meta.get("name") or "")
    if len(name) > 253 or not _SUBDOMAIN.fullmatch(name):
        out.append(FieldError("metadata.name", f'Invalid value: "{name}": {SUBDOMAIN_MSG}'))
    if name != f"{names.get('plural', '')}.{group}":
        out.append(FieldError("metadata.name",
                              f'Invalid value: "{name}": must be spec.names.plural+"."+spec.group'))
    if not group:
        out.append(FieldError("spec.group", "Required value"))
    elif len(group) > 253 or not _SUBDOMAIN.fullmatch(group):
        out.append(FieldError("spec.group", f'Invalid value: "{group}": {SUBDOMAIN_MSG}'))
    elif "." not in group:
        out.append(FieldError("spec.group",
                              f'Invalid value: "{group}": should be a domain with at least one dot'))
    scope = spec.get("scope")
    if not scope:
        out.append(FieldError("spec.scope", "Required value"))
    elif scope not in ("Cluster", "Namespaced"):
        out.append(FieldError("spec.scope",
                              f'Unsupported value: "{scope}": supported values: "Cluster", "Namespaced"'))
    versions = [v if isinstance(v, dict) else {} for v in spec.get("versions") or []]
    if sum(1 for v in versions if v.get("storage")) != 1:
        out.append(FieldError("spec.versions",
                              "Invalid value: null: must have exactly one version marked as storage version"))
    for i, version in enumerate(versions):
        vname = str(version.get("name") or "")
        path = f"spec.versions[{i}].name"
        out += _dns1035(path, vname) if vname else [FieldError(path, "Required value")]
    schemas = [(v.get("schema") or {}).get("openAPIV3Schema") for v in versions]
    if schemas and all(s == schemas[0] for s in schemas):
        # one schema for every version: kube-apiserver validates it once, as the internal spec.validation
        out += _schema_errors(schemas[0], "spec.validation.openAPIV3Schema")
    else:
        for i, schema in enumerate(schemas):
            out += _schema_errors(schema, f"spec.versions[{i}].schema.openAPIV3Schema")
    out += _names_errors(names)
    return out


def status_of(obj: dict[str, Any], now: str) -> dict[str, Any]:
    """The status the apiextensions controllers write at once here: names accepted, established."""
    names = (obj.get("spec") or {}).get("names") or {}
    storage = [v["name"] for v in (obj.get("spec") or {}).get("versions") or [] if v.get("storage")]
    old = {c.get("type"): c for c in ((obj.get("status") or {}).get("conditions") or [])}

    def cond(ctype: str, reason: str, message: str) -> dict[str, Any]:
        was = old.get(ctype) or {}
        since = was.get("lastTransitionTime") if was.get("status") == "True" else now
        return {"type": ctype, "status": "True", "reason": reason, "message": message,
                "lastTransitionTime": since or now}

    return {
        "conditions": [cond("NamesAccepted", "NoConflicts", "no conflicts found"),
                       cond("Established", "InitialNamesAccepted", "the initial names have been accepted")],
        "acceptedNames": {k: names[k] for k in ("plural", "singular", "shortNames", "kind", "listKind",
                                                "categories") if names.get(k)},
        "storedVersions": storage,
    }


def served_type(obj: dict[str, Any]) -> tuple[kinds.ResourceType, dict[str, Any]]:
    """The kind a stored CRD serves (its storage version) and that version's schema."""
    spec = obj["spec"]
    names = spec["names"]
    version = next(v for v in spec["versions"] if v.get("storage"))
    sub = version.get("subresources") or {}
    scale = sub.get("scale")
    rtype = kinds.ResourceType(
        spec["group"], version["name"], names["kind"], names["plural"],
        namespaced=spec.get("scope") == "Namespaced", short_names=tuple(names.get("shortNames") or ()),
        has_status="status" in sub, has_scale=scale is not None,
        scale_spec_path=(scale or {}).get("specReplicasPath", ".spec.replicas").lstrip("."),
        scale_status_path=(scale or {}).get("statusReplicasPath", ".status.replicas").lstrip("."),
        scale_selector_path=(scale or {}).get("labelSelectorPath", "").lstrip("."),
        categories=tuple(names.get("categories") or ()))
    return rtype, version["schema"]["openAPIV3Schema"]


def on_event(etype: str, obj: dict[str, Any]) -> None:
    """A store subscriber's half: serve the kind of an added/changed CRD, stop serving a deleted one."""
    try:
        rtype, schema = served_type(obj)
    except (KeyError, StopIteration, TypeError):
        return
    if etype == "DELETED":
        kinds.unregister(rtype.key)
    else:
        kinds.register(rtype, schema)
