"""Back the embedded cluster's leader pods with real stand-in engines on their loopback pod IPs.

The embedded cluster (``sim/cluster.py``) calls ``on_running(pod)`` when a simulated pod
starts running and ``on_stopped(pod)`` when it goes. For a leader pod (worker index "0") this hook
starts a stand-in engine on ``podIP:port`` (the port the leader container's engine would serve on:
``lwsflow.controller.api.serving.serving_port``, from its ``--port`` flag or container ports; role
from the ``lwsflow.io/role`` label, else the DisaggregatedSet role label; model from
``lwsflow.io/served-model``), so
``lwsflow smoke`` against a simulated rollout makes real HTTP calls. Bad releases misbehave for real:
an image tag containing ``bad`` runs with ``status500``, and the pod annotation
``sim.lwsflow.io/engine-mode`` sets any failure modes (``faults`` spelling). A pod that declares llm-d's
routing sidecar (``serving.routing_sidecar_ports``: a decode pod rendered with ``llmd``) also gets the
stand-in sidecar (``sim/router/sidecar.py``) where the rendered one listens, fronting the engine.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from lwsflow.controller.api import labels
from lwsflow.controller.api.serving import routing_sidecar_ports, serving_port
from lwsflow.sim.config import ImageProfile, image_digest
from lwsflow.sim.engine.server import EngineHandle, start_engine
from lwsflow.sim.router.sidecar import RoutingSidecar

ENGINE_MODE_ANNOTATION = "sim.lwsflow.io/engine-mode"
SIDE_CHANNEL_PORT = 5600  # vLLM's VLLM_NIXL_SIDE_CHANNEL_PORT default
BAD_IMAGE_MODES = "status500"

log = logging.getLogger(__name__)


def _key(pod: dict) -> tuple[str, str]:
    meta = pod.get("metadata", {})
    return meta.get("namespace", ""), meta.get("name", "")


def engine_modes(pod: dict) -> str:
    """Failure modes for a pod: its annotation, plus ``status500`` when an image tag says ``bad``."""
    ann = pod.get("metadata", {}).get("annotations") or {}
    modes = [ann[ENGINE_MODE_ANNOTATION]] if ann.get(ENGINE_MODE_ANNOTATION) else []
    for c in pod.get("spec", {}).get("containers", []):
        tag = c.get("image", "").rsplit("/", 1)[-1].partition("@")[0].partition(":")[2]
        if "bad" in tag:
            modes.append(BAD_IMAGE_MODES)
            break
    return ",".join(modes)


class EnginePodHook:
    """Pod hook for the embedded cluster: one engine per running leader pod, stopped with the pod."""

    def __init__(self, profile_of: Callable[[str], ImageProfile | None] | None = None,
                 clock: Callable[[], float] | None = None, **engine_options: object) -> None:
        self._options = engine_options
        self._clock = clock  # the cluster's clock: a profile's slowdown counts cluster minutes
        self._profile_of = profile_of  # image digest -> ImageProfile (the cluster config's ``images``)
        self._lock = threading.Lock()
        self.engines: dict[tuple[str, str], EngineHandle] = {}
        # the pod UID each engine serves: a replaced pod keeps its name, and the new pod may start
        # running before the old one's stop is reported
        self._uids: dict[tuple[str, str], str] = {}
        self.sidecars: dict[tuple[str, str], RoutingSidecar] = {}  # pods with a rendered routing sidecar

    def on_running(self, pod: dict) -> None:
        meta = pod.get("metadata", {})
        lbl = meta.get("labels") or {}
        ann = meta.get("annotations") or {}
        if lbl.get(labels.WORKER_INDEX, "0") != "0":
            return  # workers hold shards; only the leader serves HTTP
        ip = pod.get("status", {}).get("podIP")
        if not ip:
            return
        key = _key(pod)
        uid = meta.get("uid", "")
        with self._lock:
            if key in self.engines:
                if self._uids.get(key) == uid:
                    return
                self.engines.pop(key).stop()  # the old pod of this name: its engine goes with it
                self._stop_sidecar(key)
            try:
                port = serving_port(pod.get("spec") or {}, ann)
                handle = start_engine(
                    host=ip, port=port, role=lbl.get(labels.ROLE) or lbl.get(labels.DS_ROLE) or "aggregated",
                    model=ann.get(labels.SERVED_MODEL) or lbl.get(labels.MODEL) or "stub-model",
                    clock=self._clock,
                    **{"modes": engine_modes(pod), "side_channel_port": SIDE_CHANNEL_PORT,
                       **self._options, **self._profile_options(pod)})
            except (OSError, ValueError) as exc:  # a pod that cannot serve: it will fail smoke, not crash
                log.warning("engine for pod %s/%s did not start: %s", *key, exc)
                return
            self.engines[key] = handle
            self._uids[key] = uid
            ports = routing_sidecar_ports(pod.get("spec") or {})
            if ports is not None:
                try:
                    self.sidecars[key] = RoutingSidecar(ip, ports[1], port=ports[0])
                except OSError as exc:  # the port is taken: the pod serves without its sidecar
                    log.warning("routing sidecar for pod %s/%s did not start: %s", *key, exc)

    def _stop_sidecar(self, key: tuple[str, str]) -> None:
        sc = self.sidecars.pop(key, None)
        if sc is not None:
            sc.stop()

    def _profile_options(self, pod: dict) -> dict[str, object]:
        """Engine options from the behaviour profile of the pod's first image with a known digest."""
        if self._profile_of is None:
            return {}
        for c in pod.get("spec", {}).get("containers", []):
            digest = image_digest(c.get("image", ""))
            profile = self._profile_of(digest) if digest else None
            if profile is not None:
                return dict(profile.engine_options())
        return {}

    def listening(self, pod: dict, port: int) -> bool | None:
        """Whether this pod's stand-in engine listens on ``port``; None when no engine backs the pod
        (the kubelet then cannot tell, and does not fail its probes)."""
        with self._lock:
            handle = self.engines.get(_key(pod))
            sc = self.sidecars.get(_key(pod))
        return None if handle is None else port in (handle.port, sc.port if sc else handle.port)

    def on_stopped(self, pod: dict) -> None:
        key = _key(pod)
        with self._lock:
            uid = (pod.get("metadata") or {}).get("uid", "")
            if key in self.engines and uid and self._uids.get(key) not in ("", uid):
                return  # a stop reported late for the pod this name had before
            handle = self.engines.pop(key, None)
            self._uids.pop(key, None)
            self._stop_sidecar(key)
        if handle is not None:
            handle.stop()

    def close(self) -> None:
        """Stop every engine (cluster shutdown)."""
        with self._lock:
            handles, self.engines = list(self.engines.values()), {}
            sidecars, self.sidecars = list(self.sidecars.values()), {}
        for h in handles:
            h.stop()
        for sc in sidecars:
            sc.stop()
