"""kube-apiserver's defaulting of the core kinds, applied by the store to every write as the real
server applies it when it decodes one (so objects the embedded controllers write get it too), plus
what the registry and admission add to a new object only (cluster IPs, a pod's tolerations).

One module per kind (``pod.py``, ``service.py``, ``apps.py``, ``other.py``); the defaults themselves
are data tables (``table.py``). Custom resources get their CRD's defaults in the API server's
admission instead (``sim/apiserver/admission.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from lwsflow.sim import kinds
from lwsflow.sim.defaulting.apps import default_statefulset, drop_disabled
from lwsflow.sim.defaulting.other import default_claim, default_hpa
from lwsflow.sim.defaulting.pod import admit_new_pod, default_pod
from lwsflow.sim.defaulting.service import ClusterIPs, default_service

Obj = dict[str, Any]


class Defaulter:
    """Defaults for one cluster: its feature gates (read at each write: a cluster's config may turn one
    on after it started) and its cluster IP range."""

    def __init__(self, gates: Callable[[], frozenset[str]] = frozenset) -> None:
        self._gates = gates
        self.cluster_ips = ClusterIPs()
        self._by_key: dict[str, Callable[[Obj], None]] = {
            kinds.POD.key: default_pod,
            kinds.SERVICE.key: default_service,
            kinds.STATEFULSET.key: lambda o: default_statefulset(o, self.gates),
            kinds.PVC.key: default_claim,
            kinds.HPA.key: default_hpa,
        }

    @property
    def gates(self) -> frozenset[str]:
        return self._gates()

    def default(self, key: str, obj: Obj, old: Obj | None) -> None:
        """Every write of the object (create and update), in place."""
        fn = self._by_key.get(key)
        if fn is not None:
            fn(obj)
        if key == kinds.STATEFULSET.key:
            drop_disabled(obj, old, self.gates)

    def admit_new(self, key: str, obj: Obj) -> None:
        """A create only, after ``default``."""
        if key == kinds.POD.key:
            admit_new_pod(obj)
        elif key == kinds.SERVICE.key:
            self.cluster_ips.admit_new(obj)
            if not obj.get("status"):
                obj["status"] = {"loadBalancer": {}}
