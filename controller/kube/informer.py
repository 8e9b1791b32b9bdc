"""An informer: one list-then-watch of one kind feeding a local cache, with change handlers.

The controller reads its objects from these caches instead of the API: one LIST at the start (and
after a ``410 Gone``), then one long watch resumed from the last resourceVersion seen (bookmarks
keep it fresh while nothing changes), so an idle controller costs the API server only its open
watches. Every change calls ``on_event(type, obj, old)``: the controller maps it to the policy keys
of its work queue (``incluster/queue.py``). A relist emits the differences as events (``ADDED`` /
``MODIFIED`` / ``DELETED``), so a change made while the watch was down is not lost. An optional
``on_error`` hears why a kind reads as empty (403: not ours to list; 404: not served) and ``None``
after each successful list: the dashboard (``dashboard/cache.py``) shows the first.

Why hand-written rather than kopf or kr8s: both are asyncio frameworks with their own event loop,
handler registry and (kopf) their own finalizers and status fields; the rollout engine is
synchronous, runs on the injected (virtual) cluster clock, and the controller needs only the cache
and the events. The official client's ``Watch`` does the stream decoding (``kube/watch.py``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator

import urllib3

from lwsflow.controller.api.wire import Obj
from lwsflow.controller.errors import ApiError, Forbidden, Gone, NotFound
from lwsflow.controller.kube.client import Kube
from lwsflow.controller.kube.resources import Resource
from lwsflow.controller.kube.watch import stream

log = logging.getLogger("lwsflow.kube.informer")

Key = tuple[str, str]  # (namespace, name)
OnEvent = Callable[[str, Obj, Obj | None], None]  # (ADDED|MODIFIED|DELETED, object, previous)
OnError = Callable[[ApiError | None], None]  # a 403/404 that empties the kind; None: listed again


def key_of(obj: Obj) -> Key:
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


def _rv(obj: Obj | None) -> int:
    """A resourceVersion as a number, for "is this copy newer" (-1 when not a number: opaque)."""
    raw = str(((obj or {}).get("metadata") or {}).get("resourceVersion") or "")
    return int(raw) if raw.isdigit() else -1


class Informer:
    """The cache of one kind in one namespace (None: all), kept by a thread running :meth:`run`."""

    def __init__(self, kube: Kube, res: Resource, namespace: str | None, on_event: OnEvent, *,
                 stop: threading.Event, watch_s: int = 300, on_error: OnError | None = None) -> None:
        self.kube, self.res, self.namespace, self.on_event = kube, res, namespace, on_event
        self.on_error = on_error
        self.stop, self.watch_s = stop, watch_s
        self._cache: dict[Key, Obj] = {}
        self._lock = threading.RLock()
        self._cond = threading.Condition(self._lock)
        # waiters per object (a manual gate, a rollout's readiness gate): an event wakes only those
        # following that object, not every waiting rollout; they share the cache's lock. The entry
        # lives while someone waits (with their count), so keys of long-gone objects do not pile up
        self._waiting: dict[Key, tuple[threading.Condition, int]] = {}
        self.synced = threading.Event()  # the first list is in (or the kind is not served)
        self.served = True
        self.relists = 0
        self.rv = ""

    # -- reads ---------------------------------------------------------------------------------------
    def get(self, namespace: str, name: str) -> Obj | None:
        with self._cond:
            return self._cache.get((namespace, name))

    def items(self) -> list[Obj]:
        with self._cond:
            return list(self._cache.values())

    def labelled(self, namespace: str, label: str, value: str) -> list[Obj]:
        with self._cond:
            return [o for (ns, _), o in self._cache.items()
                    if ns == namespace and ((o["metadata"].get("labels") or {}).get(label) == value)]

    def wait_until(self, namespace: str, name: str, pred: Callable[[Obj], bool],
                   stop: threading.Event, timeout_s: float = 60.0) -> Obj | None:
        """Block until the cached object satisfies ``pred`` (returned), is deleted (None), ``stop`` is
        set or ``timeout_s`` wall seconds pass (the last copy returned): woken by cache events, no
        request of its own."""
        end = time.monotonic() + timeout_s
        key = (namespace, name)
        with self._cond:
            while True:
                obj = self._cache.get(key)
                if obj is None or pred(obj) or stop.is_set() or self.stop.is_set():
                    return obj
                left = end - time.monotonic()
                if left <= 0:
                    return obj
                self._wait(key, min(left, 1.0))  # 1 s: notice ``stop`` (set without notifying us)

    def follows(self, after: Obj | None) -> bool:
        """Whether :meth:`follow` can serve a rollout that last saw ``after``: listed, served, and
        resourceVersions that compare as numbers (etcd's revisions; opaque otherwise, so "older than
        our write" could not be told and the caller watches the API instead)."""
        return self.synced.is_set() and self.served and (after is None or _rv(after) >= 0)

    def follow(self, namespace: str, name: str, *, wall_budget: float,
               after: Obj | None = None) -> Iterator[Obj]:
        """``kube/watch.follow`` served from this cache, without a request: the object now and after
        each change, for at most ``wall_budget`` wall seconds; NotFound once it is gone.

        ``after``: the copy the caller last read or wrote through the API. Cached copies older than it
        are skipped until the watch delivers it, so a gate is never judged on what the caller's own
        write replaced (read-your-writes)."""
        end = time.monotonic() + wall_budget
        key, floor, last = (namespace, name), _rv(after), -2
        while True:
            with self._cond:
                while True:
                    obj = self._cache.get(key)
                    if obj is None:
                        raise NotFound(f"{self.res.plural} {namespace}/{name} was deleted")
                    rv = _rv(obj)
                    if rv >= floor and rv != last:
                        break
                    left = end - time.monotonic()
                    if left <= 0 or self.stop.is_set():
                        return
                    self._wait(key, min(left, 1.0))
            last = rv
            yield obj
            if time.monotonic() >= end:
                return

    def _wait(self, key: Key, timeout_s: float) -> None:
        """Wait (holding the cache lock) until ``key`` changes or ``timeout_s`` passes."""
        cond, n = self._waiting.get(key) or (threading.Condition(self._lock), 0)
        self._waiting[key] = (cond, n + 1)
        try:
            cond.wait(timeout_s)
        finally:  # the lock is held again here: the count cannot change under us
            cond, n = self._waiting[key]
            if n > 1:
                self._waiting[key] = (cond, n - 1)
            else:
                del self._waiting[key]

    def _changed(self, key: Key) -> None:
        """Wake whoever waits on ``key`` (the cache lock held)."""
        waiting = self._waiting.get(key)
        if waiting is not None:
            waiting[0].notify_all()

    def store(self, obj: Obj) -> None:
        """Put a copy this process just wrote (the API's answer) into the cache when it is newer than
        the cached one, so a reconcile right after our own write does not act on what it replaced."""
        key = key_of(obj)
        with self._cond:
            old = self._cache.get(key)
            if old is not None and _rv(obj) > _rv(old) >= 0:
                self._cache[key] = obj
                self._changed(key)

    # -- the list-then-watch loop -------------------------------------------------------------------
    def run(self) -> None:
        """List, then watch from the list's resourceVersion until ``stop``; relist on 410 Gone;
        resume from the last resourceVersion after a cut stream; back off on errors."""
        pause = 1.0
        while not self.stop.is_set():
            try:
                if not self.rv:
                    self._relist()
                    pause = 1.0
                self._watch()
            except Gone:
                log.info("watch %s: 410 Gone at rv %s; relisting", self.res.plural, self.rv)
                self.rv = ""
            except (NotFound, Forbidden) as exc:  # a kind not served (no DS CRD) or not ours to read:
                if self.served:  # empty, so the controller still works on the rest; look again later
                    level = logging.WARNING if isinstance(exc, Forbidden) else logging.INFO
                    log.log(level, "%s: %s; treated as empty", self.res.plural, exc)
                self.served = False
                self.synced.set()
                if self.on_error is not None:
                    self.on_error(exc)
                self.rv = ""
                self.stop.wait(pause)
                pause = min(300.0, pause * 2)
            except (ApiError, urllib3.exceptions.HTTPError, OSError) as exc:
                log.info("watch %s: %s; retrying in %.0fs", self.res.plural, exc, pause)
                self.stop.wait(pause)  # resumes from self.rv; a 410 then relists
                pause = min(30.0, pause * 2)

    def _relist(self) -> None:
        items, rv = self.kube.list(self.res, self.namespace)
        self.relists += 1
        fresh = {key_of(o): o for o in items}
        with self._cond:
            old, self._cache = self._cache, fresh
            for cond, _ in self._waiting.values():
                cond.notify_all()
        self.rv, self.served = rv, True
        for key, obj in fresh.items():
            before = old.get(key)
            if before is None or _rv(before) != _rv(obj):
                self._emit("ADDED" if before is None else "MODIFIED", obj, before)
        for key, obj in old.items():
            if key not in fresh:
                self._emit("DELETED", obj, obj)
        self.synced.set()
        if self.on_error is not None:
            self.on_error(None)

    def _watch(self) -> None:
        for ev in stream(self.kube, self.res, self.namespace, resource_version=self.rv,
                          timeout_s=self.watch_s):
            etype = str(ev.get("type") or "")
            obj = ev.get("raw_object") or ev.get("object")
            if not isinstance(obj, dict):
                continue
            self.rv = str((obj.get("metadata") or {}).get("resourceVersion") or self.rv)
            if etype == "BOOKMARK":
                continue
            key = key_of(obj)
            with self._cond:
                old = self._cache.get(key)
                if etype == "DELETED":
                    self._cache.pop(key, None)
                elif old is None or _rv(obj) >= _rv(old) or _rv(obj) < 0:
                    self._cache[key] = obj
                self._changed(key)
            self._emit(etype, obj, old)
            if self.stop.is_set():
                return

    def _emit(self, etype: str, obj: Obj, old: Obj | None) -> None:
        try:
            self.on_event(etype, obj, old)
        except Exception:  # a handler's bug must not stop the watch (the cache would go stale)
            log.exception("%s event handler failed", self.res.plural)


def start(informers: list[Informer]) -> None:
    """Run each informer on its own daemon thread."""
    for inf in informers:
        threading.Thread(target=inf.run, name=f"informer-{inf.res.plural}", daemon=True).start()
