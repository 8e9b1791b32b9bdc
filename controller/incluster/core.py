"""The informer engine of the controller: caches, a work queue keyed by policy, a pool of workers.

Informers (``incluster/cache.py``) list each kind once and then watch it; every change enqueues the
keys of the policies it concerns, and ``worker_count`` threads reconcile one key at a time each
(``WorkQueue``: a key waits once, is never with two workers at once, and backs off per key after an
error). Nothing is polled: an idle controller sends no request beyond its open watches (and the
Lease renewals of leader election). A full resync (every key enqueued, read from the cache) runs
every ``resync_s`` as a safety net only. Rollouts waiting at a manual gate wait on cache events
(:meth:`InformerLoop.wait_target`), not on a GET and a new watch per second.

Leadership: a standby keeps its caches warm (so a takeover reconciles at once) but its workers drop
keys; on becoming leader every key is enqueued. ``healthy`` (``/healthz``) fails when a worker has
been inside one reconcile for ``stall_s`` or an informer thread has died.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Protocol

from lwsflow.controller.api.wire import Obj
from lwsflow.controller.errors import ApiError, InvalidInput
from lwsflow.controller.incluster.cache import Caches
from lwsflow.controller.incluster.leader import LeaderElector
from lwsflow.controller.incluster.metrics import Metrics
from lwsflow.controller.incluster.queue import WorkQueue
from lwsflow.controller.kube.client import Kube
from lwsflow.controller.kube.informer import Informer
from lwsflow.controller.kube.resources import DS, LWS, Resource

log = logging.getLogger("lwsflow.controller")


class Reconciler(Protocol):
    """What the loop needs of the controller (``manager.Controller``; a protocol, so that the manager
    imports this module and not the other way round)."""

    kube: Kube
    namespace: str | None
    leader: LeaderElector | None
    metrics: Metrics
    resync_s: float
    worker_count: int
    stall_s: float
    stop: threading.Event
    synced: bool
    cache: Caches | None

    def reconcile_key(self, key: str) -> None: ...


class InformerLoop:
    """Runs a :class:`Controller` on informers and a work queue (blocking :meth:`run`)."""

    def __init__(self, ctl: Reconciler) -> None:
        self.ctl = ctl
        self.queue = WorkQueue()
        self.caches = Caches(ctl.kube, ctl.namespace, self.queue.add, ctl.stop)
        ctl.cache = self.caches
        self._busy: dict[int, float] = {}  # worker index -> time.monotonic() its reconcile began
        self._threads: list[threading.Thread] = []
        self.reconciles = 0

    def run(self) -> None:
        ctl = self.ctl
        for inf in self.caches.all:
            t = threading.Thread(target=inf.run, name=f"informer-{inf.res.plural}", daemon=True)
            t.start()
            self._threads.append(t)
        while not ctl.stop.is_set() and not self.caches.synced():
            ctl.stop.wait(0.05)
        for i in range(max(1, ctl.worker_count)):
            t = threading.Thread(target=self._work, args=(i,), name=f"reconcile-{i}", daemon=True)
            t.start()
        leading = False
        next_resync = time.monotonic() + ctl.resync_s
        try:
            while not ctl.stop.is_set():
                now_leading = ctl.leader is None or ctl.leader.is_leader()
                ctl.metrics.leader.set(1 if now_leading else 0)
                if now_leading and (not leading or time.monotonic() >= next_resync):
                    self._enqueue_all()  # a new leader (or the safety-net resync) looks at everything
                    next_resync = time.monotonic() + ctl.resync_s
                leading = now_leading
                if not now_leading:
                    ctl.stop.wait(0.2)
                else:
                    ctl.stop.wait(min(1.0, max(0.01, next_resync - time.monotonic())))
        finally:
            self.queue.shutdown()

    def _enqueue_all(self) -> None:
        for key in self.caches.policy_keys():
            self.queue.add(key)
        self.ctl.synced = True

    def _work(self, i: int) -> None:
        ctl = self.ctl
        while not ctl.stop.is_set():
            key = self.queue.get(timeout_s=1.0)
            if key is None:
                continue
            self._busy[i] = time.monotonic()
            t0 = self._busy[i]
            try:
                if ctl.leader is not None and not ctl.leader.is_leader():
                    continue  # a standby: every key is enqueued again when it leads
                ctl.reconcile_key(key)
                self.reconciles += 1
                self.queue.forget(key)
            except (ApiError, InvalidInput) as exc:
                delay = self.queue.retry(key)  # per-key backoff; the message ends the line (grep-able)
                log.debug("reconcile %s: again in %.2fs", key, delay)
                log.warning("reconcile %s: %s", key, exc)
                ctl.metrics.reconcile_errors.inc()
            except Exception:  # a bug in one reconcile must not take the worker down
                log.exception("reconcile %s failed", key)
                ctl.metrics.reconcile_errors.inc()
                self.queue.retry(key)
            finally:
                self._busy.pop(i, None)
                self.queue.done(key)
                ctl.metrics.reconcile_latency.observe(time.monotonic() - t0)

    def healthy(self) -> bool:
        now = time.monotonic()
        stuck = any(now - since > self.ctl.stall_s for since in list(self._busy.values()))
        dead = any(not t.is_alive() for t in self._threads) and not self.ctl.stop.is_set()
        return not stuck and not dead

    def informer(self, res: Resource) -> Informer:
        return self.caches.ds if res == DS else self.caches.lws

    def follow(self, res: Resource, namespace: str, name: str, wall_budget: float,
               after: Obj | None) -> Iterator[Obj] | None:
        """A rollout's gate wait on the target, from the cache (``rollout/target.Follower``): woken by
        the informer's events, no watch of its own; None where the cache cannot serve it."""
        if res not in (LWS, DS):
            return None
        inf = self.informer(res)
        return inf.follow(namespace, name, wall_budget=wall_budget, after=after) if inf.follows(after) \
            else None

    def wait_target(self, res: Resource, namespace: str, name: str, pred: Callable[[Obj], bool],
                    stop: threading.Event) -> Obj | None:
        """Block until the cached ``res`` object satisfies ``pred`` (a driver at a manual gate)."""
        return self.informer(res).wait_until(namespace, name, pred, stop, timeout_s=60.0)
