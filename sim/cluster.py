"""The embedded cluster: one store, simulated nodes, and the controllers that bring it to life.

``Cluster`` wires the store (what the API server serves) to the behaviour: StatefulSet, LWS and DS
controllers, a gang scheduler and a kubelet, all reacting to store changes through one de-duplicated
work queue and a virtual clock. In-process use: ``advance(seconds)``, ``step()``,
``run_until(predicate, timeout_virtual)``. Served over HTTP: ``start_realtime(speed)`` runs the loop
in a background thread where virtual time advances at wall time x speed; ``advance`` from another thread
then skips virtual time ahead (a test's "nothing happens in N virtual seconds" without N/speed of wall).

Subscribers run under the store lock (possibly on the API server's thread), so ``_on_event`` only
indexes and enqueues; reconciles run on the loop thread, one object at a time under the store lock.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from lwsflow.controller.api import labels as L
from lwsflow.controller.errors import NotFound, OperationFailed
from lwsflow.sim import hpa, kinds
from lwsflow.sim.clock import FIXED_EPOCH, VirtualClock
from lwsflow.sim.config import ClusterConfig, ImageProfile, PoolConfig, image_digest
from lwsflow.sim.defaulting import Defaulter
from lwsflow.sim.defaulting.apps import MAX_UNAVAILABLE_GATE
from lwsflow.sim.ds_controller import DS, SCALER, DsController
from lwsflow.sim.kubelet import Kubelet
from lwsflow.sim.lws_controller import LWS, LwsController
from lwsflow.sim.namespaces import ensure_system_namespaces, populate
from lwsflow.sim.podutil import annotation, label, restart_count
from lwsflow.sim.scheduler import NodeInfo, Scheduler
from lwsflow.sim.statefulset import STS, StatefulSetController
from lwsflow.sim.store import DELETED, Event, Store, rfc3339

log = logging.getLogger(__name__)

DEFAULT_SPEED = 600.0  # a 10-minute model load takes about one second of wall time
_MAX_ROUNDS = 10_000
_EVENT_CACHE = 4096  # client-go EventCorrelator maxLruCacheEntries
_PRIORITY = {"ns": 0, "pod": 1, "sts": 2, "group": 3, "restart": 4, "lws": 5, "ds": 6, "hpa": 7}


class PodHook(Protocol):
    """Called outside the store lock when a pod gets its IP (running) and when it stops."""

    def on_running(self, pod: dict) -> None: ...
    def on_stopped(self, pod: dict) -> None: ...


class SimTimeout(OperationFailed):
    """``run_until`` reached its virtual deadline before the predicate held."""


class Cluster:
    """The embedded cluster: store, nodes, controllers and the virtual-time loop (see module doc)."""

    def __init__(self, config: ClusterConfig | None = None, *, now0: float = FIXED_EPOCH,
                 seed: int | None = None) -> None:
        self.config = config or ClusterConfig.default()
        self.clock = VirtualClock(now0)
        # seed: uids (and generated names) from a seeded generator, the same in every run
        self.store = Store(now=self.now, defaulter=Defaulter(self._gates), seed=seed)
        self.pod_hooks: list[PodHook] = []
        # Where the cluster learns what an image it has not seen does (its ImageProfile), asked once
        # per digest and remembered in config.images: e.g. the local stack reads the image's label
        # through the registry. Never a name pattern.
        self.image_sources: list[Callable[[str], ImageProfile | None]] = []
        self._asked_digests: set[str] = set()
        self.owned: dict[str, dict[str, dict[str, None]]] = {}  # owner uid -> key -> names
        self.gone_pods: dict[tuple[str, str], dict] = {}  # last state of deleted pods (for hooks)
        self.scheduler = Scheduler(self.config.scoring)
        self.kubelet = Kubelet(self)
        self.statefulsets = StatefulSetController(self)
        self.lws = LwsController(self)
        self.ds = DsController(self)
        self._pools = {p.name: p for p in self.config.pools}
        self._work: list[dict[tuple[str, str, str], None]] = [{} for _ in _PRIORITY]
        self._work_lock = threading.Lock()
        self._loop_lock = threading.RLock()
        self._wake = threading.Event()
        self._hook_calls: list[tuple[str, dict]] = []
        self._events = itertools.count(1)
        self._event_names: dict[tuple[str, ...], str] = {}  # event identity -> Event name (LRU)
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self.reconciles = 0
        self.loop_error: Exception | None = None  # set when the wall-clock loop died
        self._handlers: dict[str, Callable[[str, str], None]] = {
            "pod": self.kubelet.sync,
            "sts": self.statefulsets.reconcile,
            "lws": self.lws.reconcile,
            "group": self.lws.reconcile_group,
            "restart": self.lws.handle_restart,
            "ds": self.ds.reconcile,
            "ns": lambda _ns, name: populate(self.store, name),
            "hpa": lambda ns, name: hpa.reconcile(self, ns, name),
        }
        self._own_hooks: list[Any] = []
        if self.config.serve_engines:  # leader pods serve real HTTP through the stand-in engine
            from lwsflow.sim.engine import EnginePodHook

            self._own_hooks.append(EnginePodHook(profile_of=lambda d: self.config.images.get(d),
                                                 clock=self.now))
            self.pod_hooks.extend(self._own_hooks)
        self.store.subscribe(self._on_event)
        self._bootstrap()

    def learn_images(self, images: Iterable[str]) -> None:
        """Fill ``config.images`` for digests seen for the first time, from ``image_sources``."""
        for image in images:
            digest = image_digest(image)
            if not digest or digest in self.config.images or digest in self._asked_digests:
                continue
            for source in self.image_sources:
                try:
                    profile = source(image)
                except Exception:  # a source that cannot answer (registry down) is asked again later
                    break
                if profile is not None:
                    self.config.images[digest] = profile
                    break
            else:
                self._asked_digests.add(digest)

    def _gates(self) -> frozenset[str]:
        """The feature gates the API server runs with (only MaxUnavailableStatefulSet is modelled)."""
        return frozenset({MAX_UNAVAILABLE_GATE} if self.config.max_unavailable_statefulset else ())

    # -- time ------------------------------------------------------------------------------------------
    def now(self) -> float:
        return self.clock.now()

    def at(self, t: float, fn: Callable[[], None]) -> None:
        """Run ``fn`` at virtual epoch ``t`` (a scenario action or fault)."""
        self.clock.call_at(t, fn)

    # -- nodes -----------------------------------------------------------------------------------------
    def _bootstrap(self) -> None:
        ensure_system_namespaces(self.store)
        n = 0
        for pool in self.config.pools:
            per_domain = -(-pool.count // pool.topology_domains)
            for i in range(pool.count):
                n += 1
                self._add_node(pool, f"{pool.name}-{i:04d}", i // per_domain, n)

    def _add_node(self, pool: PoolConfig, name: str, domain: int, n: int) -> None:
        labels = {
            **pool.labels,
            "kubernetes.io/hostname": name,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            L.NODE_POOL: pool.name,
        }
        if pool.gpus_per_node:
            labels[L.GPU_PRODUCT] = pool.gpu_product or "NVIDIA-GPU"
            labels["nvidia.com/gpu.count"] = str(pool.gpus_per_node)
        if pool.topology_key:
            labels[pool.topology_key] = f"{pool.name}-block-{domain}"
        alloc = {"cpu": str(pool.cpu), "memory": f"{pool.memory_gi}Gi", "pods": "110"}
        if pool.gpus_per_node:
            alloc[L.GPU_RESOURCE] = str(pool.gpus_per_node)
        taints = [t.model_dump() for t in pool.taints]
        now = rfc3339(self.now())
        self.store.create(
            "nodes",
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": name, "labels": labels},
                "spec": {"taints": taints} if taints else {},
                "status": {
                    "capacity": dict(alloc),
                    "allocatable": dict(alloc),
                    "addresses": [
                        {"type": "InternalIP", "address": self._node_ip(n)},
                        {"type": "Hostname", "address": name},
                    ],
                    "conditions": [
                        {
                            "type": "Ready",
                            "status": "True",
                            "reason": "KubeletReady",
                            "lastHeartbeatTime": now,
                            "lastTransitionTime": now,
                        }
                    ],
                    "nodeInfo": {
                        "kubeletVersion": "v1.35.0-lwsflow-sim",
                        "architecture": "amd64",
                        "operatingSystem": "linux",
                        "containerRuntimeVersion": "sim://1",
                    },
                },
            },
        )
        self.scheduler.add_node(
            NodeInfo(
                name, pool.name, labels, taints, pool.gpus_per_node, pool.cpu * 1000, pool.memory_gi * 2**30
            )
        )

    @staticmethod
    def _node_ip(n: int) -> str:
        return f"127.0.{n // 254}.{n % 254 + 1}"

    def node_ip(self, node: str) -> str:
        obj = self.store.get_raw("nodes", "", node)
        for a in ((obj or {}).get("status") or {}).get("addresses") or ():
            if a.get("type") == "InternalIP":
                return a["address"]
        return ""

    def pool_of(self, node: str) -> PoolConfig | None:
        info = self.scheduler.nodes.get(node)
        return self._pools.get(info.pool) if info else None

    # -- routing store changes to work ----------------------------------------------------------------
    def enqueue(self, kind: str, ns: str, name: str) -> None:
        with self._work_lock:
            self._work[_PRIORITY[kind]][(kind, ns, name)] = None
        self._wake.set()

    def owned_names(self, owner_uid: str, key: str) -> list[str]:
        return list(self.owned.get(owner_uid, {}).get(key, ()))

    def _on_event(self, ev: Event) -> None:
        obj, key = ev.object, ev.key
        meta = obj.get("metadata", {})
        ns, name = meta.get("namespace", ""), meta.get("name", "")
        for ref in meta.get("ownerReferences") or ():
            names = self.owned.setdefault(ref.get("uid", ""), {}).setdefault(key, {})
            if ev.type == DELETED:
                names.pop(name, None)
            else:
                names[name] = None
        if ev.type == DELETED:
            self.owned.pop(meta.get("uid", ""), None)
        if key == "pods":
            self.enqueue("pod", ns, name)
            if ev.type == DELETED:
                self.gone_pods[(ns, name)] = obj
            for ref in meta.get("ownerReferences") or ():
                if ref.get("kind") == "StatefulSet":
                    self.enqueue("sts", ns, ref["name"])
            lws = label(obj, L.NAME)
            if lws:
                self.enqueue("lws", ns, lws)
                self._invalidate_group(ns, lws, obj)
                leader = (
                    name if label(obj, L.WORKER_INDEX) == "0" else annotation(obj, L.LEADER_NAME_ANNOTATION)
                )
                if leader:
                    self.enqueue("group", ns, leader)
                    phase = (obj.get("status") or {}).get("phase")
                    if (
                        ev.type == DELETED
                        or meta.get("deletionTimestamp")
                        or (phase in ("Running", "Pending") and restart_count(obj) > 0)
                    ):
                        self.lws.restart_triggers.setdefault((ns, leader), []).append(obj)
                        self.enqueue("restart", ns, leader)
        elif key == STS:
            self.enqueue("sts", ns, name)
            lws = label(obj, L.NAME)
            if lws:
                self.enqueue("lws", ns, lws)
                if any(r.get("kind") == "Pod" for r in meta.get("ownerReferences") or ()):
                    self._invalidate_group(ns, lws, obj)
                    self.enqueue("group", ns, name)
        elif key == LWS:
            self.enqueue("lws", ns, name)
            ds = label(obj, L.DS_NAME)
            if ds:
                self.enqueue("ds", ns, ds)
        elif key == DS:
            self.enqueue("ds", ns, name)
        elif key == kinds.NAMESPACE.key and ev.type != DELETED:
            self.enqueue("ns", "", name)
        elif key == "nodes" and ev.type != DELETED:
            info = self.scheduler.nodes.get(name)
            cordoned = bool((obj.get("spec") or {}).get("unschedulable"))
            if info is not None and info.cordoned != cordoned:
                self.scheduler.set_node_state(name, cordoned=cordoned)
                if not cordoned:
                    self.kubelet.retry_pending()
        elif key in ("secrets", "configmaps", "persistentvolumeclaims"):
            self.kubelet.config_changed(ns)
        elif key == kinds.SERVICE_ACCOUNT.key:
            self.statefulsets.retry_refused(ns)
        elif key == SCALER:
            ds = label(obj, L.DS_NAME)
            if ds:
                self.enqueue("ds", ns, ds)
        if key == kinds.HPA.key and ev.type != DELETED:
            self.enqueue("hpa", ns, name)
        elif kinds.BY_KEY[key].has_scale:  # an HPA's target changed (or appeared): its status follows
            for h in self.store.iter_raw(kinds.HPA.key):
                ref = (h.get("spec") or {}).get("scaleTargetRef") or {}
                if h["metadata"].get("namespace") == ns and ref.get("name") == name:
                    self.enqueue("hpa", ns, h["metadata"]["name"])
        if ev.type == DELETED and key in (kinds.SERVICE_ACCOUNT.key, kinds.CONFIGMAP.key):
            self.enqueue("ns", "", ns)  # their controllers put `default` and kube-root-ca.crt back

    def _invalidate_group(self, ns: str, lws: str, obj: dict) -> None:
        idx = label(obj, L.GROUP_INDEX)
        if idx.isdigit():
            self.lws.invalidate(ns, lws, int(idx))
        else:  # a leader before the webhook's labels: its ordinal is the group index
            tail = obj["metadata"]["name"].rsplit("-", 1)[-1]
            if tail.isdigit():
                self.lws.invalidate(ns, lws, int(tail))

    # -- helpers for controllers ----------------------------------------------------------------------
    def delete_object(self, key: str, ns: str, name: str, *, grace_period: int | None = None) -> None:
        """Delete with a cascade through the owner index; pods are deleted gracefully
        (``grace_period``: DeleteOptions.gracePeriodSeconds). The object goes (or turns Terminating)
        first, then its dependants, in the order the garbage collector's background deletion shows
        them (a group's leader pod Terminating before its workers), though in the same instant."""
        obj = self.store.get_raw(key, ns, name)
        if obj is None:
            return
        owned = self.owned.get(obj["metadata"]["uid"], {})
        dependants = [(ckey, list(names)) for ckey, names in owned.items()]
        with contextlib.suppress(NotFound):  # already gone through the store's own GC
            self.store.delete(key, ns, name, collect=False, grace_period=grace_period)
        for ckey, names in dependants:
            for cname in names:  # the garbage collector deletes dependants with their own period
                self.delete_object(ckey, ns, cname)

    def delete_pod(self, ns: str, name: str, *, grace_period: int | None = None) -> None:
        self.delete_object("pods", ns, name, grace_period=grace_period)

    def emit_event(
        self, obj: dict, reason: str, message: str, *, etype: str = "Normal",
        component: str = "leaderworkerset", related: dict | None = None,
    ) -> None:
        """Record an Event on ``obj``; a repeat of the same event (same object, reason, message, type
        and source) bumps ``count`` and ``lastTimestamp`` of the first, as client-go's EventCorrelator
        does, instead of adding another object. ``component``: the reporting controller's name
        (upstream LWS's recorder is "leaderworkerset"); ``related``: a second object the event is
        about (upstream LWS's events are on the LeaderWorkerSet, related to a pod or revision)."""
        meta = obj["metadata"]
        now = rfc3339(self.now())
        ns = meta.get("namespace") or "default"
        # the related object is part of an event's identity (client-go's events API keys on it)
        rel = (related or {}).get("metadata", {}).get("uid", "")
        key = (meta.get("uid", ""), meta["name"], reason, message, etype, component, rel)
        seen = self._event_names.pop(key, None)
        if seen is not None and self.store.get_raw("events", ns, seen) is not None:
            self._event_names[key] = seen  # most recently used last (LRU order)

            def bump(ev: dict) -> None:
                ev["count"] = int(ev.get("count") or 1) + 1
                ev["lastTimestamp"] = now

            self.store.mutate("events", ns, seen, bump)
            return
        name = f"{meta['name']}.{next(self._events):x}"
        self._event_names[key] = name
        if len(self._event_names) > _EVENT_CACHE:  # the correlator's LRU is bounded too (4096)
            self._event_names.pop(next(iter(self._event_names)))
        self.store.create(
            "events",
            {
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {"name": name, "namespace": ns},
                "involvedObject": _reference(obj),
                "reason": reason,
                "message": message,
                "type": etype,
                "count": 1,
                "firstTimestamp": now,
                "lastTimestamp": now,
                "eventTime": None,
                "source": {"component": component},
                "reportingComponent": component,
                "reportingInstance": f"{component}-sim",
                **({"related": _reference(related)} if related is not None else {}),
            },
        )

    def hook(self, method: str, pod: dict) -> None:
        self._hook_calls.append((method, pod))

    def _flush_hooks(self) -> None:
        while self._hook_calls:
            method, pod = self._hook_calls.pop(0)
            for h in list(self.pod_hooks):
                try:
                    getattr(h, method)(pod)
                except Exception:  # a broken hook (stand-in engine) must not stop the cluster
                    log.exception("pod hook %s.%s failed for %s", type(h).__name__, method,
                                  pod.get("metadata", {}).get("name"))

    # -- the loop --------------------------------------------------------------------------------------
    def _pop_work(self) -> tuple[str, str, str] | None:
        with self._work_lock:
            for level in self._work:
                if level:
                    key = next(iter(level))
                    del level[key]
                    return key
        return None

    def _drain(self) -> None:
        """Run queued reconciles, always from the lowest layer first (pods, then StatefulSets, then
        the group/pod controller, then LWS, then DS): an LWS reconcile sees a settled lower layer, as
        the real LWS controller does after its slower requeue, and its work is batched per object."""
        budget = _MAX_ROUNDS * 100
        if self._hook_calls:  # e.g. from a fault injected between loop runs
            self._flush_hooks()
        while (item := self._pop_work()) is not None:
            kind, ns, name = item
            with self.store.lock:
                self._handlers[kind](ns, name)
            self.reconciles += 1
            if self._hook_calls:
                self._flush_hooks()
            budget -= 1
            if budget <= 0:
                raise OperationFailed("embedded cluster did not settle (controllers keep requeueing)")

    def _fire_due(self) -> None:
        for fn in self.clock.pop_due():
            with self.store.lock:
                fn()
            if self._hook_calls:
                self._flush_hooks()

    def step(self) -> bool:
        """Settle controllers, then run the timers of the next due time. False when nothing is left."""
        with self._loop_lock:
            self._drain()
            due = self.clock.next_due()
            if due is None:
                return False
            self.clock.set(due)
            self._fire_due()
            self._drain()
            return True

    def advance(self, seconds: float) -> None:
        """Move virtual time forward by ``seconds``, running everything due on the way."""
        with self._loop_lock:
            target = self.now() + max(0.0, seconds)
            self._drain()
            while (due := self.clock.next_due()) is not None and due <= target:
                self.clock.set(due)
                self._fire_due()
                self._drain()
            self.clock.set(target)
            self._drain()

    def settle(self) -> None:
        """Run queued reconciles without moving time."""
        with self._loop_lock:
            self._drain()

    def run_until(self, predicate: Callable[[Cluster], Any], timeout_virtual: float = 3600.0) -> float:
        """Advance event by event until ``predicate(self)`` is truthy; returns the virtual time then.

        Raises SimTimeout when ``timeout_virtual`` virtual seconds pass first.
        """
        with self._loop_lock:
            deadline = self.now() + timeout_virtual
            self._drain()
            while not predicate(self):
                due = self.clock.next_due()
                if due is None or due > deadline:
                    self.clock.set(deadline)
                    self._drain()
                    if predicate(self):
                        break
                    raise SimTimeout(f"condition not reached within {timeout_virtual:g} virtual seconds")
                self.clock.set(due)
                self._fire_due()
                self._drain()
            return self.now()

    # -- wall-clock mode -------------------------------------------------------------------------------
    def start_realtime(self, speed: float = DEFAULT_SPEED) -> None:
        """Run the loop in a daemon thread: virtual time advances ``speed`` x wall time."""
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._realtime, args=(speed,), name="lwsflow-sim", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Stop the loop and the engines this cluster started itself (``serve_engines``)."""
        self.stop()
        for hook in self._own_hooks:
            hook.close()
        self._own_hooks.clear()

    def stop(self, timeout: float = 5.0) -> None:
        if self._thread is None:
            return
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout)
        self._thread = None

    def _realtime(self, speed: float) -> None:
        # by the wall time since the last pass, not since the start: an ``advance`` from another thread
        # (a test skipping virtual time) moves the clock on, and the loop carries on from there
        wall = time.monotonic()
        while not self._stop.is_set():
            now = time.monotonic()
            step, wall = (now - wall) * speed, now
            try:
                self.advance(step)
            except Exception as exc:  # keep serving the API; the error is kept for callers to see
                log.exception("embedded cluster loop failed; virtual time stopped")
                self.loop_error = exc
                return
            due = self.clock.next_due()
            wait = 0.05 if due is None else min(0.05, max(0.001, (due - self.now()) / speed))
            self._wake.wait(wait)
            self._wake.clear()

    # -- convenience reads -----------------------------------------------------------------------------
    def get(self, kind_key: str, name: str, namespace: str = "default") -> dict | None:
        ns = namespace if kinds.BY_KEY[kind_key].namespaced else ""
        return self.store.try_get(kind_key, ns, name)


def _reference(obj: dict) -> dict:
    """An Event's ObjectReference to ``obj``."""
    meta = obj["metadata"]
    return {
        "apiVersion": obj.get("apiVersion", "v1"),
        "kind": obj.get("kind", ""),
        "name": meta["name"],
        "namespace": meta.get("namespace") or "default",
        "uid": meta.get("uid", ""),
        "resourceVersion": meta.get("resourceVersion", ""),
    }
