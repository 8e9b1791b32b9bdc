"""The ServiceAccount admission plugin on a new pod (plugin/pkg/admission/serviceaccount): a pod
without ``serviceAccountName`` gets ``default``; a pod naming a ServiceAccount that does not exist in
its namespace is not created (403); unless the pod or its ServiceAccount turns automounting off, the
pod gets the projected token volume ``kube-api-access-<5 random>`` (token, ``kube-root-ca.crt``,
namespace) mounted read-only in every container at /var/run/secrets/kubernetes.io/serviceaccount.

``default`` always passes: the namespace controller of the embedded cluster creates it in every
namespace (``sim/namespaces.py``), as a real cluster's ServiceAccount controller does a moment after
the namespace appears.
"""

from __future__ import annotations

import random
from typing import Any

from lwsflow.controller.errors import Forbidden
from lwsflow.sim import kinds
from lwsflow.sim.store import Store

DEFAULT = "default"
VOLUME_PREFIX = "kube-api-access-"
MOUNT_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"
ROOT_CA = "kube-root-ca.crt"
_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # the API's name generator
_RANDOM = random.SystemRandom()


def admit_pod(store: Store, pod: dict) -> None:
    """Default the ServiceAccount, refuse a missing one (Forbidden), mount its token volume."""
    meta = pod.get("metadata") or {}
    ns = meta.get("namespace") or "default"
    spec = pod.get("spec")
    if not isinstance(spec, dict):
        return
    sa = spec.get("serviceAccountName") or spec.get("serviceAccount") or DEFAULT
    spec["serviceAccountName"] = spec["serviceAccount"] = sa
    account = store.get_raw(kinds.SERVICE_ACCOUNT.key, ns, sa)
    if account is None and sa != DEFAULT:
        name = meta.get("name") or ""
        raise Forbidden(f'pods "{name}" is forbidden: error looking up service account {ns}/{sa}: '
                        f'serviceaccount "{sa}" not found', details={"name": name, "kind": "pods"})
    automount = spec.get("automountServiceAccountToken")
    if automount is None:
        automount = (account or {}).get("automountServiceAccountToken")
    if automount is not False:
        _mount_token(spec)


def token_volume(name: str) -> dict[str, Any]:
    return {"name": name, "projected": {"defaultMode": 420, "sources": [
        {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
        {"configMap": {"name": ROOT_CA, "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
        {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {
            "apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}},
    ]}}


def _mount_token(spec: dict[str, Any]) -> None:
    volumes = [v for v in spec.get("volumes") or () if isinstance(v, dict)]
    name = next((v["name"] for v in volumes if str(v.get("name", "")).startswith(VOLUME_PREFIX)), "")
    has_volume = bool(name)
    name = name or VOLUME_PREFIX + "".join(_RANDOM.choice(_ALPHABET) for _ in range(5))
    needed = False
    for field in ("initContainers", "containers"):
        for c in spec.get(field) or ():
            if not isinstance(c, dict):
                continue
            mounts = c.get("volumeMounts") or []
            if not any(isinstance(m, dict) and m.get("mountPath") == MOUNT_PATH for m in mounts):
                c["volumeMounts"] = [*mounts, {"name": name, "readOnly": True, "mountPath": MOUNT_PATH}]
                needed = True
    if needed and not has_volume:
        spec["volumes"] = [*(spec.get("volumes") or []), token_volume(name)]
