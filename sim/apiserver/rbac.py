"""RBAC authorisation as kube-apiserver's RBAC authorizer does it, over the objects in the store.

A request is allowed when one rule of a Role/ClusterRole bound to the user allows its verb, API
group, resource (``resource/subresource``, ``*``, ``*/subresource``) and name (``resourceNames``):
ClusterRoleBindings in every namespace and at the cluster scope, RoleBindings only in their own
namespace. ClusterRoles with an ``aggregationRule`` take the rules of the ClusterRoles their
selectors match. Users in ``system:masters`` (the kubeconfig's admin) skip RBAC, as upstream. A
denial is the upstream 403 ``Status`` (``forbidden_error``), with ``RBAC: ...`` reasons when a
binding names a role that does not exist.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from lwsflow.controller.errors import Forbidden
from lwsflow.sim import kinds
from lwsflow.sim.store import Store

MASTERS = "system:masters"
AUTHENTICATED = "system:authenticated"
# what the bootstrap ClusterRoles system:discovery, system:public-info-viewer and
# system:basic-user grant every authenticated user; /lwsflow/v1/clock is the embedded cluster's own
# (the rollout controller's ClusterClock reads it)
_PUBLIC_PATHS = ("/api", "/apis", "/version", "/openapi", "/healthz", "/livez", "/readyz",
                 "/lwsflow/v1/clock")
_BASIC_USER = {("create", "authorization.k8s.io", "selfsubjectaccessreviews"),
               ("create", "authorization.k8s.io", "selfsubjectrulesreviews")}


@dataclass(frozen=True)
class User:
    """An authenticated identity: ``kubernetes-admin`` or ``system:serviceaccount:NS:NAME``."""

    name: str
    groups: tuple[str, ...]

    @property
    def is_admin(self) -> bool:
        return MASTERS in self.groups

    @classmethod
    def admin(cls) -> User:
        return cls("kubernetes-admin", (MASTERS, AUTHENTICATED))

    @classmethod
    def service_account(cls, namespace: str, name: str) -> User:
        return cls(
            f"system:serviceaccount:{namespace}:{name}",
            ("system:serviceaccounts", f"system:serviceaccounts:{namespace}", AUTHENTICATED),
        )


@dataclass(frozen=True)
class Attributes:
    """What one request asks (kube-apiserver's authorizer.Attributes)."""

    verb: str
    group: str = ""
    resource: str = ""
    subresource: str = ""
    namespace: str = ""
    name: str = ""
    path: str = ""  # set for non-resource requests (discovery, /version, ...)

    @property
    def resource_request(self) -> bool:
        return not self.path


@dataclass(frozen=True)
class Decision:
    allowed: bool
    reason: str  # "RBAC: allowed by ..." when allowed; the RBAC errors (may be "") when denied


def authorize(store: Store, user: User, attrs: Attributes) -> Decision:
    """Whether ``user`` may do ``attrs``: system:masters, the public discovery paths, then RBAC."""
    if user.is_admin:
        return Decision(True, "")
    if not attrs.resource_request:
        path = attrs.path.rstrip("/") or "/"
        public = attrs.verb == "get" and any(path == p or path.startswith(p + "/") for p in _PUBLIC_PATHS)
        if public:
            return Decision(True, "")
    elif (attrs.verb, attrs.group, attrs.resource) in _BASIC_USER:
        return Decision(True, "")
    errors: list[str] = []
    with store.lock:
        for binding, role_ref in _bindings(store, attrs.namespace):
            if not any(_applies(s, user, binding) for s in binding.get("subjects") or ()):
                continue
            rules = _rules_of(store, role_ref, binding, errors)
            if any(_rule_allows(r, attrs) for r in rules):
                return Decision(True, _allowed_by(binding, role_ref, user))
    return Decision(False, f"RBAC: {_aggregate(errors)}" if errors else "")


def forbidden_error(user: User, attrs: Attributes, reason: str = "") -> Forbidden:
    """The 403 kube-apiserver sends (handlers/responsewriters.ForbiddenStatusError)."""
    if not attrs.resource_request:
        msg = f'User "{user.name}" cannot {attrs.verb} path "{attrs.path}"'
    else:
        resource = f"{attrs.resource}/{attrs.subresource}" if attrs.subresource else attrs.resource
        where = f'in the namespace "{attrs.namespace}"' if attrs.namespace else "at the cluster scope"
        msg = (f'User "{user.name}" cannot {attrs.verb} resource "{resource}" '
               f'in API group "{attrs.group}" {where}')
    if reason:
        msg = f"{msg}: {reason}"
    if not attrs.resource_request:
        return Forbidden(f"forbidden: {msg}", details={})
    qualified = f"{attrs.resource}.{attrs.group}" if attrs.group else attrs.resource
    named = f'{qualified} "{attrs.name}"' if attrs.name else qualified
    details: dict[str, Any] = {"kind": attrs.resource}
    if attrs.group:
        details["group"] = attrs.group
    if attrs.name:
        details["name"] = attrs.name
    return Forbidden(f"{named} is forbidden: {msg}", details=details)


def impersonate(store: Store, user: User, name: str, groups: tuple[str, ...]) -> User:
    """The identity ``user`` acts as (``Impersonate-User``/``-Group`` headers, ``kubectl --as``), after
    checking the ``impersonate`` verb on users, serviceaccounts and groups as kube-apiserver does."""
    sa_prefix = "system:serviceaccount:"
    if name.startswith(sa_prefix) and name.count(":") == 3:
        ns, _, sa = name[len(sa_prefix):].partition(":")
        checks = [Attributes("impersonate", "", "serviceaccounts", namespace=ns, name=sa)]
        target = User.service_account(ns, sa)
    else:
        checks = [Attributes("impersonate", "", "users", name=name)]
        target = User(name, (AUTHENTICATED,))
    checks += [Attributes("impersonate", "", "groups", name=g) for g in groups]
    for attrs in checks:
        decision = authorize(store, user, attrs)
        if not decision.allowed:
            raise forbidden_error(user, attrs, decision.reason)
    if groups:
        target = User(target.name, (*groups, AUTHENTICATED) if AUTHENTICATED not in groups else groups)
    return target


# -- bindings and roles ---------------------------------------------------------------------------------
def _bindings(store: Store, namespace: str) -> Iterable[tuple[dict, dict]]:
    for b in store.iter_raw(kinds.CLUSTER_ROLE_BINDING.key):
        yield b, b.get("roleRef") or {}
    if namespace:
        for b in store.iter_raw(kinds.ROLE_BINDING.key):
            if b["metadata"].get("namespace") == namespace:
                yield b, b.get("roleRef") or {}


def _applies(subject: dict, user: User, binding: dict) -> bool:
    kind, name = subject.get("kind"), subject.get("name")
    if kind == "User":
        return name == user.name
    if kind == "Group":
        return name in user.groups
    if kind == "ServiceAccount":
        ns = subject.get("namespace") or binding["metadata"].get("namespace", "")
        return user.name == f"system:serviceaccount:{ns}:{name}"
    return False


def _rules_of(store: Store, role_ref: dict, binding: dict, errors: list[str]) -> list[dict]:
    name = role_ref.get("name", "")
    if role_ref.get("kind") == "Role":
        role = store.get_raw(kinds.ROLE.key, binding["metadata"].get("namespace", ""), name)
        missing = f'role.rbac.authorization.k8s.io "{name}" not found'
    else:
        role = store.get_raw(kinds.CLUSTER_ROLE.key, "", name)
        missing = f'clusterrole.rbac.authorization.k8s.io "{name}" not found'
    if role is None:
        errors.append(missing)
        return []
    agg = role.get("aggregationRule")
    if agg is None:
        return list(role.get("rules") or ())
    # the clusterrole-aggregation controller replaces the rules with those of the selected roles
    selectors = agg.get("clusterRoleSelectors") or ()
    out: list[dict] = []
    for other in store.iter_raw(kinds.CLUSTER_ROLE.key):
        if other is not role and other.get("aggregationRule") is None and any(
            _selects(s, other["metadata"].get("labels") or {}) for s in selectors
        ):
            out.extend(other.get("rules") or ())
    return out


def _selects(selector: dict, labels: dict[str, str]) -> bool:
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for e in selector.get("matchExpressions") or ():
        key, op, values = e.get("key", ""), e.get("operator", ""), e.get("values") or []
        ok = {
            "In": key in labels and labels[key] in values,
            "NotIn": key not in labels or labels[key] not in values,
            "Exists": key in labels,
            "DoesNotExist": key not in labels,
        }.get(op, False)
        if not ok:
            return False
    return True


# -- rules ------------------------------------------------------------------------------------------------
def _rule_allows(rule: dict, a: Attributes) -> bool:
    verbs = rule.get("verbs") or ()
    if "*" not in verbs and a.verb not in verbs:
        return False
    if not a.resource_request:
        return any(u == "*" or u == a.path or (u.endswith("*") and a.path.startswith(u[:-1]))
                   for u in rule.get("nonResourceURLs") or ())
    groups = rule.get("apiGroups") or ()
    if "*" not in groups and a.group not in groups:
        return False
    if not _resource_matches(rule.get("resources") or (), a.resource, a.subresource):
        return False
    names = rule.get("resourceNames") or ()
    return not names or a.name in names


def _resource_matches(resources: Iterable[str], resource: str, subresource: str) -> bool:
    combined = f"{resource}/{subresource}" if subresource else resource
    for r in resources:
        if r in ("*", combined):
            return True
        if subresource and r == f"*/{subresource}":
            return True
    return False


def _allowed_by(binding: dict, role_ref: dict, user: User) -> str:
    meta = binding["metadata"]
    if binding.get("kind") == "RoleBinding" or meta.get("namespace"):
        where = f'RoleBinding "{meta["name"]}/{meta.get("namespace", "")}"'
    else:
        where = f'ClusterRoleBinding "{meta["name"]}"'
    return f'RBAC: allowed by {where} of {role_ref.get("kind")} "{role_ref.get("name")}" to {_who(user)}'


def _who(user: User) -> str:
    prefix = "system:serviceaccount:"
    if user.name.startswith(prefix):
        ns, _, name = user.name[len(prefix):].partition(":")
        return f'ServiceAccount "{name}/{ns}"'
    return f'User "{user.name}"'


def _aggregate(errors: list[str]) -> str:
    """utilerrors.NewAggregate(...).Error(): one message alone, several in brackets."""
    uniq = list(dict.fromkeys(errors))
    return uniq[0] if len(uniq) == 1 else "[" + ", ".join(uniq) + "]"
