"""The StatefulSet controller's ControllerRevisions (pkg/controller/history, stateful_set_control.go
getStatefulSetRevisions and truncateHistory), so ``kubectl rollout history sts/x`` has them.

A revision is ``<sts>-<hash>`` (the name pods carry in ``controller-revision-hash`` and status
carries as current/update revision), labelled with the template's labels plus
``controller.kubernetes.io/hash``, annotated with the StatefulSet's annotations, owned by its
StatefulSet, holding the template as the strategic patch
``{"spec": {"template": {..., "$patch": "replace"}}}`` and a number one above the highest so far; a
template that comes back reuses its revision with a new number. Beyond
``revisionHistoryLimit``, the oldest revisions no pod uses and that are neither current nor update go.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lwsflow.sim.podutil import owner_ref
from lwsflow.sim.store import clone

if TYPE_CHECKING:
    from lwsflow.sim.cluster import Cluster

CR = "controllerrevisions.apps"
HASH_LABEL = "controller.kubernetes.io/hash"
_REVISION_LABEL = "controller-revision-hash"


def sync(c: Cluster, sts: dict, update_rev: str, current_rev: str, template: dict, live: set[str]) -> None:
    """Create or renumber the update revision; drop history past the limit (``live``: revisions pods
    of this StatefulSet still carry)."""
    store, meta = c.store, sts["metadata"]
    ns, uid = meta["namespace"], meta["uid"]
    mine = [cr for n in c.owned_names(uid, CR) if (cr := store.get_raw(CR, ns, n)) is not None]
    top = max([int(cr.get("revision") or 0) for cr in mine] or [0])
    current = next((cr for cr in mine if cr["metadata"]["name"] == update_rev), None)
    if current is None:
        if store.get_raw(CR, ns, update_rev) is None:  # a same-named one of another owner: leave it
            store.create(CR, _revision(sts, update_rev, template, top + 1))
    elif int(current.get("revision") or 0) != top and len(mine) > 1:
        store.mutate(CR, ns, update_rev, lambda cr: cr.__setitem__("revision", top + 1))
    limit = int((sts.get("spec") or {}).get("revisionHistoryLimit", 10))
    keep = {update_rev, current_rev, *live}
    old = sorted((cr for cr in mine if cr["metadata"]["name"] not in keep),
                 key=lambda cr: int(cr.get("revision") or 0))
    for cr in old[:max(0, len(old) - limit)]:
        store.delete(CR, ns, cr["metadata"]["name"])


def _revision(sts: dict, name: str, template: dict, number: int) -> dict:
    labels = dict((template.get("metadata") or {}).get("labels") or {})
    labels[HASH_LABEL] = name.rsplit("-", 1)[-1]
    meta = {"name": name, "namespace": sts["metadata"]["namespace"], "labels": labels,
            "ownerReferences": [owner_ref(sts)]}
    # stateful_set_utils.go newRevision copies the StatefulSet's annotations onto the revision it
    # creates (the LWS leader StatefulSet's leaderworkerset.sigs.k8s.io/replicas among them)
    if annotations := sts["metadata"].get("annotations"):
        meta["annotations"] = dict(annotations)
    return {
        "apiVersion": "apps/v1",
        "kind": "ControllerRevision",
        "metadata": meta,
        "data": {"spec": {"template": {**clone(template), "$patch": "replace"}}},
        "revision": number,
    }
