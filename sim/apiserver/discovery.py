"""Discovery documents: ``/version``, ``/api``, ``/apis`` and the per group-version resource lists.

kubectl builds its REST mapping (short names ``lws``/``dsrs``, categories for ``get all``, the scale
subresource's kind) from these, so they mirror what kube-apiserver and the CRDs publish.
"""

from __future__ import annotations

from typing import Any

from lwsflow.sim import kinds
from lwsflow.sim.apiserver.routing import group_versions

K8S_MAJOR, K8S_MINOR = "1", "37"
WRITE_VERBS = ("create", "update", "patch", "delete", "deletecollection")


def version() -> dict[str, Any]:
    return {
        "major": K8S_MAJOR,
        "minor": K8S_MINOR,
        "gitVersion": f"v{K8S_MAJOR}.{K8S_MINOR}.1-lwsflow-sim",
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "go1.25",
        "compiler": "gc",
        "platform": "linux/amd64",
    }


def api_versions(server_address: str) -> dict[str, Any]:
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
    }


def _group(name: str) -> dict[str, Any]:
    versions = [{"groupVersion": f"{g}/{v}", "version": v} for g, v in group_versions() if g == name]
    return {"name": name, "versions": versions, "preferredVersion": versions[0]}


def api_group_list() -> dict[str, Any]:
    groups = list(dict.fromkeys(g for g, _ in group_versions() if g))
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": [_group(g) for g in groups]}


def api_group(name: str) -> dict[str, Any] | None:
    if not any(g == name for g, _ in group_versions() if g):
        return None
    return {"kind": "APIGroup", "apiVersion": "v1", **_group(name)}


def _verbs(t: kinds.ResourceType) -> list[str]:
    verbs = list(t.verbs)
    if "delete" in verbs and "deletecollection" not in verbs:
        verbs.append("deletecollection")
    return sorted(verbs)


def resource_list(group: str, version: str) -> dict[str, Any] | None:
    """The APIResourceList of one group-version (None when we serve no such group-version)."""
    types = [t for t in kinds.ALL if t.group == group and t.version == version]
    if not types:
        return None
    resources: list[dict[str, Any]] = []
    for t in types:
        entry: dict[str, Any] = {
            "name": t.plural,
            "singularName": t.kind.lower(),
            "namespaced": t.namespaced,
            "kind": t.kind,
            "verbs": _verbs(t),
        }
        if t.short_names:
            entry["shortNames"] = list(t.short_names)
        if t.categories:
            entry["categories"] = list(t.categories)
        resources.append(entry)
        if t.has_status:
            resources.append(
                {
                    "name": f"{t.plural}/status",
                    "singularName": "",
                    "namespaced": t.namespaced,
                    "kind": t.kind,
                    "verbs": ["get", "patch", "update"],
                }
            )
        if t.has_scale:
            resources.append(
                {
                    "name": f"{t.plural}/scale",
                    "singularName": "",
                    "namespaced": t.namespaced,
                    "group": "autoscaling",
                    "version": "v1",
                    "kind": "Scale",
                    "verbs": ["get", "patch", "update"],
                }
            )
    gv = f"{group}/{version}" if group else version
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources}
