"""The dashboard's view of the cluster: one controller informer per kind, kept in memory.

Pages and live updates read this cache, never the API (as a controller reads its informers): a
1,000-policy overview is one pass over a dict, and a change reaches every open page through
:meth:`Cache.wait` within the watch's latency. Every request uses the user's own kubeconfig, so a kind
the user may not list (a 403 on nodes, say) stays empty and its error is shown, not hidden.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from lwsflow.controller.api.wire import Obj
from lwsflow.controller.errors import ApiError
from lwsflow.controller.kube.informer import Informer, Key, OnError, OnEvent, key_of
from lwsflow.controller.kube.resources import (
    DS,
    EVENT,
    HTTP_ROUTE,
    LWS,
    NODE,
    POD,
    ROLLOUT_POLICY,
    STATEFULSET,
    Resource,
)

KINDS: tuple[Resource, ...] = (ROLLOUT_POLICY, LWS, DS, STATEFULSET, POD, EVENT, HTTP_ROUTE, NODE)
WEIGHT_HISTORY = 200  # blue-green weight changes kept per policy
WATCH_S = 30  # one watch request's length: a stopped dashboard's threads end within it


@dataclass
class Cache:
    """Objects by kind (``plural``) and (namespace, name), fed by one informer thread per kind."""

    namespace: str | None  # None: every namespace
    objects: dict[str, dict[Key, Obj]] = field(default_factory=lambda: {r.plural: {} for r in KINDS})
    errors: dict[str, str] = field(default_factory=dict)  # plural -> the last API error, e.g. 403
    synced: set[str] = field(default_factory=set)  # kinds listed (or refused) at least once
    # (ns, policy) -> [(wall time, blue weight, green weight)]: a blue-green's HTTPRoute over time
    weights: dict[Key, list[tuple[float, int, int]]] = field(default_factory=dict)
    version: int = 0
    _cond: threading.Condition = field(default_factory=threading.Condition)
    _stop: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)

    # -- feeding ---------------------------------------------------------------------------------------
    def start(self, connect: Callable[[], Any], kinds: tuple[Resource, ...] = KINDS) -> Cache:
        """One controller :class:`Informer` per kind (list, watch from its resourceVersion, relist on
        410 with the differences as events), each on its own thread with its own client from
        ``connect()`` (a watch holds its connection for minutes; separate clients keep them from
        queueing on one pool). Its events keep :attr:`objects` (all kinds under one lock and one
        :attr:`version`, which the live pages wait on) up to date."""
        for res in kinds:  # the policies first: the overview waits only for them
            ns = None if not res.namespaced else self.namespace
            inf = Informer(connect(), res, ns, self._eventer(res), stop=self._stop,
                           watch_s=WATCH_S, on_error=self._errorer(res))
            t = threading.Thread(target=inf.run, name=f"dashboard-watch-{res.plural}", daemon=True)
            t.start()
            self._threads.append(t)
        return self

    def stop(self) -> None:
        self._stop.set()
        with self._cond:
            self._cond.notify_all()

    def _changed(self) -> None:
        self.version += 1
        self._cond.notify_all()

    def _eventer(self, res: Resource) -> OnEvent:
        def on_event(etype: str, obj: Obj, _old: Obj | None) -> None:
            with self._cond:
                self._apply(res, etype, obj)
                self._changed()
        return on_event

    def _apply(self, res: Resource, etype: str, obj: Obj) -> None:
        if etype == "DELETED":
            self.objects[res.plural].pop(key_of(obj), None)
        else:
            self.objects[res.plural][key_of(obj)] = obj
            if res is ROLLOUT_POLICY:
                self._note_weights(obj)

    def _errorer(self, res: Resource) -> OnError:
        def on_error(exc: ApiError | None) -> None:  # None: listed (the first time: synced)
            with self._cond:
                if exc is None:
                    self.errors.pop(res.plural, None)
                else:
                    self.errors[res.plural] = str(exc)[:300]  # "403 Forbidden: ..."
                self.synced.add(res.plural)
                self._changed()
        return on_error

    def _note_weights(self, policy: Obj) -> None:
        bg = (policy.get("status") or {}).get("blueGreen")
        if not isinstance(bg, dict):
            return
        hist = self.weights.setdefault(key_of(policy), [])
        point = (time.time(), int(bg.get("blueWeight") or 0), int(bg.get("greenWeight") or 0))
        if not hist or hist[-1][1:] != point[1:]:
            hist.append(point)
            del hist[:-WEIGHT_HISTORY]

    # -- reading ---------------------------------------------------------------------------------------
    def wait(self, seen: int, timeout: float) -> int:
        """Block until the version moves past ``seen`` (or ``timeout``, or stop); the version now."""
        with self._cond:
            self._cond.wait_for(lambda: self.version != seen or self._stop.is_set(), timeout)
            return self.version

    def wait_synced(self, plural: str, timeout: float) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: plural in self.synced, timeout)

    def items(self, plural: str, namespace: str | None = None) -> list[Obj]:
        """A copy of the list (the dict changes under the watch threads)."""
        with self._cond:
            objs = list(self.objects[plural].values())
        return objs if namespace is None else [o for o in objs if key_of(o)[0] == namespace]

    def get(self, plural: str, namespace: str, name: str) -> Obj | None:
        with self._cond:
            return self.objects[plural].get((namespace, name))

    def seed(self, plural: str, items: list[Obj]) -> None:
        """Fill a kind without a watch (tests of the views, the bench's render-only figure)."""
        res = next(r for r in KINDS if r.plural == plural)
        with self._cond:
            self.objects[plural] = {}
            for o in items:
                self._apply(res, "ADDED", o)
            self.synced.add(plural)
            self._changed()
