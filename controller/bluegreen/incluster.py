"""What the in-cluster controller decides for a ``strategy: blue-green`` RolloutPolicy (GitOps).

Git syncs the new template onto the pair's two LWS in place, the overlay keeping each partition at
replicas, so no group moves. The pair's template then differs from its stable one (the
``last-good-template`` the controller adopted or a rollout recorded), and the controller runs the
blue-green executor with the live pair's templates as the green manifests, folding green back into
the Git-named pair at the end (``bluegreen/executor.py``). The progress lives on the HTTPRoute, so a
new leader resumes from it, and an ended blue-green of the same template is not started again unless
``rolloutpolicy.lwsflow.io/retry`` names its id (as for partition rollouts).

The executor's waits read from the controller's informers (:class:`CacheReads`), as a partition rollout's
gates do: the green and blue LWS from the LWS cache, the route (where ``kubectl lwsflow abort|pause``
leave their ask) from one informer of the namespace's HTTPRoutes, started with the first blue-green
(a controller that runs none sends no request for routes; overlays/rbac/bluegreen grants the watch).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Sequence

from lwsflow.controller.api.wire import Obj
from lwsflow.controller.bluegreen import plan as P
from lwsflow.controller.bluegreen.executor import route_of
from lwsflow.controller.errors import NotFound
from lwsflow.controller.incluster.cache import Caches
from lwsflow.controller.kube.client import Kube
from lwsflow.controller.kube.informer import Informer, start
from lwsflow.controller.kube.resources import DS, HTTP_ROUTE, LWS, Resource
from lwsflow.controller.policy import gates
from lwsflow.controller.policy.status import stable_hash
from lwsflow.controller.rollout import state
from lwsflow.controller.rollout.hooks import HookContext


def pair_hash(objs: Sequence[Obj]) -> str:
    """The hash of the pair's live templates (``objs``: decode, prefill): a blue-green's manifest hash."""
    return state.template_hash({r: state.template_of(o) for r, o in zip(P.ROLES, objs, strict=True)})


def route_state(kube: Kube, namespace: str, pair: str) -> tuple[Obj | None, P.BlueGreenState]:
    """The HTTPRoute naming ``pair`` as blue and its blue-green state (none: no Gateway API served)."""
    try:
        route = route_of(kube, namespace, pair)
    except NotFound:
        return None, P.BlueGreenState()
    return route, (P.BlueGreenState.from_route(route) if route is not None else P.BlueGreenState())


def decide(policy: Obj, objs: Sequence[Obj], st: P.BlueGreenState) -> bool | None:
    """Whether to drive now: None no; False drive (start or resume); True start again (retry)."""
    if st.active:
        return False if st.fold_back else None  # one `lwsflow rollout` started is the CLI's to drive
    if state.any_active(objs):
        return None  # a partition rollout of the pair (the CLI's) is in progress
    changed = any(state.template_hash(state.template_of(o)) != stable_hash(state.RolloutState.from_object(o))
                  for o in objs)
    if not changed:
        return None
    if st.phase and st.manifest_hash == pair_hash(objs):  # this template's blue-green already ended
        asked = (policy["metadata"].get("annotations") or {}).get(gates.RETRY)
        return True if asked and asked == st.id else None
    return False


def green_manifests(objs: Sequence[Obj], st: P.BlueGreenState) -> dict[str, Obj] | None:
    """The live pair as green's manifests; None when resuming a blue-green of another template (it goes
    on as persisted, with the green objects it already made)."""
    if st.active and st.manifest_hash != pair_hash(objs):
        return None
    return dict(zip(P.ROLES, objs, strict=True))


def rollout_id(kube: Kube, namespace: str, pair: str) -> Callable[[HookContext], str]:
    """The running blue-green's id, for the analysis record (read once from the route, then kept)."""
    seen: list[str] = []

    def rid(_ctx: HookContext) -> str:
        if not seen:
            _route, st = route_state(kube, namespace, pair)
            if st.id:
                seen.append(st.id)
        return seen[0] if seen else ""
    return rid


class CacheReads:
    """What a blue-green's waits read (``bluegreen/executor.Cached``): LWS and DS from the controller's
    caches, HTTPRoutes from an informer of its own (the base controller does not watch routes)."""

    def __init__(self, caches: Caches) -> None:
        self._caches = weakref.ref(caches)  # not kept alive by this entry of ``_reads`` (keyed by it)
        lws = caches.lws
        self.routes = Informer(lws.kube, HTTP_ROUTE, lws.namespace, lambda *_a: None, stop=lws.stop,
                               watch_s=lws.watch_s)
        start([self.routes])

    def cached(self, res: Resource, namespace: str, name: str) -> Obj | None:
        caches = self._caches()
        if caches is None:
            return None
        inf = {LWS: caches.lws, DS: caches.ds, HTTP_ROUTE: self.routes}.get(res)
        # not listed yet, or not served (a 403 without the watch granted): the executor asks the API
        if inf is None or not inf.follows(None):
            return None
        return inf.get(namespace, name)


_reads: weakref.WeakKeyDictionary[Caches, CacheReads] = weakref.WeakKeyDictionary()
_reads_lock = threading.Lock()


def cache_reads(caches: Caches | None) -> CacheReads | None:
    """The controller's :class:`CacheReads`, made (its route informer started) on the first blue-green;
    None without caches (the executor then GETs)."""
    if caches is None:
        return None
    with _reads_lock:
        reads = _reads.get(caches)
        if reads is None:
            reads = _reads[caches] = CacheReads(caches)
        return reads
