"""Server-side printing (``meta.k8s.io/v1`` Table) for ``kubectl get``: the columns kube-apiserver and
the CRDs' ``additionalPrinterColumns`` define, with ages in virtual time."""

from __future__ import annotations

import calendar
import time
from collections.abc import Callable
from typing import Any

from lwsflow.sim import kinds

Column = tuple[str, str, int, Callable[[dict[str, Any], float], Any]]  # name, type, priority, cell


def human_duration(seconds: float) -> str:
    """k8s.io/apimachinery's ``duration.HumanDuration`` (the AGE column)."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    m = s // 60
    if m < 10:
        return f"{m}m" if s % 60 == 0 else f"{m}m{s % 60}s"
    if m < 180:
        return f"{m}m"
    h = s // 3600
    if h < 8:
        return f"{h}h" if m % 60 == 0 else f"{h}h{m % 60}m"
    if h < 48:
        return f"{h}h"
    if h < 24 * 8:
        return f"{h // 24}d" if h % 24 == 0 else f"{h // 24}d{h % 24}h"
    if h < 24 * 365 * 2:
        return f"{h // 24}d"
    years, days = h // 24 // 365, (h // 24) % 365
    return f"{years}y" if days == 0 or years >= 8 else f"{years}y{days}d"


def _epoch(ts: str | None) -> float | None:
    if not ts:
        return None
    try:
        return float(calendar.timegm(time.strptime(ts.split(".")[0].rstrip("Z"), "%Y-%m-%dT%H:%M:%S")))
    except ValueError:
        return None


def _since(ts: str | None, now: float) -> str:
    t = _epoch(ts)
    return "<unknown>" if t is None else human_duration(now - t)


def _path(obj: Any, dotted: str) -> Any:
    cur = obj
    for part in dotted.strip(".").split("."):
        if not isinstance(cur, dict):
            return None
        cur = cur.get(part)
    return cur


def _age(o: dict[str, Any], now: float) -> str:
    return _since(o["metadata"].get("creationTimestamp"), now)


def _name(o: dict[str, Any], now: float) -> str:
    return o["metadata"]["name"]


def _pod_status(o: dict[str, Any], now: float) -> str:
    if o["metadata"].get("deletionTimestamp"):
        return "Terminating"
    st = o.get("status") or {}
    reason = st.get("reason") or st.get("phase") or "Pending"
    for cs in st.get("containerStatuses") or []:
        state = cs.get("state") or {}
        if state.get("waiting", {}).get("reason"):
            reason = state["waiting"]["reason"]
        elif state.get("terminated"):
            reason = state["terminated"].get("reason") or "Error"
    return reason


def _since_at(path: str) -> Callable[[dict[str, Any], float], str]:
    """A date column: the age of the timestamp at ``path``."""
    return lambda o, now: _since(_path(o, path), now)


def _pod_ready(o: dict[str, Any], now: float) -> str:
    total = len((o.get("spec") or {}).get("containers") or [])
    ready = sum(1 for cs in (o.get("status") or {}).get("containerStatuses") or [] if cs.get("ready"))
    return f"{ready}/{total}"


def _restarts(o: dict[str, Any], now: float) -> int:
    return sum(
        int(cs.get("restartCount", 0)) for cs in (o.get("status") or {}).get("containerStatuses") or []
    )


def _node_status(o: dict[str, Any], now: float) -> str:
    conds = {c.get("type"): c.get("status") for c in (o.get("status") or {}).get("conditions") or []}
    status = "Ready" if conds.get("Ready") == "True" else "NotReady"
    return status + (",SchedulingDisabled" if (o.get("spec") or {}).get("unschedulable") else "")


def _node_roles(o: dict[str, Any], now: float) -> str:
    pre = "node-role.kubernetes.io/"
    roles = [k[len(pre) :] for k in o["metadata"].get("labels") or {} if k.startswith(pre)]
    return ",".join(sorted(roles)) or "<none>"


def _svc_ports(o: dict[str, Any], now: float) -> str:
    ports = (o.get("spec") or {}).get("ports") or []
    return ",".join(f"{p.get('port')}/{p.get('protocol', 'TCP')}" for p in ports) or "<none>"


def _sts_ready(o: dict[str, Any], now: float) -> str:
    st = o.get("status") or {}
    return f"{st.get('readyReplicas', 0)}/{(o.get('spec') or {}).get('replicas', 1)}"


def _containers(field: str) -> Callable[[dict[str, Any], float], str]:
    def cell(o: dict[str, Any], now: float) -> str:
        cs = _path(o, "spec.template.spec.containers") or []
        return ",".join(str(c.get(field, "")) for c in cs)

    return cell


def _get(dotted: str, default: Any = None) -> Callable[[dict[str, Any], float], Any]:
    def cell(o: dict[str, Any], now: float) -> Any:
        v = _path(o, dotted)
        return default if v is None else v

    return cell


def _event_object(o: dict[str, Any], now: float) -> str:
    io = o.get("involvedObject") or {}
    return f"{str(io.get('kind', '')).lower()}/{io.get('name', '')}"


def _event_last_seen(o: dict[str, Any], now: float) -> str:
    ts = o.get("lastTimestamp") or o.get("eventTime") or o["metadata"].get("creationTimestamp")
    return _since(ts, now)


_ACCESS_MODES = {"ReadWriteOnce": "RWO", "ReadOnlyMany": "ROX", "ReadWriteMany": "RWX",
                 "ReadWriteOncePod": "RWOP"}
NAME: Column = ("Name", "string", 0, _name)
AGE: Column = ("Age", "string", 0, _age)
def _subjects(kind: str) -> Callable[[dict[str, Any], float], str]:
    def cell(o: dict[str, Any], now: float) -> str:
        sa = kind == "ServiceAccount"
        names = [f"{s.get('namespace', '')}/{s.get('name', '')}" if sa else s.get("name", "")
                 for s in o.get("subjects") or () if s.get("kind") == kind]
        return ", ".join(names)

    return cell


_BINDING: list[Column] = [
    NAME,
    ("Role", "string", 0, lambda o, n: f"{(o.get('roleRef') or {}).get('kind', '')}/"
                                       f"{(o.get('roleRef') or {}).get('name', '')}"),
    AGE,
    ("Users", "string", 1, _subjects("User")),
    ("Groups", "string", 1, _subjects("Group")),
    ("ServiceAccounts", "string", 1, _subjects("ServiceAccount")),
]

_BUILTIN: dict[str, list[Column]] = {
    "pods": [
        NAME,
        ("Ready", "string", 0, _pod_ready),
        ("Status", "string", 0, _pod_status),
        ("Restarts", "string", 0, _restarts),
        AGE,
        ("IP", "string", 1, _get("status.podIP", "<none>")),
        ("Node", "string", 1, _get("spec.nodeName", "<none>")),
        ("Nominated Node", "string", 1, _get("status.nominatedNodeName", "<none>")),
        ("Readiness Gates", "string", 1, lambda o, n: "<none>"),
    ],
    "nodes": [
        NAME,
        ("Status", "string", 0, _node_status),
        ("Roles", "string", 0, _node_roles),
        AGE,
        ("Version", "string", 0, _get("status.nodeInfo.kubeletVersion", "")),
        (
            "Internal-IP",
            "string",
            1,
            lambda o, n: next(
                (
                    a.get("address")
                    for a in _path(o, "status.addresses") or []
                    if a.get("type") == "InternalIP"
                ),
                "<none>",
            ),
        ),
    ],
    "services": [
        NAME,
        ("Type", "string", 0, _get("spec.type", "ClusterIP")),
        ("Cluster-IP", "string", 0, _get("spec.clusterIP", "<none>")),
        ("External-IP", "string", 0, lambda o, n: "<none>"),
        ("Port(s)", "string", 0, _svc_ports),
        AGE,
        (
            "Selector",
            "string",
            1,
            lambda o, n: (
                ",".join(f"{k}={v}" for k, v in sorted((_path(o, "spec.selector") or {}).items())) or "<none>"
            ),
        ),
    ],
    "statefulsets.apps": [
        NAME,
        ("Ready", "string", 0, _sts_ready),
        AGE,
        ("Containers", "string", 1, _containers("name")),
        ("Images", "string", 1, _containers("image")),
    ],
    "namespaces": [NAME, ("Status", "string", 0, _get("status.phase", "Active")), AGE],
    "events": [
        ("Last Seen", "string", 0, _event_last_seen),
        ("Type", "string", 0, _get("type", "")),
        ("Reason", "string", 0, _get("reason", "")),
        ("Object", "string", 0, _event_object),
        ("Message", "string", 0, _get("message", "")),
    ],
    "configmaps": [NAME, ("Data", "string", 0, lambda o, n: len(o.get("data") or {})), AGE],
    "persistentvolumeclaims": [
        NAME,
        ("Status", "string", 0, _get("status.phase", "Pending")),
        ("Volume", "string", 0, _get("spec.volumeName", "")),
        ("Capacity", "string", 0, _get("status.capacity.storage", "")),
        ("Access Modes", "string", 0, lambda o, n: ",".join(
            _ACCESS_MODES.get(m, m) for m in _path(o, "status.accessModes") or [])),
        ("StorageClass", "string", 0, _get("spec.storageClassName", "<unset>")),
        ("VolumeAttributesClass", "string", 0, _get("spec.volumeAttributesClassName", "<unset>")),
        AGE,
        ("VolumeMode", "string", 1, _get("spec.volumeMode", "")),
    ],
    "serviceaccounts": [NAME, ("Secrets", "string", 0, lambda o, n: len(o.get("secrets") or ())), AGE],
    "roles.rbac.authorization.k8s.io": [NAME, ("Created At", "date", 0, _get("metadata.creationTimestamp"))],
    "clusterroles.rbac.authorization.k8s.io": [
        NAME, ("Created At", "date", 0, _get("metadata.creationTimestamp"))],
    "rolebindings.rbac.authorization.k8s.io": _BINDING,
    "clusterrolebindings.rbac.authorization.k8s.io": _BINDING,
}


def columns_for(rtype: kinds.ResourceType) -> list[Column]:
    if rtype.key in _BUILTIN:
        return _BUILTIN[rtype.key]
    if rtype.group in ("leaderworkerset.x-k8s.io", "disaggregatedset.x-k8s.io", "lwsflow.io",
                       "inference.networking.k8s.io", "gateway.networking.k8s.io"):
        from lwsflow.controller.api.crd import crd_info

        cols: list[Column] = [NAME]
        for c in crd_info(rtype.plural).printer_columns:
            if c["type"] == "date":
                cols.append(
                    (
                        c["name"],
                        "date",
                        int(c.get("priority", 0)),
                        _since_at(c["jsonPath"]),
                    )
                )
            else:
                cols.append((c["name"], c["type"], int(c.get("priority", 0)), _get(c["jsonPath"])))
        if len(cols) == 1:
            cols.append(AGE)  # a CRD without printer columns prints Name and Age
        return cols
    return [NAME, AGE]


def column_definitions(rtype: kinds.ResourceType) -> list[dict[str, Any]]:
    return [
        {
            "name": n,
            "type": "string" if t == "date" else t,
            "format": "name" if n == "Name" else "",
            "description": n,
            "priority": p,
        }
        for n, t, p, _ in columns_for(rtype)
    ]


def row(
    rtype: kinds.ResourceType, obj: dict[str, Any], now: float, include: str = "Metadata"
) -> dict[str, Any]:
    out: dict[str, Any] = {"cells": [fn(obj, now) for _, _, _, fn in columns_for(rtype)]}
    if include == "Object":
        out["object"] = obj
    elif include != "None":
        out["object"] = {
            "kind": "PartialObjectMetadata",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": obj.get("metadata", {}),
        }
    return out


def table(
    rtype: kinds.ResourceType,
    objs: list[dict[str, Any]],
    now: float,
    meta: dict[str, Any],
    include: str = "Metadata",
) -> dict[str, Any]:
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": meta,
        "columnDefinitions": column_definitions(rtype),
        "rows": [row(rtype, o, now, include) for o in objs],
    }
