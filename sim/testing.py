"""Test harness: an embedded cluster behind its HTTPS API, and a recorder of what its store saw.

Two public names, in the spirit of ``kopf.testing``::

    from lwsflow.sim.testing import EmbeddedCluster, StoreRecorder, written_by

    with EmbeddedCluster(tmp_path, speed=200) as sim:      # HTTPS on 127.0.0.1:0, realtime loop
        rec = StoreRecorder(sim.cluster, start=written_by("lwsflow-rollout"))
        kube = Kube.connect(str(sim.kubeconfig))             # written 0600 into tmp_path
        ...                                                  # drive the cluster over HTTP
        rec.entries(LWS_KEY, name="m")                       # the store's own history of "m"

``EmbeddedCluster`` is what ``lwsflow sim serve``, the local pipeline stack, the benchmarks and the
tests start; ``StoreRecorder`` is the ground truth they judge a client against: it subscribes to the
store (never to the API), so it cannot be fooled by what a client believes.
"""

from __future__ import annotations

import secrets
import threading
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lwsflow.sim.apiserver import ApiFaults, ApiServer
from lwsflow.sim.cluster import DEFAULT_SPEED, Cluster
from lwsflow.sim.config import ClusterConfig
from lwsflow.sim.store import DELETED, Event, Store

__all__ = ["EmbeddedCluster", "Recorded", "StoreRecorder", "written_by"]

PodKey = tuple[str, str]  # (namespace, name)


class EmbeddedCluster:
    """An embedded cluster served over HTTPS with a bearer token on 127.0.0.1, in real time.

    ``workdir``: the folder the kubeconfig is written into (mode 0600: it holds the token), as
    ``kubeconfig_name``. ``config``: a ``ClusterConfig``, a config YAML path, or None for the
    default cluster (for a catalog's node pools pass
    ``lwsflow.rehearsal.catalog_cluster.cluster_config_for``).
    ``speed``: virtual seconds per wall second. ``engines``: leader pods serve the stand-in OpenAI
    engine on their pod IPs (None: as the config's ``serve_engines`` says); ``engine_options`` go to
    each engine (e.g. ``side_channel_port=0``). ``token`` (default: a random one), ``port`` (0: any
    free one), ``faults`` (injected API errors) and ``now0`` (the virtual epoch at start; default
    the cluster's fixed epoch) are passed on; ``seed`` makes uids and generated names the same in
    every run.

    ``start()`` (or ``with``) serves; before it, ``cluster`` can be seeded and timers armed.
    ``close()`` stops the loop, the server and the engines, however far ``start`` got.
    """

    def __init__(
        self,
        workdir: str | Path,
        config: ClusterConfig | str | Path | None = None,
        *,
        speed: float = DEFAULT_SPEED,
        engines: bool | None = None,
        engine_options: Mapping[str, Any] | None = None,
        token: str | None = None,
        port: int = 0,
        faults: ApiFaults | None = None,
        now0: float | None = None,
        kubeconfig_name: str = "kubeconfig",
        seed: int | None = None,
    ) -> None:
        cfg = (ClusterConfig.default() if config is None else config if isinstance(config, ClusterConfig)
               else ClusterConfig.from_file(Path(config)))
        serve_engines = cfg.serve_engines if engines is None else engines
        # the harness owns the engine hook (options, close), so the cluster must not start its own
        cfg = cfg.model_copy(update={"serve_engines": False})
        self.cluster = Cluster(cfg, seed=seed) if now0 is None else Cluster(cfg, now0=now0, seed=seed)
        self.engines: Any = None  # lwsflow.sim.engine.EnginePodHook when engines are served
        if serve_engines:
            from lwsflow.sim.engine import EnginePodHook

            images = self.cluster.config.images  # behaviour profiles by digest (also learned at run time)
            self.engines = EnginePodHook(profile_of=images.get, clock=self.cluster.now,
                                         **dict(engine_options or {}))
            self.cluster.pod_hooks.append(self.engines)
        self.speed = speed
        self.token = token if token is not None else secrets.token_urlsafe(24)
        self.api = ApiServer(self.cluster.store, port=port, token=self.token, clock=self.cluster.now,
                             speed=speed, faults=faults)
        self.kubeconfig = Path(workdir) / kubeconfig_name
        self.url = ""

    @property
    def store(self) -> Store:
        return self.cluster.store

    def start(self) -> EmbeddedCluster:
        """Serve (raises ``OSError`` when the port is taken), write the kubeconfig, start the loop."""
        try:
            self.url = self.api.start()
            self.api.write_kubeconfig(self.kubeconfig)
            self.cluster.start_realtime(self.speed)
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> None:
        for stop in (self.cluster.close, self.api.stop, self.engines.close if self.engines else None):
            if stop is None:
                continue
            try:
                stop()
            except Exception:  # best effort: one failing stop must not leak the others
                continue

    def __enter__(self) -> EmbeddedCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass(frozen=True)
