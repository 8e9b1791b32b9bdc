"""Defaulting and validation of Role/ClusterRole/RoleBinding/ClusterRoleBinding writes, with the field
paths and messages of kube-apiserver (pkg/apis/rbac/validation, v1 defaults): a bad rule or binding is
a 422, and a binding's ``roleRef`` cannot change."""

from __future__ import annotations

from typing import Any

from lwsflow.controller.errors import FieldError
from lwsflow.sim import kinds

GROUP = "rbac.authorization.k8s.io"
_SUBJECT_KINDS = ("ServiceAccount", "User", "Group")


def default(rtype: kinds.ResourceType, obj: dict[str, Any]) -> None:
    """SetDefaults_Subject: User and Group subjects default their apiGroup to the RBAC group, and so
    does a binding's ``roleRef``."""
    if rtype in (kinds.ROLE_BINDING, kinds.CLUSTER_ROLE_BINDING):
        ref = obj.get("roleRef")
        if isinstance(ref, dict) and not ref.get("apiGroup"):
            ref["apiGroup"] = GROUP  # SetDefaults_RoleBinding / _ClusterRoleBinding
        for s in obj.get("subjects") or ():
            if isinstance(s, dict) and "apiGroup" not in s and s.get("kind") in ("User", "Group"):
                s["apiGroup"] = GROUP


def validate(rtype: kinds.ResourceType, obj: dict[str, Any], old: dict[str, Any] | None) -> list[FieldError]:
    if rtype in (kinds.ROLE, kinds.CLUSTER_ROLE):
        errors: list[FieldError] = []
        for i, rule in enumerate(obj.get("rules") or ()):
            errors += _rule(rule if isinstance(rule, dict) else {}, rtype is kinds.ROLE, f"rules[{i}]")
        return errors
    if rtype in (kinds.ROLE_BINDING, kinds.CLUSTER_ROLE_BINDING):
        return _binding(obj, old, rtype is kinds.ROLE_BINDING)
    return []


def _rule(rule: dict[str, Any], namespaced: bool, path: str) -> list[FieldError]:
    errors = []
    if not rule.get("verbs"):
        errors.append(FieldError(f"{path}.verbs", "Required value: verbs must contain at least one value"))
    urls = rule.get("nonResourceURLs") or []
    if urls:
        shown = "[]string{" + ", ".join(f'"{u}"' for u in urls) + "}"
        where = f"{path}.nonResourceURLs"
        if namespaced:
            errors.append(FieldError(
                where, f"Invalid value: {shown}: namespaced rules cannot apply to non-resource URLs"))
        if rule.get("apiGroups") or rule.get("resources") or rule.get("resourceNames"):
            errors.append(FieldError(where, f"Invalid value: {shown}: rules cannot apply to both regular "
                                            "resources and non-resource URLs"))
        return errors
    if not rule.get("apiGroups"):
        errors.append(FieldError(f"{path}.apiGroups",
                                 "Required value: resource rules must supply at least one api group"))
    if not rule.get("resources"):
        errors.append(FieldError(f"{path}.resources",
                                 "Required value: resource rules must supply at least one resource"))
    return errors


def _unsupported(path: str, value: Any, allowed: tuple[str, ...]) -> FieldError:
    listed = ", ".join(f'"{a}"' for a in allowed)
    return FieldError(path, f'Unsupported value: "{value}": supported values: {listed}')


def _binding(obj: dict[str, Any], old: dict[str, Any] | None, namespaced: bool) -> list[FieldError]:
    errors: list[FieldError] = []
    ref = obj.get("roleRef") or {}
    if ref.get("apiGroup") != GROUP:
        errors.append(_unsupported("roleRef.apiGroup", ref.get("apiGroup", ""), (GROUP,)))
    allowed = ("Role", "ClusterRole") if namespaced else ("ClusterRole",)
    if ref.get("kind") not in allowed:
        errors.append(_unsupported("roleRef.kind", ref.get("kind", ""), allowed))
    if not ref.get("name"):
        errors.append(FieldError("roleRef.name", "Required value"))
    for i, s in enumerate(obj.get("subjects") or ()):
        s = s if isinstance(s, dict) else {}
        path = f"subjects[{i}]"
        if not s.get("name"):
            errors.append(FieldError(f"{path}.name", "Required value"))
        kind = s.get("kind", "")
        if kind not in _SUBJECT_KINDS:
            errors.append(_unsupported(f"{path}.kind", kind, _SUBJECT_KINDS))
        elif kind == "ServiceAccount":
            if s.get("apiGroup"):
                errors.append(_unsupported(f"{path}.apiGroup", s["apiGroup"], ("",)))
            if not namespaced and not s.get("namespace"):
                errors.append(FieldError(f"{path}.namespace", "Required value"))
        elif s.get("apiGroup") != GROUP:
            errors.append(_unsupported(f"{path}.apiGroup", s.get("apiGroup", ""), (GROUP,)))
    old_ref = (old or {}).get("roleRef")
    if old is not None and old_ref != ref:
        shown = (f'rbac.RoleRef{{APIGroup:"{ref.get("apiGroup", "")}", Kind:"{ref.get("kind", "")}", '
                 f'Name:"{ref.get("name", "")}"}}')
        errors.append(FieldError("roleRef", f"Invalid value: {shown}: cannot change roleRef"))
    return errors
