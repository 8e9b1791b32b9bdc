"""A Service's defaults (SetDefaults_Service, the ports' ``+default``) and what the registry adds on
create: a cluster IP from the service range and the IP family fields of a single-stack IPv4 cluster
(pkg/registry/core/service/storage/alloc.go). ExternalName Services get neither.
"""

from __future__ import annotations

import ipaddress
import itertools
from typing import Any

from lwsflow.sim.defaulting.table import NIL, ZERO, Default, dicts, fill

SERVICE_CIDR = ipaddress.ip_network("10.96.0.0/16")  # the address of `kubernetes` (.1) is never handed out
SPEC: tuple[Default, ...] = (("sessionAffinity", "None", ZERO), ("type", "ClusterIP", ZERO))
PORT: tuple[Default, ...] = (("protocol", "TCP", ZERO),)
_EXTERNAL = ("NodePort", "LoadBalancer")


def default_service(svc: dict[str, Any]) -> None:
    spec = svc.get("spec")
    if not isinstance(spec, dict):
        return
    fill(spec, SPEC)
    if spec["sessionAffinity"] == "None":
        spec.pop("sessionAffinityConfig", None)
    elif spec["sessionAffinity"] == "ClientIP":
        client = ((spec.get("sessionAffinityConfig") or {}).get("clientIP") or {})
        if client.get("timeoutSeconds") is None:
            spec["sessionAffinityConfig"] = {"clientIP": {"timeoutSeconds": 10800}}
    for port in dicts(spec, "ports"):
        fill(port, PORT)
        if port.get("targetPort") in (None, 0, ""):
            port["targetPort"] = port.get("port")
    kind = spec["type"]
    if kind in _EXTERNAL:
        fill(spec, (("externalTrafficPolicy", "Cluster", ZERO),))
    if kind in ("ClusterIP", *_EXTERNAL):
        fill(spec, (("internalTrafficPolicy", "Cluster", NIL),))
    if kind == "LoadBalancer":
        fill(spec, (("allocateLoadBalancerNodePorts", True, NIL),))


class ClusterIPs:
    """Hands out cluster IPs in order from SERVICE_CIDR (released addresses are not reused: the range
    outlasts any session of the embedded cluster)."""

    def __init__(self) -> None:
        self._hosts = itertools.islice(SERVICE_CIDR.hosts(), 1, None)

    def admit_new(self, svc: dict[str, Any]) -> None:
        spec = svc.get("spec")
        if not isinstance(spec, dict) or spec.get("type") == "ExternalName":
            return
        ip = spec.get("clusterIP") or (spec.get("clusterIPs") or [""])[0]
        if not ip:
            ip = str(next(self._hosts))
        spec["clusterIP"] = ip
        spec.setdefault("clusterIPs", [ip])
        # a headless Service without selector gets both families (its endpoints are written by hand),
        # as the reference cluster answers
        unselected = ip == "None" and not spec.get("selector")
        if spec.get("ipFamilyPolicy") is None:
            spec["ipFamilyPolicy"] = "RequireDualStack" if unselected else "SingleStack"
        spec.setdefault("ipFamilies", ["IPv4", "IPv6"] if unselected else ["IPv4"])
