"""URL parsing: which resource, namespace, name and subresource a Kubernetes API path addresses."""

from __future__ import annotations

from dataclasses import dataclass

from lwsflow.controller.errors import NotFound
from lwsflow.sim import kinds


def group_versions() -> tuple[tuple[str, str], ...]:
    """The served group-versions, in table order (kinds of applied CRDs included)."""
    return tuple(dict.fromkeys((t.group, t.version) for t in kinds.ALL))


@dataclass(frozen=True)
class Route:
    """A parsed resource path, e.g. ``/apis/apps/v1/namespaces/ns/statefulsets/x/scale``."""

    rtype: kinds.ResourceType
    namespace: str  # "" for cluster-scoped kinds and all-namespace lists
    name: str  # "" for collections
    subresource: str  # "", "status", "scale" or "token" (serviceaccounts)


def resource_type(group: str, version: str, plural: str) -> kinds.ResourceType:
    for t in kinds.ALL:
        if (t.group, t.version, t.plural) == (group, version, plural):
            return t
    raise NotFound("the server could not find the requested resource")


def parse_resource_path(path: str) -> Route | None:
    """The Route of an API resource path, or None when ``path`` is not one (discovery, healthz...)."""
    parts = [p for p in path.split("/") if p]
    if len(parts) >= 3 and parts[0] == "api" and parts[1] == "v1":
        group, version, rest = "", "v1", parts[2:]
    elif len(parts) >= 4 and parts[0] == "apis":
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        return None
    namespace = ""
    # /api/v1/namespaces/{ns} and /api/v1/namespaces/{ns}/status address the Namespace object itself.
    is_ns_object = (
        group == ""
        and rest[0] == "namespaces"
        and (len(rest) == 2 or (len(rest) == 3 and rest[2] in ("status", "finalize")))
    )
    if rest[0] == "namespaces" and len(rest) >= 3 and not is_ns_object:
        namespace, rest = rest[1], rest[2:]
    if len(rest) > 3:
        raise NotFound("the server could not find the requested resource")
    rtype = resource_type(group, version, rest[0])
    name = rest[1] if len(rest) > 1 else ""
    sub = rest[2] if len(rest) > 2 else ""
    if sub == "finalize":
        sub = ""
    if sub == "token" and rtype is kinds.SERVICE_ACCOUNT and name:
        pass  # the TokenRequest subresource (create only)
    elif sub and (
        sub not in ("status", "scale")
        or (sub == "scale" and not rtype.has_scale)
        or (sub == "status" and not rtype.has_status)
    ):
        raise NotFound("the server could not find the requested resource")
    if not rtype.namespaced:
        namespace = ""
    return Route(rtype, namespace, name, sub)