class Recorded:
    """One store change: where it sits in the recording, its resourceVersion, the cluster time it
    happened, and the object; ``pods``: every live pod right after it ((namespace, name) -> pod)."""

    index: int
    rv: int
    at: float
    type: str
    key: str
    object: dict
    pods: Mapping[PodKey, dict]

    @property
    def name(self) -> str:
        return str(self.object["metadata"]["name"])

    @property
    def namespace(self) -> str:
        return str(self.object["metadata"].get("namespace") or "")


def written_by(manager: str) -> Callable[[Event], bool]:
    """A ``start`` predicate: the first change to an object that ``manager`` has written (a field
    manager in ``metadata.managedFields``), e.g. a controller's first write."""

    def holds(ev: Event) -> bool:
        return any(m.get("manager") == manager
                   for m in (ev.object.get("metadata") or {}).get("managedFields") or ())
    return holds


class StoreRecorder:
    """Records a store's changes, from a chosen moment, with the live pods at each change.

    ``source``: a ``Cluster``/``EmbeddedCluster`` (changes are stamped with its virtual time) or a
    bare ``Store``. ``keys``: the resource keys to record (default: all; pods are always tracked
    for the ``pods`` snapshot). ``start``: recording begins with the first change for which it
    holds (default: at once), e.g. ``written_by("lwsflow-rollout")``. The subscriber runs under the
    store lock, so each change and its pods snapshot are consistent; reads take a copy.
    """

    def __init__(self, source: Cluster | EmbeddedCluster | Store, *, keys: Collection[str] | None = None,
                 start: Callable[[Event], bool] | None = None) -> None:
        cluster = source.cluster if isinstance(source, EmbeddedCluster) else source
        self._store: Store = cluster if isinstance(cluster, Store) else cluster.store
        self._now: Callable[[], float] = cluster.now if isinstance(cluster, Cluster) else self._store.now
        self._keys = frozenset(keys) if keys is not None else None
        self._start = start
        self.lock = threading.Lock()
        self._entries: list[Recorded] = []
        self._by_object: dict[tuple[str, str], list[Recorded]] = {}  # (key, name) -> changes
        self._pods: dict[PodKey, dict] = {}
        self._snapshot: Mapping[PodKey, dict] | None = None  # shared by changes until a pod changes
        self._stopped = False
        with self._store.lock:  # no change can slip between the initial pods and the subscription
            for pod in self._store.list("pods")[0]:
                self._pods[(pod["metadata"].get("namespace") or "", pod["metadata"]["name"])] = pod
            self._store.subscribe(self._on_event)

    @property
    def started(self) -> bool:
        """Whether the ``start`` moment has come (recording has begun)."""
        return self._start is None

    def stop(self) -> None:
        """Record nothing more (the store keeps the subscriber; it then returns at once)."""
        self._stopped = True

    def _on_event(self, ev: Event) -> None:
        if self._stopped:
            return
        with self.lock:
            if ev.key == "pods":
                meta = ev.object["metadata"]
                pk = (meta.get("namespace") or "", meta["name"])
                if ev.type == DELETED:
                    self._pods.pop(pk, None)
                else:
                    self._pods[pk] = ev.object
                self._snapshot = None
            if self._start is not None:
                if not self._start(ev):
                    return
                self._start = None
            if self._keys is not None and ev.key not in self._keys:
                return
            if self._snapshot is None:
                self._snapshot = dict(self._pods)
            rec = Recorded(len(self._entries), ev.rv, self._now(), ev.type, ev.key, ev.object,
                           self._snapshot)
            self._entries.append(rec)
            self._by_object.setdefault((ev.key, rec.name), []).append(rec)

    # -- reads -----------------------------------------------------------------------------------------
    def entries(self, key: str | None = None, name: str | None = None, namespace: str | None = None,
                since: int = 0) -> list[Recorded]:
        """Recorded changes in order, optionally of one kind / object, from position ``since`` on."""
        with self.lock:
            found = self._by_object.get((key, name), []) if key is not None and name is not None \
                else self._entries
            return [r for r in found if r.index >= since and (key is None or r.key == key)
                    and (name is None or r.name == name) and (namespace is None or r.namespace == namespace)]

    def changes(self, key: str, name: str, of: Callable[[dict], object], *, namespace: str | None = None,
                since: int = 0) -> list[Recorded]:
        """The changes of one object where ``of(object)`` differs from the change before, e.g. its
        partition; the first recorded change always counts."""
        out: list[Recorded] = []
        last: object = object()
        for r in self.entries(key, name, namespace, since):
            if r.type == DELETED:
                continue
            value = of(r.object)
            if not out or value != last:
                out.append(r)
                last = value
        return out

    def position(self) -> int:
        """The number of changes recorded so far: a ``since`` for "from now on"."""
        with self.lock:
            return len(self._entries)

    def last_position(self, key: str, name: str, namespace: str | None = None) -> int:
        """The position of the latest recorded change of one object (``position()`` when none): a
        ``since`` that starts a history at the object as it is now."""
        found = self.entries(key, name, namespace)
        return found[-1].index if found else self.position()

    def pods(self) -> dict[PodKey, dict]:
        """Every live pod now ((namespace, name) -> pod; do not mutate them)."""
        with self.lock:
            return dict(self._pods)
