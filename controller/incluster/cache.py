"""The controller's informer caches and the index from a target to the policies naming it.

Three informers (RolloutPolicies, LWS, DS) feed local caches; every change is mapped to the keys
(``namespace/policy``) of the policies it concerns and handed to ``enqueue``:

- a policy: itself, and every policy naming the same target (ownership may move to it);
- an LWS: the policies naming it, the pair it belongs to (``lwsflow.io/pd-pair``) and the DS that owns
  it (``DS_NAME`` label: a DS without status is judged by its child LWS);
- a DS: the policies naming it.

Reads the controller makes on every reconcile come from here (no request); a decision to *write*
re-reads what it acts on from the API first (``manager.py``), so a cache a few events behind never
makes the controller act twice.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Callable

from lwsflow.controller.api import labels as L
from lwsflow.controller.api.wire import Obj
from lwsflow.controller.errors import NotFound
from lwsflow.controller.kube.client import Kube
from lwsflow.controller.kube.informer import Informer, key_of
from lwsflow.controller.kube.resources import DS, LWS, ROLLOUT_POLICY
from lwsflow.controller.pd.pair import pair_of

Target = tuple[str, str, str]  # (kind, namespace, name)


def target_of(policy: Obj) -> Target | None:
    """The (kind, namespace, name) a policy's spec names (None: no usable targetRef)."""
    ref = (policy.get("spec") or {}).get("targetRef")
    if not isinstance(ref, dict) or not ref.get("kind") or not ref.get("name"):
        return None
    return str(ref["kind"]), key_of(policy)[0], str(ref["name"])


def policy_key(obj: Obj) -> str:
    ns, name = key_of(obj)
    return f"{ns}/{name}"


def owner_order(policy: Obj) -> tuple[str, str]:
    """The oldest policy naming a target owns it (creation time, then name: a stable order)."""
    meta = policy.get("metadata") or {}
    return str(meta.get("creationTimestamp") or ""), str(meta.get("name") or "")


class Caches:
    """The informers and the target index; ``enqueue`` receives policy keys to reconcile."""

    def __init__(self, kube: Kube, namespace: str | None, enqueue: Callable[[str], None],
                 stop: threading.Event, *, watch_s: int = 300) -> None:
        self.enqueue = enqueue
        self._lock = threading.Lock()
        self._by_target: dict[Target, set[str]] = defaultdict(set)
        self._target: dict[str, Target] = {}
        self.policies = Informer(kube, ROLLOUT_POLICY, namespace, self._on_policy, stop=stop, watch_s=watch_s)
        self.lws = Informer(kube, LWS, namespace, self._on_lws, stop=stop, watch_s=watch_s)
        self.ds = Informer(kube, DS, namespace, self._on_ds, stop=stop, watch_s=watch_s)
        self.all = [self.policies, self.lws, self.ds]

    def synced(self) -> bool:
        return all(inf.synced.is_set() for inf in self.all)

    # -- reads ---------------------------------------------------------------------------------------
    def targets(self, kind: str, namespace: str, name: str) -> list[Obj]:
        """The target's objects from the cache (a pair: decode, prefill), as ``manager._targets``."""
        if kind == "LeaderWorkerSetPair":
            pair = pair_of(self.lws.labelled(namespace, L.PD_PAIR, name), namespace, name)
            return [pair["decode"], pair["prefill"]]
        inf = self.ds if kind == "DisaggregatedSet" else self.lws
        obj = inf.get(namespace, name)
        if obj is None:
            plural = inf.res.plural
            raise NotFound(f'{plural}.{inf.res.group} "{name}" not found')
        return [obj]

    def rivals(self, policy: Obj) -> list[Obj]:
        """The other policies naming this policy's target, oldest first."""
        target, me = target_of(policy), policy_key(policy)
        if target is None:
            return []
        with self._lock:
            keys = sorted(self._by_target.get(target, set()) - {me})
        out = [p for k in keys if (p := self.policies.get(*k.split("/", 1))) is not None]
        return sorted(out, key=owner_order)

    def policy_keys(self) -> list[str]:
        return [policy_key(p) for p in self.policies.items()]

    # -- events -------------------------------------------------------------------------------------
    def _on_policy(self, etype: str, obj: Obj, _old: Obj | None) -> None:
        key, target = policy_key(obj), target_of(obj)
        with self._lock:
            before = self._target.pop(key, None)
            if before is not None:
                self._by_target[before].discard(key)
            if etype != "DELETED" and target is not None:
                self._target[key] = target
                self._by_target[target].add(key)
            related = set().union(*(self._by_target.get(t, set()) for t in (before, target) if t))
        for k in sorted({key} | related):
            self.enqueue(k)

    def _on_lws(self, _etype: str, obj: Obj, _old: Obj | None) -> None:
        ns, name = key_of(obj)
        labels = (obj.get("metadata") or {}).get("labels") or {}
        targets: list[Target] = [("LeaderWorkerSet", ns, name)]
        if labels.get(L.PD_PAIR):
            targets.append(("LeaderWorkerSetPair", ns, str(labels[L.PD_PAIR])))
        if labels.get(L.DS_NAME):
            targets.append(("DisaggregatedSet", ns, str(labels[L.DS_NAME])))
        self._enqueue_targets(targets)

    def _on_ds(self, _etype: str, obj: Obj, _old: Obj | None) -> None:
        ns, name = key_of(obj)
        self._enqueue_targets([("DisaggregatedSet", ns, name)])

    def _enqueue_targets(self, targets: list[Target]) -> None:
        with self._lock:
            keys = set().union(*(self._by_target.get(t, set()) for t in targets))
        for k in sorted(keys):
            self.enqueue(k)
