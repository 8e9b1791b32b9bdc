"""The ServiceAccount admission plugin's refusal: a pod naming a ServiceAccount that does not exist in
its namespace is not created (403, as kube-apiserver's ``serviceaccount`` plugin answers).

``default`` always passes: a real cluster's ServiceAccount controller creates it in every namespace
(the embedded cluster does not store it; docs/embedded-cluster.md).
"""

from __future__ import annotations

from lwsflow.controller.errors import Forbidden
from lwsflow.sim import kinds
from lwsflow.sim.store import Store

DEFAULT = "default"


def admit_pod(store: Store, pod: dict) -> None:
    """Raise Forbidden when the pod's ``spec.serviceAccountName`` names a missing ServiceAccount."""
    meta = pod.get("metadata") or {}
    ns = meta.get("namespace") or "default"
    sa = (pod.get("spec") or {}).get("serviceAccountName") or DEFAULT
    if sa == DEFAULT or store.get_raw(kinds.SERVICE_ACCOUNT.key, ns, sa) is not None:
        return
    name = meta.get("name") or ""
    raise Forbidden(f'pods "{name}" is forbidden: error looking up service account {ns}/{sa}: '
                    f'serviceaccount "{sa}" not found', details={"name": name, "kind": "pods"})
