"""The part of kube-apiserver's built-in defaulting and validation for core kinds that manifests trip
over most: object names (DNS-1123 subdomain; DNS-1123 label for namespaces, DNS-1035 label for
Services), a Pod's containers, the fields of a Pod and a StatefulSet that cannot change after
creation, and a Secret's ``stringData`` folded into ``data``. Everything else a core kind carries is
stored unchecked (docs/embedded-cluster.md, "Where it differs from a real cluster").
"""

from __future__ import annotations

import base64
import re
from typing import Any

from lwsflow.controller.errors import FieldError
from lwsflow.sim import kinds

_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS1035 = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
# (pattern, max length, message) as k8s.io/apimachinery/pkg/util/validation words them
_SUBDOMAIN_RULE = (_SUBDOMAIN, 253, "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
                   "characters, '-' or '.', and must start and end with an alphanumeric character (e.g. "
                   "'example.com', regex used for validation is "
                   r"'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")
_LABEL_RULE = (_LABEL, 63, "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or "
               "'-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', "
               "regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')")
_DNS1035_RULE = (_DNS1035, 63, "a DNS-1035 label must consist of lower case alphanumeric characters or '-', "
                 "start with an alphabetic character, and end with an alphanumeric character (e.g. "
                 "'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')")
_NAME_RULES = {kinds.NAMESPACE.key: _LABEL_RULE, kinds.SERVICE.key: _DNS1035_RULE}
_FREE_NAMES = {kinds.EVENT.key, kinds.HPA.key}  # path-segment names only
_POD_MUTABLE = ("activeDeadlineSeconds", "tolerations", "terminationGracePeriodSeconds", "schedulingGates")
_POD_FORBIDDEN = (
    "pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,"
    "`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),"
    "`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)"
)
_STS_MUTABLE = ("replicas", "ordinals", "template", "updateStrategy", "revisionHistoryLimit",
                "persistentVolumeClaimRetentionPolicy", "minReadySeconds")
_STS_FORBIDDEN = (
    "updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', "
    "'revisionHistoryLimit', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden"
)


def default(rtype: kinds.ResourceType, obj: dict[str, Any]) -> None:
    """A Secret's type, and its stringData written into data (base64). The defaults of the other core
    kinds are the store's (``sim/defaulting``), so the embedded controllers' writes get them too."""
    if rtype is kinds.SECRET:
        if not obj.get("type"):
            obj["type"] = "Opaque"
        string_data = obj.pop("stringData", None)
        if isinstance(string_data, dict):
            data = obj.setdefault("data", {}) or {}
            for k, v in string_data.items():
                data[k] = base64.b64encode(str(v).encode()).decode()
            obj["data"] = data


def validate(rtype: kinds.ResourceType, obj: dict[str, Any], old: dict[str, Any] | None) -> list[FieldError]:
    errors: list[FieldError] = []
    name = (obj.get("metadata") or {}).get("name")
    if old is None and name and rtype.key not in _FREE_NAMES:
        errors += name_errors(name, _NAME_RULES.get(rtype.key, _SUBDOMAIN_RULE))
    raw_spec = obj.get("spec")
    spec: dict[str, Any] = raw_spec if isinstance(raw_spec, dict) else {}
    if rtype is kinds.POD:
        errors += _containers(spec)
        if old is not None and _pod_fixed(spec) != _pod_fixed(old.get("spec") or {}):
            errors.append(FieldError("spec", f"Forbidden: {_POD_FORBIDDEN}"))
    if rtype is kinds.STATEFULSET and old is not None:
        fixed = {k: v for k, v in spec.items() if k not in _STS_MUTABLE}
        if fixed != {k: v for k, v in (old.get("spec") or {}).items() if k not in _STS_MUTABLE}:
            errors.append(FieldError("spec", f"Forbidden: {_STS_FORBIDDEN}"))
    return errors


def name_errors(name: str, rule: tuple[re.Pattern[str], int, str] = _SUBDOMAIN_RULE) -> list[FieldError]:
    """``metadata.name`` against a name rule (default: the RFC 1123 subdomain every object's name
    must be, custom resources included)."""
    pattern, limit, message = rule
    if len(name) > limit:
        return [FieldError("metadata.name",
                           f'Invalid value: "{name}": must be no more than {limit} characters')]
    if not pattern.fullmatch(name):
        return [FieldError("metadata.name", f'Invalid value: "{name}": {message}')]
    return []


def _containers(spec: dict[str, Any]) -> list[FieldError]:
    if not spec.get("containers"):
        return [FieldError("spec.containers", "Required value")]
    errors = []
    for field in ("initContainers", "containers"):
        for i, c in enumerate(spec.get(field) or []):
            for key in ("name", "image"):
                if not (c or {}).get(key):
                    errors.append(FieldError(f"spec.{field}[{i}].{key}", "Required value"))
    return errors


def _pod_fixed(spec: dict[str, Any]) -> dict[str, Any]:
    """A pod spec without what an update may change (container images and the few mutable fields)."""
    fixed = {k: v for k, v in spec.items() if k not in _POD_MUTABLE}
    for field in ("initContainers", "containers"):
        if field in fixed:
            fixed[field] = [{k: v for k, v in (c or {}).items() if k != "image"} for c in fixed[field] or []]
    return fixed
