"""The embedded cluster's object store: what the API server keeps, nothing of what controllers do.

Objects are plain dicts (the wire form), keyed by (resource key, namespace, name). The store owns
resourceVersion (one global counter), uid, creationTimestamp, generation (bumped when anything but
metadata and status changes), status-subresource separation, kube-apiserver's defaulting of core
kinds (``sim/defaulting``, on every write, so the controllers' objects get it too), graceful pod
deletion, owner-reference garbage collection and the watch history. Thread-safe: the HTTP server
and the simulation loop share one instance.

Subscribers (``subscribe``) are called synchronously, under the store lock, after each committed
change; they must only enqueue work, never block.
"""

from __future__ import annotations

import copy
import queue
import random
import re
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

from lwsflow.controller.errors import AlreadyExists, BadRequest, Conflict, Gone, NotFound
from lwsflow.sim import kinds
from lwsflow.sim.defaulting import Defaulter

ADDED, MODIFIED, DELETED = "ADDED", "MODIFIED", "DELETED"
_T = TypeVar("_T")
_NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # k8s.io/apimachinery/pkg/util/rand: no vowels, no 0/1/3
_RANDOM = random.SystemRandom()
_HISTORY = 20_000  # watch events kept for resuming; older resourceVersions answer 410 Gone


@dataclass(frozen=True)
class Event:
    type: str  # ADDED | MODIFIED | DELETED
    key: str  # resource key, e.g. "pods" or "leaderworkersets.leaderworkerset.x-k8s.io"
    object: dict  # a private deep copy; do not mutate
    rv: int


Subscriber = Callable[[Event], None]


