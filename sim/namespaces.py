"""Namespaces as kube-apiserver treats them: the four system namespaces exist from the start, a
namespaced object can only be created in a namespace that exists (the NamespaceLifecycle admission
plugin answers 404 ``namespaces "x" not found``), and deleting a namespace deletes its contents.

Every namespace gets what a real cluster's controllers put in it a moment after it appears
(``populate``): the ``default`` ServiceAccount (serviceaccounts-controller) and the ConfigMap
``kube-root-ca.crt`` (root-ca-cert-publisher) that every pod's token volume projects.

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


_ROOT_CA_DESCRIPTION = (
    "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such "
    "as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across "
    "distributions of Kubernetes clusters.")
# the embedded cluster has no cluster CA (its API server's certificate is per process): a stand-in
ROOT_CA_PEM = ("-----BEGIN CERTIFICATE-----\nbHdzZmxvdyBlbWJlZGRlZCBjbHVzdGVyOiBubyBjbHVzdGVyIENB\n"
               "-----END CERTIFICATE-----\n")


def populate(store: Store, ns: str) -> None:
    """Create the ``default`` ServiceAccount and ``kube-root-ca.crt`` in ``ns`` when missing."""
    if store.get_raw(kinds.NAMESPACE.key, "", ns) is None:
        return
    wanted: tuple[tuple[kinds.ResourceType, dict[str, Any]], ...] = (
        (kinds.SERVICE_ACCOUNT, {"metadata": {"name": "default", "namespace": ns}}),
        (kinds.CONFIGMAP, {"metadata": {"name": "kube-root-ca.crt", "namespace": ns, "annotations": {
            "kubernetes.io/description": _ROOT_CA_DESCRIPTION}}, "data": {"ca.crt": ROOT_CA_PEM}}),
    )
    for rtype, obj in wanted:
        if store.get_raw(rtype.key, ns, obj["metadata"]["name"]) is None:
            with contextlib.suppress(AlreadyExists):
                store.create(rtype.key, {"apiVersion": rtype.api_version, "kind": rtype.kind, **obj})


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
