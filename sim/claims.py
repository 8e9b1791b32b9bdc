"""PersistentVolumeClaims from a StatefulSet's ``volumeClaimTemplates``, as the StatefulSet controller
makes them (stateful_set_utils.go): one claim ``<template>-<sts>-<ordinal>`` per pod and template,
labelled with the template's labels plus the set's selector, created before the pod; the pod gets a
volume per template naming its claim (replacing a pod volume of the same name).

``persistentVolumeClaimRetentionPolicy`` (default Retain/Retain) is kept in the claims' owner
references, so garbage collection does the deleting: ``whenDeleted: Delete`` makes the set the
claim's controller; ``whenScaled: Delete`` makes the pod its controller once the pod's ordinal is
scaled away. No storage is modelled: every claim (these and those created through the API) is
``Bound`` at once, with the capacity it requests, and no PersistentVolume object exists.
"""

from __future__ import annotations

from lwsflow.sim import kinds
from lwsflow.sim.podutil import owner_ref
from lwsflow.sim.store import Store, clone

PVC = kinds.PVC.key


def templates(sts: dict) -> list[dict]:
    return (sts.get("spec") or {}).get("volumeClaimTemplates") or []


def claim_name(template: dict, pod_name: str) -> str:
    return f"{(template.get('metadata') or {}).get('name', '')}-{pod_name}"


def add_volumes(spec: dict, sts: dict, pod_name: str) -> None:
    """updateStorage: a ``persistentVolumeClaim`` volume per template, then the pod's other volumes."""
    tmpls = templates(sts)
    names = [(t.get("metadata") or {}).get("name", "") for t in tmpls]
    claimed = [{"name": n, "persistentVolumeClaim": {"claimName": claim_name(t, pod_name)}}
               for n, t in zip(names, tmpls, strict=True)]
    spec["volumes"] = claimed + [v for v in spec.get("volumes") or [] if v.get("name") not in names]


def sync(store: Store, sts: dict, pod_name: str, pod: dict | None, scaled_down: bool) -> None:
    """Create the pod's missing claims and keep their owner references in line with the policy."""
    policy = (sts.get("spec") or {}).get("persistentVolumeClaimRetentionPolicy") or {}
    delete_with_set = policy.get("whenDeleted") == "Delete"
    delete_when_scaled = policy.get("whenScaled") == "Delete"
    ns = sts["metadata"]["namespace"]
    selector = ((sts["spec"].get("selector") or {}).get("matchLabels")) or {}
    for tmpl in templates(sts):
        name = claim_name(tmpl, pod_name)
        want: list[dict] = []
        if scaled_down and delete_when_scaled:
            if pod is not None:
                want.append(owner_ref(pod))
        elif delete_with_set:
            want.append(owner_ref(sts))
        claim = store.get_raw(PVC, ns, name)
        if claim is None:
            if scaled_down:
                continue
            store.create(PVC, _new_claim(tmpl, name, ns, selector, want))
            continue
        ours = {sts["metadata"]["uid"], *([pod["metadata"]["uid"]] if pod is not None else [])}
        refs = claim["metadata"].get("ownerReferences") or []
        kept = [r for r in refs if r.get("uid") not in ours]
        if kept + want != refs:
            new = clone(claim)
            new["metadata"]["ownerReferences"] = kept + want
            if not new["metadata"]["ownerReferences"]:
                del new["metadata"]["ownerReferences"]
            store.replace(PVC, new, check_version=False)


def _new_claim(tmpl: dict, name: str, ns: str, selector: dict, refs: list[dict]) -> dict:
    meta = clone(tmpl.get("metadata") or {})
    spec = clone(tmpl.get("spec") or {})
    meta.update(name=name, namespace=ns, labels={**(meta.get("labels") or {}), **selector})
    if refs:
        meta["ownerReferences"] = refs
    return bind({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": meta, "spec": spec})


def bind(claim: dict) -> dict:
    """A claim as the binder leaves it at once: the API default volumeMode, Bound, what it requests."""
    spec = claim.setdefault("spec", {})
    spec.setdefault("volumeMode", "Filesystem")
    requested = ((spec.get("resources") or {}).get("requests") or {}).get("storage")
    status: dict = {"phase": "Bound", "accessModes": list(spec.get("accessModes") or [])}
    if requested is not None:
        status["capacity"] = {"storage": requested}
    claim["status"] = status
    return claim
