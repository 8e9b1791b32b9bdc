"""Namespaces as kube-apiserver treats them: the four system namespaces exist from the start, a
namespaced object can only be created in a namespace that exists (the NamespaceLifecycle admission
plugin answers 404 ``namespaces "x" not found``), and deleting a namespace deletes its contents.

The namespace controller's ``Terminating`` phase is not modelled: the contents go at once, with the
namespace (docs/embedded-cluster.md, "Where it differs from a real cluster").
"""

from __future__ import annotations

import contextlib
from typing import Any

from lwsflow.controller.errors import AlreadyExists, NotFound
from lwsflow.sim import kinds
from lwsflow.sim.store import Store

SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
_NAME_LABEL = "kubernetes.io/metadata.name"


def namespace_defaults(obj: dict) -> dict:
    """What the API server adds to a new Namespace: the immutable name label, the ``kubernetes``
    finalizer in spec and phase Active."""
    meta = obj.setdefault("metadata", {})
    meta["labels"] = {**(meta.get("labels") or {}), _NAME_LABEL: meta.get("name", "")}
    raw_spec = obj.get("spec")
    spec: dict[str, Any] = raw_spec if isinstance(raw_spec, dict) else {}
    obj["spec"] = {**spec, "finalizers": spec.get("finalizers") or ["kubernetes"]}
    obj["status"] = {"phase": "Active"}
    return obj


def ensure_system_namespaces(store: Store) -> None:
    for ns in SYSTEM_NAMESPACES:
        if store.get_raw(kinds.NAMESPACE.key, "", ns) is None:
            with contextlib.suppress(AlreadyExists):  # created concurrently
                store.create(kinds.NAMESPACE.key,
                             namespace_defaults({"apiVersion": "v1", "kind": "Namespace",
                                                 "metadata": {"name": ns}}))


def require_namespace(store: Store, rtype: kinds.ResourceType, ns: str) -> None:
    """404 as the NamespaceLifecycle admission plugin answers a create in a missing namespace."""
    if rtype.namespaced and store.get_raw(kinds.NAMESPACE.key, "", ns) is None:
        raise NotFound(f'namespaces "{ns}" not found', details={"name": ns, "kind": "namespaces"})


def purge_namespace(store: Store, ns: str) -> None:
    """Delete every object of namespace ``ns`` (what the namespace controller does while Terminating)."""
    for t in kinds.ALL:
        if t.namespaced:
            for o in store.list(t.key, ns)[0]:
                with contextlib.suppress(NotFound):  # already gone with its owner
                    store.delete(t.key, ns, o["metadata"]["name"])