def rfc3339(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class Watch:
    """A watch stream: iterate ``next(timeout)`` until it returns None (timeout) or ``stop()``."""

    def __init__(self, store: Store, key: str, namespace: str | None, selector: Selector) -> None:
        self._store, self.key, self.namespace, self.selector = store, key, namespace, selector
        self._q: queue.Queue[Event | None] = queue.Queue()
        self.closed = False

    def matches(self, ev: Event) -> bool:
        if ev.key != self.key:
            return False
        meta = ev.object.get("metadata", {})
        if self.namespace and meta.get("namespace") != self.namespace:
            return False
        return self.selector.matches(ev.object)

    def push(self, ev: Event | None) -> None:
        self._q.put(ev)

    def next(self, timeout: float | None = None) -> Event | None:
        try:
            return self._q.get(timeout=timeout)
        except queue.Empty:
            return None

    def stop(self) -> None:
        if not self.closed:
            self.closed = True
            self._store._unwatch(self)
            self._q.put(None)


class Store:
    def __init__(self, now: Callable[[], float] = time.time, *, history: int = _HISTORY,
                 defaulter: Defaulter | None = None, seed: int | None = None) -> None:
        self.now = now
        self.defaulter = defaulter or Defaulter()  # kube-apiserver's defaulting of core kinds
        self._lock = threading.RLock()
        self._rv = 0
        self._objects: dict[str, dict[tuple[str, str], dict]] = {t.key: {} for t in kinds.ALL}
        self._history: deque[Event] = deque(maxlen=history)  # small in tests that need 410 Gone
        self._watches: list[Watch] = []
        self._subscribers: list[Subscriber] = []
        # uids are random UUID4s as kube-apiserver makes them (never the same across clusters);
        # ``seed`` draws them, and generateName suffixes, from a seeded generator: a seeded run is
        # reproducible
        self._rng: random.Random = _RANDOM if seed is None else random.Random(seed)
        self._created: dict[str, int] = {}  # uid -> resourceVersion of its creation
        # owner uid -> (key, namespace, name) of the objects whose ownerReferences name it: the garbage
        # collector's graph, so a deletion does not scan every stored object (Events pile up)
        self._dependants: dict[str, dict[tuple[str, str, str], None]] = {}
        self._propagation: dict[str, str] = {}  # uid of a finalizer-held deletion -> its propagation

    # -- reads ---------------------------------------------------------------------------------------
    @property
    def lock(self) -> threading.RLock:
        return self._lock

    @property
    def resource_version(self) -> int:
        return self._rv

    def creation_order(self, uid: str) -> int:
        """When the object of ``uid`` was created, as a number that grows with each creation (its
        uid is random, so it cannot say); 0 for an object not (or no longer) stored."""
        return self._created.get(uid, 0)

    def get(self, key: str, namespace: str, name: str) -> dict:
        with self._lock:
            obj = self._bucket(key).get((namespace or "", name))
            if obj is None:
                raise _not_found(key, name)
            return clone(obj)

    def try_get(self, key: str, namespace: str, name: str) -> dict | None:
        with self._lock:
            obj = self._bucket(key).get((namespace or "", name))
            return clone(obj) if obj is not None else None

    def list(self, key: str, namespace: str | None = None, label_selector: str = "",
             field_selector: str = "") -> tuple[list[dict], int]:
        """Matching objects sorted by (namespace, name), and the store resourceVersion of the read."""
        sel = Selector.parse(label_selector, field_selector)
        with self._lock:
            items = [clone(o) for (ns, _), o in sorted(self._bucket(key).items())
                     if (not namespace or ns == namespace) and sel.matches(o)]
            return items, self._rv

    def get_raw(self, key: str, namespace: str, name: str) -> dict | None:
        """One live object without copying, or None (simulator hot paths; do not mutate it)."""
        return self._bucket(key).get((namespace or "", name))

    def iter_raw(self, key: str) -> Iterable[dict]:
        """Live objects without copying, for hot loops in the simulator (caller holds ``lock``)."""
        return self._bucket(key).values()

    # -- writes --------------------------------------------------------------------------------------
    def create(self, key: str, obj: dict) -> dict:
        with self._lock:
            obj = clone(obj)
            meta = obj.setdefault("metadata", {})
            rtype = kinds.BY_KEY[key]
            if not meta.get("name") and meta.get("generateName"):
                # as the API's SimpleNameGenerator: base cut to 58 characters, 5 random of its alphabet
                suffix = "".join(self._rng.choice(_NAME_ALPHABET) for _ in range(5))
                meta["name"] = meta["generateName"][:58] + suffix
            name = meta.get("name")
            if not name:
                raise BadRequest("metadata.name: Required value")
            ns = meta.get("namespace", "") if rtype.namespaced else ""
            if rtype.namespaced and not ns:
                ns = meta["namespace"] = "default"
            if not rtype.namespaced:
                meta.pop("namespace", None)
            bucket = self._bucket(key)
            if (ns, name) in bucket:
                raise AlreadyExists(f'{_plural(key)} "{name}" already exists',
                                    details={"name": name, "kind": _plural(key)})
            obj.setdefault("apiVersion", rtype.api_version)
            obj.setdefault("kind", rtype.kind)
            self.defaulter.default(key, obj, None)
            self.defaulter.admit_new(key, obj)
            meta["uid"] = str(uuid.UUID(int=self._rng.getrandbits(128), version=4))
            self._created[meta["uid"]] = self._rv + 1
            meta["creationTimestamp"] = rfc3339(self.now())
            meta["generation"] = 1
            meta.pop("deletionTimestamp", None)
            meta.pop("deletionGracePeriodSeconds", None)
            self._commit(key, bucket, (ns, name), obj, ADDED)
            return clone(obj)

    def replace(self, key: str, obj: dict, *, subresource: str = "",
                check_version: bool = True) -> dict:
        """PUT semantics. ``subresource="status"`` writes only status; otherwise status is kept.

        A stale ``metadata.resourceVersion`` raises Conflict (409); an empty one skips the check.
        """
        with self._lock:
            meta = obj.get("metadata", {})
            rtype = kinds.BY_KEY[key]
            ns = (meta.get("namespace") or "default") if rtype.namespaced else ""
            name = meta.get("name", "")
            bucket = self._bucket(key)
            old = bucket.get((ns, name))
            if old is None:
                raise _not_found(key, name)
            want_rv = meta.get("resourceVersion")
            if check_version and want_rv and str(want_rv) != old["metadata"]["resourceVersion"]:
                raise Conflict(f'Operation cannot be fulfilled on {_plural(key)} "{name}": the object '
                               "has been modified; please apply your changes to the latest version "
                               "and try again", details={"name": name, "kind": _plural(key)})
            if rtype.has_status:
                # one side gives status, the other the rest: copy each part from its source only
                # (the status kept in place below is replaced, so its copy would be thrown away)
                if subresource == "status":
                    rest, status = old, obj.get("status")
                    keep = status is not None
                else:
                    rest, status = obj, old.get("status")
                    keep = "status" in old
                # parts taken from the stored object are shared, not copied: stored objects are never
                # changed in place (a write replaces them), and the pods' status writes are the
                # simulator's hottest path. Metadata is always a copy (resourceVersion is set on it).
                stored = rest is old
                new = {k: v if k == "status" or (stored and k != "metadata") else clone(v)
                       for k, v in rest.items()}
                if keep:
                    new["status"] = status if status is old.get("status") else clone(status)
                else:
                    new.pop("status", None)
            else:
                new = clone(obj)
            if subresource != "status":
                self.defaulter.default(key, new, old)
            nmeta = new.setdefault("metadata", {})
            for k in ("uid", "creationTimestamp", "generation", "deletionTimestamp",
                      "deletionGracePeriodSeconds"):
                if k in old["metadata"]:
                    nmeta[k] = old["metadata"][k]
                else:
                    nmeta.pop(k, None)
            if rtype.namespaced:
                nmeta["namespace"] = ns
            new["apiVersion"], new["kind"] = old["apiVersion"], old["kind"]
            if subresource != "status" and _spec_part(new) != _spec_part(old):
                nmeta["generation"] = int(old["metadata"].get("generation", 1)) + 1
            nmeta["resourceVersion"] = old["metadata"]["resourceVersion"]
            if new == old:
                return clone(old)  # no-op writes do not bump resourceVersion (as the API server)
            if nmeta.get("deletionTimestamp") and not nmeta.get("finalizers") \
                    and not nmeta.get("deletionGracePeriodSeconds"):
                # the owner is gone now: its garbage collection runs
                orphan = self._propagation.pop(nmeta["uid"], "") == "Orphan"
                self._collect_dependants(nmeta["uid"], orphan=orphan)
                self._remove(key, bucket, (ns, name))
                return new
            self._commit(key, bucket, (ns, name), new, MODIFIED)
            return clone(new)

    def mutate(self, key: str, namespace: str, name: str, fn: Callable[[dict], None], *,
               subresource: str = "") -> dict:
        """Read-modify-write under the lock (no conflict possible): ``fn`` edits a copy in place."""
        with self._lock:
            obj = self.get(key, namespace, name)
            fn(obj)
            return self.replace(key, obj, subresource=subresource, check_version=False)

    def delete(self, key: str, namespace: str, name: str, *, propagation: str = "Background",
               resource_version: str | None = None, collect: bool = True,
               grace_period: int | None = None) -> dict:
        """Delete; owner-reference dependants go too (Background and Foreground alike, at once).

        A pod is deleted gracefully, as the pod registry does it: unless its grace period is 0 it
        only gets ``deletionTimestamp`` (now + the period) and ``deletionGracePeriodSeconds`` and
        stays, Terminating, until the kubelet deletes it with period 0 once its containers stopped.
        The period is ``grace_period`` (DeleteOptions.gracePeriodSeconds) or the pod's
        ``terminationGracePeriodSeconds``; 0 for a pod no node holds or that has finished. A second
        delete may only shorten it.

        Objects with finalizers only get ``deletionTimestamp`` until their finalizers are removed;
        their dependants stay until then, as the garbage collector keeps dependants of an owner that
        still exists (Foreground deletes them first). ``Orphan`` strips the owner's reference from
        its dependants, as the garbage collector does. ``collect=False``: the caller already dealt
        with the dependants (the simulator's own cascade), so none are looked for.
        """
        with self._lock:
            bucket = self._bucket(key)
            ns = namespace if kinds.BY_KEY[key].namespaced else ""
            old = bucket.get((ns or "", name))
            if old is None:
                raise _not_found(key, name)
            if resource_version and resource_version != old["metadata"]["resourceVersion"]:
                raise Conflict(f'{_plural(key)} "{name}": precondition failed: resourceVersion')
            uid = old["metadata"]["uid"]
            if key == kinds.POD.key:
                grace = _pod_grace(old, grace_period)
                if grace > 0:
                    return self._terminate(key, bucket, (ns or "", name), old, grace, propagation)
            if old["metadata"].get("finalizers"):
                # Background and Orphan: dependants stay while the owner still exists (terminating);
                # Foreground: they go first (at once here). The rest happens when it is removed.
                if propagation == "Foreground":
                    self._collect_dependants(uid)
                self._propagation.setdefault(uid, propagation)
                if not old["metadata"].get("deletionTimestamp") \
                        or old["metadata"].get("deletionGracePeriodSeconds"):
                    new = clone(old)
                    new["metadata"].setdefault("deletionTimestamp", rfc3339(self.now()))
                    if "deletionGracePeriodSeconds" in new["metadata"]:
                        new["metadata"]["deletionGracePeriodSeconds"] = 0
                    self._commit(key, bucket, (ns or "", name), new, MODIFIED)
                    return clone(new)
                return clone(old)
            if collect:
                self._collect_dependants(uid, orphan=propagation == "Orphan")
            return self._remove(key, bucket, (ns or "", name))

    def _terminate(self, key: str, bucket: dict, ident: tuple[str, str], old: dict, grace: int,
                   propagation: str) -> dict:
        """Graceful deletion: mark the object, or shorten the period of one already marked."""
        meta = old["metadata"]
        current = meta.get("deletionGracePeriodSeconds")
        self._propagation.setdefault(meta["uid"], propagation)
        if meta.get("deletionTimestamp") and current is not None and int(current) <= grace:
            return clone(old)
        new = clone(old)
        new["metadata"]["deletionTimestamp"] = rfc3339(self.now() + grace)
        new["metadata"]["deletionGracePeriodSeconds"] = grace
        self._commit(key, bucket, ident, new, MODIFIED)
        return clone(new)

    # -- watches and subscribers ---------------------------------------------------------------------
    def watch(self, key: str, namespace: str | None = None, *, since: str | int | None = None,
              label_selector: str = "", field_selector: str = "") -> Watch:
        """Open a watch. ``since`` replays events after that resourceVersion (Gone when too old);
        ``since`` None or "0" starts with synthetic ADDED events for the current objects."""
        sel = Selector.parse(label_selector, field_selector)
        with self._lock:
            w = Watch(self, key, namespace, sel)
            if since in (None, "", "0", 0):
                for o in self.list(key, namespace, label_selector, field_selector)[0]:
                    w.push(Event(ADDED, key, o, int(o["metadata"]["resourceVersion"])))
            else:
                rv = int(since)
                oldest = self._history[0].rv if self._history else self._rv + 1
                if rv < oldest - 1 and rv < self._rv:
                    raise Gone(f"too old resource version: {rv} ({oldest - 1})")
                for ev in self._history:
                    if ev.rv > rv and w.matches(ev):
                        w.push(ev)
            self._watches.append(w)
            return w

    def subscribe(self, fn: Subscriber) -> None:
        with self._lock:
            self._subscribers.append(fn)

    def _unwatch(self, w: Watch) -> None:
        with self._lock:
            if w in self._watches:
                self._watches.remove(w)

    # -- internals -----------------------------------------------------------------------------------
    def _bucket(self, key: str) -> dict[tuple[str, str], dict]:
        try:
            return self._objects[key]
        except KeyError:
            if key in kinds.BY_KEY:  # the kind of a CRD applied since the store was made
                return self._objects.setdefault(key, {})
            raise NotFound(f"the server could not find the requested resource ({key})") from None

    def _commit(self, key: str, bucket: dict, ident: tuple[str, str], obj: dict, etype: str) -> None:
        self._rv += 1
        obj["metadata"]["resourceVersion"] = str(self._rv)
        self._index_owners(key, ident, bucket.get(ident), obj)
        bucket[ident] = obj
        self._publish(Event(etype, key, clone(obj), self._rv))

    def _remove(self, key: str, bucket: dict, ident: tuple[str, str]) -> dict:
        obj = bucket.pop(ident)
        self._created.pop(obj["metadata"].get("uid", ""), None)
        self._index_owners(key, ident, obj, None)
        self._rv += 1
        obj["metadata"]["resourceVersion"] = str(self._rv)
        self._publish(Event(DELETED, key, clone(obj), self._rv))
        return clone(obj)

    def _publish(self, ev: Event) -> None:
        self._history.append(ev)
        for w in list(self._watches):
            if w.matches(ev):
                w.push(ev)
        for fn in list(self._subscribers):
            fn(ev)

    def _index_owners(self, key: str, ident: tuple[str, str], old: dict | None, new: dict | None) -> None:
        def owners(obj: dict | None) -> set[str]:
            refs = (obj or {}).get("metadata", {}).get("ownerReferences") or ()
            return {str(r.get("uid") or "") for r in refs if isinstance(r, dict)}

        before, after = owners(old), owners(new)
        for uid in before - after:
            deps = self._dependants.get(uid)
            if deps is not None:
                deps.pop((key, *ident), None)
                if not deps:
                    del self._dependants[uid]
        for uid in after - before:
            self._dependants.setdefault(uid, {})[(key, *ident)] = None

    def _collect_dependants(self, owner_uid: str, *, orphan: bool = False) -> None:
        """Delete the owner's dependants, or (``orphan``) drop its reference from them. A dependant
        that keeps another owner stays, as the garbage collector keeps it."""
        deps = list(self._dependants.get(owner_uid, ()))
        for key, bucket in self._objects.items():  # kind by kind, each in the order it got the owner
            for ident in [(ns, name) for k, ns, name in deps if k == key]:
                obj = bucket.get(ident)
                if obj is None:
                    continue
                refs = obj.get("metadata", {}).get("ownerReferences") or []
                if not any(r.get("uid") == owner_uid for r in refs) or ident not in bucket:
                    continue
                rest = [r for r in refs if r.get("uid") != owner_uid]
                if orphan or rest:
                    new = clone(obj)
                    if rest:
                        new["metadata"]["ownerReferences"] = rest
                    else:
                        del new["metadata"]["ownerReferences"]
                    self._commit(key, bucket, ident, new, MODIFIED)
                else:
                    self.delete(key, ident[0], ident[1])


def clone(obj: _T) -> _T:
    """Deep copy of a wire-format object (dicts, lists, scalars): several times faster than
    ``copy.deepcopy``, which dominates the simulator's write path; other types fall back to it."""
    t = type(obj)
    if t is dict:
        return {k: clone(v) for k, v in obj.items()}  # type: ignore[attr-defined, return-value]
    if t is list:
        return [clone(v) for v in obj]  # type: ignore[attr-defined, return-value]
    if t in (str, int, float, bool) or obj is None:
        return obj
    return copy.deepcopy(obj)


def _pod_grace(pod: dict, requested: int | None) -> int:
    """The grace period of a pod's deletion (pkg/registry/core/pod CheckGracefulDelete)."""
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    if not spec.get("nodeName") or status.get("phase") in ("Succeeded", "Failed"):
        return 0
    if requested is not None:
        return max(0, int(requested))
    period = spec.get("terminationGracePeriodSeconds")
    return 30 if period is None else max(0, int(period))


def _spec_part(obj: dict) -> dict:
    return {k: v for k, v in obj.items() if k not in ("metadata", "status")}


def _plural(key: str) -> str:
    return key.split(".", 1)[0] if "." in key else key


def _not_found(key: str, name: str) -> NotFound:
    return NotFound(f'{_plural(key)} "{name}" not found', details={"name": name, "kind": _plural(key)})


# -- selectors -----------------------------------------------------------------------------------------
_REQ = re.compile(r"^\s*(!?)([A-Za-z0-9_./-]+)\s*(?:(==|=|!=|\s+in\s+|\s+notin\s+)\s*(.*?))?\s*$")


@dataclass(frozen=True)
class Selector:
    """Label and field selector requirements (``a=b,c!=d,e in (x,y),f notin (z),g,!h``)."""

    labels: tuple[tuple[str, str, tuple[str, ...]], ...] = ()
    fields: tuple[tuple[str, str, tuple[str, ...]], ...] = ()

    @classmethod
    def parse(cls, label_selector: str = "", field_selector: str = "") -> Selector:
        return cls(_parse_reqs(label_selector), _parse_reqs(field_selector))

    def matches(self, obj: dict) -> bool:
        labels = obj.get("metadata", {}).get("labels") or {}
        for key, op, vals in self.labels:
            if not _match(op, key in labels, labels.get(key), vals):
                return False
        for key, op, vals in self.fields:
            value = dotted(obj, key)
            if value is None and key == "metadata.namespace":
                value = ""  # cluster-scoped objects have namespace "" to field selectors
            if not _match(op, value is not None, "" if value is None else str(value), vals):
                return False
        return True


def _split_top(s: str) -> list[str]:
    parts, depth, cur = [], 0, ""
    for ch in s:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    if cur.strip():
        parts.append(cur)
    return parts


def _parse_reqs(sel: str) -> tuple[tuple[str, str, tuple[str, ...]], ...]:
    out: list[tuple[str, str, tuple[str, ...]]] = []
    for part in _split_top(sel or ""):
        m = _REQ.match(part)
        if not m:
            raise BadRequest(f"unable to parse requirement: {part!r}")
        neg, key, op, val = m.groups()
        if neg:
            out.append((key, "!exists", ()))
        elif op is None:
            out.append((key, "exists", ()))
        else:
            op = op.strip()
            if op in ("in", "notin"):
                vals = tuple(v.strip() for v in val.strip().strip("()").split(",") if v.strip())
                out.append((key, op, vals))
            else:
                out.append((key, "!=" if op == "!=" else "=", (val.strip(),)))
    return tuple(out)


def _match(op: str, present: bool, value: str | None, vals: tuple[str, ...]) -> bool:
    if op == "exists":
        return present
    if op == "!exists":
        return not present
    if op == "=":
        return present and value == vals[0]
    if op == "!=":
        return not present or value != vals[0]
    if op == "in":
        return present and value in vals
    return not present or value not in vals  # notin


def dotted(obj: object, path: str) -> Any:
    """The value at a dotted path (``spec.selector.matchLabels``), or None where the path ends early."""
    cur = obj
    for part in path.split("."):
        if not isinstance(cur, dict):
            return None
        cur = cur.get(part)
    return cur
