"""Pod lifecycle in virtual time: binding, image pull, container start, model load, restarts.

Pending -> scheduled (gang placement via ``Scheduler``) -> volumes mounted (a missing Secret,
ConfigMap or claim waits, ``podconfig``) -> image pull (size / pool bandwidth; images are cached per
node) -> container configuration (a missing env Secret/ConfigMap: CreateContainerConfigError) ->
container started (phase Running, a loopback pod IP, ``pod_hooks.on_running``)
-> model load (weights / storage bandwidth, a group's shard per pod) -> Ready. Release failures come
from image profiles by digest (``ClusterConfig.images``), config patterns or pod annotations:
``sim.lwsflow.io/image-pull-fails`` (ErrImagePull forever),
``sim.lwsflow.io/never-ready`` (Running, never Ready); ``sim.lwsflow.io/load-seconds`` overrides
the load time of one pod template.
"""

from __future__ import annotations

import random
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from lwsflow.controller.api import labels as L
from lwsflow.controller.api.serving import resolve_port
from lwsflow.controller.errors import NotFound
from lwsflow.sim import podconfig
from lwsflow.sim.clock import _Timer
from lwsflow.sim.podutil import annotation, is_terminating, label
from lwsflow.sim.schedule_diagnosis import fit_error
from lwsflow.sim.scheduler import PodNeeds
from lwsflow.sim.store import rfc3339

_POD_ADDRESSES = 254 * 254  # 127.<pod_network>.0.1 … 127.<pod_network>.253.254

if TYPE_CHECKING:
    from lwsflow.sim.cluster import Cluster

NEVER_READY = "sim.lwsflow.io/never-ready"
PULL_FAILS = "sim.lwsflow.io/image-pull-fails"
CRASHES = "sim.lwsflow.io/crash-loop"
LOAD_SECONDS = "sim.lwsflow.io/load-seconds"
Key = tuple[str, str]


@dataclass
class PodRun:
    """A pod bound to a node: its resources, pending lifecycle timer and pod IP."""

    uid: str
    node: str
    needs: PodNeeds
    group_key: str
    timer: _Timer | None = None
    ip: str | None = None
    started: bool = False


@dataclass
class Reservation:
    """Nodes held for a group's workers until their pods exist (gang placement)."""

    leader_uid: str
    slots: dict[int, tuple[str, PodNeeds]] = field(default_factory=dict)
    group_key: str = ""


class Kubelet:
    """Binds pending pods (gang placement) and plays each pod's lifecycle on its node."""

    def __init__(self, cluster: Cluster) -> None:
        self.c = cluster
        self.runs: dict[Key, PodRun] = {}
        self.by_node: dict[str, dict[Key, None]] = {}
        self.reservations: dict[Key, Reservation] = {}
        self.unschedulable: dict[Key, None] = {}
        self.image_cache: dict[str, set[str]] = {}
        self._reported: set[str] = set()
        # pods waiting for a Secret/ConfigMap: key -> (run, stage "mount" | "config", images, dirty)
        self.blocked: dict[Key, tuple[PodRun, str, list[str], bool]] = {}
        self._warned: dict[str, set[str]] = {}  # pod uid -> warning messages already sent (one each)
        self._own_writes: dict[Key, str] = {}  # pod -> uid of our latest PodScheduled=False write
        self._stopping: dict[Key, tuple[str, float]] = {}  # terminating pod -> (uid, when it is deleted)
        # addresses are handed out in turn through the /16 and a freed one is reused only once the range
        # is used up, oldest first, as the host-local IPAM does: a replaced pod's address does not come
        # back at once on its replacement (clients holding the old address see it gone, not a new pod)
        self._free_ips: deque[int] = deque()
        self._next_ip = 1
        net = cluster.config.pod_network
        self.pod_network = net if net is not None else random.SystemRandom().randrange(2, 255)

    # -- entry point: a pod changed or went away -------------------------------------------------------
    def sync(self, ns: str, name: str) -> None:
        pod = self.c.store.get_raw("pods", ns, name)
        run = self.runs.get((ns, name))
        if run is not None and (pod is None or pod["metadata"]["uid"] != run.uid):
            self._stop(ns, name, run)
        res = self.reservations.get((ns, name))
        if res is not None and (pod is None or pod["metadata"]["uid"] != res.leader_uid):
            self._release_reservation((ns, name))  # the group's leader went: its holds go too
        if pod is None:
            self._stopping.pop((ns, name), None)
            self.unschedulable.pop((ns, name), None)
            self._own_writes.pop((ns, name), None)
            self.c.gone_pods.pop((ns, name), None)
            return
        if is_terminating(pod):
            self._terminating(pod)
            return
        blocked = self.blocked.get((ns, name))
        if blocked is not None and blocked[3]:  # a Secret or ConfigMap changed: the kubelet retries
            self._resume((ns, name))
            return
        if (ns, name) in self.runs:
            return
        node = (pod.get("spec") or {}).get("nodeName")
        if node:
            self._start(pod, node, PodNeeds.of(pod["spec"]), allocate=True)
        else:
            # after our own PodScheduled write, try again (a retry may have coalesced with it) but
            # record no second FailedScheduling for what is the same attempt
            own = self._own_writes.pop((ns, name), None) == pod["metadata"]["uid"]
            self._schedule(pod, record=not own)

    def _terminating(self, pod: dict) -> None:
        """A pod being deleted gracefully: its containers get SIGTERM and stop after
        ``container_stop_s`` (the grace period at most; at once when none runs), then the kubelet
        deletes the pod with period 0. A shortened period brings that forward."""
        meta = pod["metadata"]
        key, uid = (meta["namespace"], meta["name"]), meta["uid"]
        grace = float(meta.get("deletionGracePeriodSeconds") or 0)
        run = self.runs.get(key)
        delay = min(grace, self.c.config.timings.container_stop_s) if run is not None else 0.0
        due = self.c.now() + delay
        if self._stopping.get(key, (None, float("inf")))[1] <= due and self._stopping[key][0] == uid:
            return
        self._stopping[key] = (uid, due)

        def confirm() -> None:
            current = self.c.store.get_raw("pods", *key)
            if current is None or current["metadata"]["uid"] != uid:
                return
            # through the owner index (dependants first), not the store's scan of every object
            self.c.delete_object("pods", key[0], key[1], grace_period=0)

        if delay <= 0:
            confirm()
        else:
            self.c.clock.call_later(delay, confirm)

    # -- scheduling -------------------------------------------------------------------------------------
    def _schedule(self, pod: dict, *, record: bool = True) -> None:
        meta, spec = pod["metadata"], pod.get("spec") or {}
        ns, name = meta.get("namespace", "default"), meta["name"]
        if spec.get("schedulingGates"):
            self._gated(pod)  # kube-scheduler's PreEnqueue: not tried until every gate is removed
            return
        needs = PodNeeds.of(spec)
        topo = annotation(pod, L.EXCLUSIVE_TOPOLOGY)
        gkey = label(pod, L.GROUP_KEY) if topo else ""
        windex = label(pod, L.WORKER_INDEX)
        if windex not in ("", "0"):
            res = self.reservations.get((ns, annotation(pod, L.LEADER_NAME_ANNOTATION)))
            slot = res.slots.pop(int(windex), None) if res else None
            if slot is not None:
                self._bind(pod, slot[0], slot[1], allocated=True)
                return
            leader = self.c.store.get_raw("pods", ns, annotation(pod, L.LEADER_NAME_ANNOTATION))
            if leader is None or not (leader.get("spec") or {}).get("nodeName"):
                self.unschedulable[(ns, name)] = None  # gang: workers wait for their leader's placement
                held = _unscheduled_message(leader)
                if held:  # the group does not fit: the worker is Unschedulable for the same reason
                    self._unschedulable(pod, held, record)
                return
        members = [needs]
        size = int(annotation(pod, L.SIZE_ANNOTATION) or 1)
        wneeds = None
        if windex == "0" and size > 1:
            worker = self.c.lws.worker_template(pod)
            if worker is not None:
                wneeds = PodNeeds.of(worker.get("spec") or {})
                members += [wneeds] * (size - 1)
        placed = self.c.scheduler.place_gang(members, topo, gkey)
        if placed is None:
            self.unschedulable[(ns, name)] = None
            self._unschedulable(pod, fit_error(self.c.scheduler, members, topo, gkey), record)
            for w in range(1, size):  # its workers, already created, are held for the same reason
                if (ns, f"{name}-{w}") in self.unschedulable:
                    self.c.enqueue("pod", ns, f"{name}-{w}")
            return
        self.unschedulable.pop((ns, name), None)
        if wneeds is not None:
            res = Reservation(meta["uid"], group_key=gkey)
            for w, node in enumerate(placed[1:], start=1):
                self.c.scheduler.allocate(node, wneeds, gkey)
                res.slots[w] = (node, wneeds)
            self.reservations[(ns, name)] = res
            for w in res.slots:  # workers created before the leader was placed take their slots now
                self.c.enqueue("pod", ns, f"{name}-{w}")
        self._bind(pod, placed[0], needs, allocated=False)

    def _gated(self, pod: dict) -> None:
        """What kube-scheduler writes for a pod with scheduling gates (Kueue's admission gate, for
        one): PodScheduled=False, reason SchedulingGated, once; no FailedScheduling event, no attempt.
        Removing the last gate is an update of the pod, which schedules it."""
        meta = pod["metadata"]
        key = (meta.get("namespace", "default"), meta["name"])
        st = pod.get("status") or {}
        old = next((c for c in st.get("conditions") or () if c.get("type") == "PodScheduled"), None) or {}
        if old.get("reason") == "SchedulingGated":
            return
        conds = [c for c in st.get("conditions") or () if c.get("type") != "PodScheduled"]
        cond = {"type": "PodScheduled", "status": "False", "lastProbeTime": None,
                "lastTransitionTime": rfc3339(self.c.now()), "reason": "SchedulingGated",
                "message": "Scheduling is blocked due to non-empty scheduling gates"}
        self._own_writes[key] = meta["uid"]
        self._write_status(key, {**st, "phase": "Pending", "conditions": [cond, *conds]})

    def _unschedulable(self, pod: dict, message: str, record: bool) -> None:
        """What kube-scheduler records for a failed attempt: the PodScheduled=False condition (written
        when it changes) and a FailedScheduling event (the recorder aggregates repeats by count)."""
        meta = pod["metadata"]
        key = (meta.get("namespace", "default"), meta["name"])
        st = pod.get("status") or {}
        conds = [c for c in st.get("conditions") or () if c.get("type") != "PodScheduled"]
        old = next((c for c in st.get("conditions") or () if c.get("type") == "PodScheduled"), None) or {}
        was_false = old.get("status") == "False"
        if not was_false or old.get("message") != message:
            since = old.get("lastTransitionTime") if was_false else rfc3339(self.c.now())
            cond = {"type": "PodScheduled", "status": "False", "lastProbeTime": None,
                    "lastTransitionTime": since, "reason": "Unschedulable", "message": message}
            self._own_writes[key] = meta["uid"]
            self._write_status(key, {**st, "phase": "Pending", "conditions": [cond, *conds]})
        if record:
            self.c.emit_event(pod, "FailedScheduling", message, etype="Warning",
                              component="default-scheduler")

    def _bind(self, pod: dict, node: str, needs: PodNeeds, *, allocated: bool) -> None:
        store = self.c.store
        spec = {**pod["spec"], "nodeName": node}
        pod = store.replace("pods", {**pod, "spec": spec}, check_version=False)
        meta = pod["metadata"]
        self.c.emit_event(pod, "Scheduled", f"Successfully assigned {meta.get('namespace', 'default')}/"
                                            f"{meta['name']} to {node}", component="default-scheduler")
        self._start(pod, node, needs, allocate=not allocated)

    def _release_reservation(self, key: Key) -> None:
        res = self.reservations.pop(key, None)
        if res is not None:
            for node, needs in res.slots.values():
                self.c.scheduler.release(node, needs, res.group_key)
            self.retry_pending()

    def retry_pending(self) -> None:
        for ns, name in list(self.unschedulable):
            self.c.enqueue("pod", ns, name)

    # -- lifecycle ---------------------------------------------------------------------------------------
    def _start(self, pod: dict, node: str, needs: PodNeeds, *, allocate: bool) -> None:
        meta = pod["metadata"]
        key = (meta.get("namespace", "default"), meta["name"])
        gkey = label(pod, L.GROUP_KEY) if annotation(pod, L.EXCLUSIVE_TOPOLOGY) else ""
        if allocate and node in self.c.scheduler.nodes:
            self.c.scheduler.allocate(node, needs, gkey)
        run = PodRun(meta["uid"], node, needs, gkey)
        self.runs[key] = run
        self.by_node.setdefault(node, {})[key] = None
        now = rfc3339(self.c.now())
        self._write_status(
            key,
            {
                "phase": "Pending",
                "hostIP": self.c.node_ip(node),
                "startTime": now,
                "conditions": [{"type": "PodScheduled", "status": "True", "lastTransitionTime": now}],
                "containerStatuses": [
                    self._cstatus(c, {"waiting": {"reason": "ContainerCreating"}})
                    for c in _containers(pod)
                ],
            },
        )
        self._mount_and_pull(key, run)

    def _mount_and_pull(self, key: Key, run: PodRun) -> None:
        """Volumes first (a missing Secret/ConfigMap: ContainerCreating, FailedMount), then pulls."""
        pod = self._current(key, run)
        if pod is None:
            return
        failed = podconfig.volume_error(pod, self.c.store)
        if failed is not None:
            self.blocked[key] = (run, "mount", [], False)
            message = f'MountVolume.SetUp failed for volume "{failed[0]}" : {failed[1]}'
            self._warn_once(pod, "FailedMount", message)
            return
        node, needs = run.node, run.needs
        images = _images(pod)
        self.c.learn_images(images)
        cfg, pool = self.c.config, self.c.pool_of(node)
        bw = (pool.pull_gbps if pool and pool.pull_gbps else None) or cfg.timings.pull_gbps
        cached = self.image_cache.setdefault(node, set())
        pull = sum(cfg.image_gb(i, needs.gpu > 0) / bw for i in images if i not in cached)
        if annotation(pod, PULL_FAILS) == "true" or any(cfg.image_fails(i) for i in images):
            run.timer = self.c.clock.call_later(max(pull, 1.0), lambda: self._pull_failed(key, run))
            return
        run.timer = self.c.clock.call_later(
            pull + cfg.timings.container_start_s, lambda: self._running(key, run, images)
        )

    def _pull_failed(self, key: Key, run: PodRun) -> None:
        pod = self._current(key, run)
        if pod is None:
            return
        images = _images(pod)
        self.c.emit_event(
            pod,
            "Failed",
            f'Failed to pull image "{images[0] if images else ""}"',
            etype="Warning",
            component="kubelet",
        )
        st = dict(pod.get("status") or {})
        st["containerStatuses"] = [
            self._cstatus(
                c,
                {
                    "waiting": {
                        "reason": "ImagePullBackOff",
                        "message": f'Back-off pulling image "{c.get("image")}"',
                    }
                },
            )
            for c in _containers(pod)
        ]
        self._write_status(key, st)

    def _running(self, key: Key, run: PodRun, images: list[str]) -> None:
        pod = self._current(key, run)
        if pod is None:
            return
        self.image_cache.setdefault(run.node, set()).update(images)
        errors = podconfig.container_config_errors(pod, self.c.store)
        if errors:
            self._config_error(key, run, pod, images, errors)
            return
        if run.ip is None:
            run.ip = self._alloc_ip()
        run.started = True
        now = rfc3339(self.c.now())
        old = pod.get("status") or {}
        restarts = {c.get("name"): c for c in old.get("containerStatuses") or []}
        st = {
            **old,
            "phase": "Running",
            "podIP": run.ip,
            "podIPs": [{"ip": run.ip}],
            "conditions": _conds(now, ready=False),
            "containerStatuses": [
                self._cstatus(c, {"running": {"startedAt": now}}, prev=restarts)
                for c in _containers(pod)
            ],
        }
        pod = self._write_status(key, st)
        self.c.hook("on_running", pod)
        cfg = self.c.config
        if annotation(pod, CRASHES) == "true" or any(cfg.image_crashes(i) for i in images):
            # a bad release that dies while loading (e.g. OOM): a crash loop, or group recreates
            run.timer = self.c.clock.call_later(cfg.timings.crash_after_s, lambda: self._crash_if(key, run))
            return
        never = annotation(pod, NEVER_READY) == "true" or any(cfg.image_never_ready(i) for i in images)
        if not never:
            run.timer = self.c.clock.call_later(self._load_seconds(pod, run), lambda: self._ready(key, run))

    def _config_error(
        self, key: Key, run: PodRun, pod: dict, images: list[str], errors: dict[str, str]
    ) -> None:
        """Containers whose env needs a missing Secret/ConfigMap wait (CreateContainerConfigError)."""
        self.blocked[key] = (run, "config", images, False)
        old = pod.get("status") or {}
        now = rfc3339(self.c.now())
        prev = {c.get("name"): c for c in old.get("containerStatuses") or []}
        css = []
        for c in _containers(pod):
            msg = errors.get(c.get("name", ""))
            if msg is None:
                waiting = {"waiting": {"reason": "ContainerCreating"}}
                css.append(prev.get(c.get("name")) or self._cstatus(c, waiting))
            else:
                waiting = {"waiting": {"reason": "CreateContainerConfigError", "message": msg}}
                css.append(self._cstatus(c, waiting, prev=prev))
        if run.started:
            old = {**old, "conditions": _conds(now, ready=False)}
        self._write_status(key, {**old, "containerStatuses": css})
        for msg in dict.fromkeys(errors.values()):
            self._warn_once(pod, "Failed", f"Error: {msg}")

    def config_changed(self, ns: str) -> None:
        """A Secret or ConfigMap of ``ns`` was written or deleted: its waiting pods are retried."""
        for (pns, name), (run, stage, images, _) in list(self.blocked.items()):
            if pns == ns:
                self.blocked[(pns, name)] = (run, stage, images, True)
                self.c.enqueue("pod", pns, name)

    def _resume(self, key: Key) -> None:
        run, stage, images, _ = self.blocked.pop(key)
        if stage == "mount":
            self._mount_and_pull(key, run)
        else:  # the image is there: only the container is created and started
            delay = self.c.config.timings.container_start_s
            run.timer = self.c.clock.call_later(delay, lambda: self._running(key, run, images))

    def _warn_once(self, pod: dict, reason: str, message: str) -> None:
        sent = self._warned.setdefault(pod["metadata"]["uid"], set())
        if message not in sent:
            sent.add(message)
            self.c.emit_event(pod, reason, message, etype="Warning", component="kubelet")

    def _ready(self, key: Key, run: PodRun) -> None:
        pod = self._current(key, run)
        if pod is None:
            return
        refused = self._probe_refused(pod)
        if refused:  # the kubelet's probe gets "connection refused": Running, never Ready
            self.c.emit_event(pod, "Unhealthy", refused, etype="Warning", component="kubelet")
            return
        now = rfc3339(self.c.now())
        old = pod.get("status") or {}
        self._write_status(
            key,
            {
                **old,
                "conditions": _conds(now, ready=True),
                "containerStatuses": [
                    {**cs, "ready": True, "started": True} for cs in old.get("containerStatuses") or []
                ],
            },
        )

    def _probe_refused(self, pod: dict) -> str:
        """The failure of a readiness probe aimed at a port the pod's stand-in engine does not
        listen on ("" when every probe finds it, or no engine backs the pod: then nothing is known
        about the port and probes pass, as before engines existed)."""
        ip = (pod.get("status") or {}).get("podIP") or ""
        for c in _containers(pod):
            probe = c.get("readinessProbe") or {}
            how = probe.get("httpGet") or probe.get("tcpSocket") or probe.get("grpc")
            if not isinstance(how, dict):
                continue
            port = resolve_port(pod["spec"], how.get("port"))
            answers = {h.listening(pod, -1 if port is None else port) for h in self.c.pod_hooks
                       if hasattr(h, "listening")} - {None}
            if not answers or True in answers:
                continue  # no stand-in engine behind the pod, or it listens there
            if port is None:
                return f"Readiness probe failed: port {how.get('port')!r} is not a container port"
            url = f"http://{ip}:{port}{how.get('path', '')}" if "httpGet" in probe else f"{ip}:{port}"
            return f'Readiness probe failed: Get "{url}": dial tcp {ip}:{port}: connect: connection refused'
        return ""

    def _crash_if(self, key: Key, run: PodRun) -> None:
        if self._current(key, run) is not None:
            self.crash(*key, exit_code=137)

    def crash(self, ns: str, name: str, exit_code: int = 1) -> bool:
        """A container exits: restartCount+1, not Ready; the kubelet restarts it after a back-off."""
        key = (ns, name)
        run = self.runs.get(key)
        pod = self._current(key, run) if run else None
        if pod is None or run is None or not run.started:
            return False
        self.c.clock.cancel(run.timer)
        now = rfc3339(self.c.now())
        old = pod.get("status") or {}
        css = []
        for i, cs in enumerate(old.get("containerStatuses") or []):
            if i == 0:
                cs = {
                    **cs,
                    "ready": False,
                    "started": False,
                    "restartCount": cs.get("restartCount", 0) + 1,
                    "lastState": {
                        "terminated": {"exitCode": exit_code, "reason": "Error", "finishedAt": now}
                    },
                    "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                }
            css.append(cs)
        pod = self._write_status(
            key, {**old, "conditions": _conds(now, ready=False), "containerStatuses": css}
        )
        self.c.hook("on_stopped", pod)
        images = _images(pod)
        t = self.c.config.timings
        run.timer = self.c.clock.call_later(
            t.restart_backoff_s + t.container_start_s, lambda: self._running(key, run, images)
        )
        return True

    def _stop(self, ns: str, name: str, run: PodRun) -> None:
        self.runs.pop((ns, name), None)
        self.blocked.pop((ns, name), None)
        self._warned.pop(run.uid, None)
        self.c.clock.cancel(run.timer)
        self.by_node.get(run.node, {}).pop((ns, name), None)
        self.c.scheduler.release(run.node, run.needs, run.group_key)
        if run.ip is not None:
            self._free_ips.append(self._ip_index(run.ip))
            if run.started:
                snapshot = self.c.gone_pods.get((ns, name)) or {"metadata": {"name": name, "namespace": ns}}
                self.c.hook(
                    "on_stopped", {**snapshot, "status": {**(snapshot.get("status") or {}), "podIP": run.ip}}
                )
        self.retry_pending()

    # -- helpers -----------------------------------------------------------------------------------------
    def _current(self, key: Key, run: PodRun | None) -> dict | None:
        pod = self.c.store.get_raw("pods", *key)
        if pod is None or run is None or pod["metadata"]["uid"] != run.uid or self.runs.get(key) is not run:
            return None
        return pod

    def _write_status(self, key: Key, status: dict) -> dict:
        pod = self.c.store.get_raw("pods", *key)
        if pod is None:  # deleted under us: what replace() would answer for a missing object
            raise NotFound(f'pods "{key[1]}" not found', details={"name": key[1], "kind": "pods"})
        qos = (pod.get("status") or {}).get("qosClass")
        if qos and "qosClass" not in status:  # set at creation and never changed: the kubelet keeps it
            status = {**status, "qosClass": qos}
        return self.c.store.replace(
            "pods", {**pod, "status": status}, subresource="status", check_version=False
        )

    @staticmethod
    def _cstatus(container: dict, state: dict, prev: dict | None = None) -> dict:
        p = (prev or {}).get(container.get("name"), {})
        out = {
            "name": container.get("name", ""),
            "image": container.get("image", ""),
            "imageID": "",
            "ready": False,
            "started": "running" in state,
            "restartCount": p.get("restartCount", 0),
            "state": state,
        }
        if p.get("lastState"):
            out["lastState"] = p["lastState"]
        return out

    def _load_seconds(self, pod: dict, run: PodRun) -> float:
        if annotation(pod, LOAD_SECONDS):
            return float(annotation(pod, LOAD_SECONDS))
        t = self.c.config.timings
        model = t.models.get(label(pod, L.MODEL))
        if model is not None and model.load_s is not None:
            return model.load_s
        if run.needs.gpu == 0 and model is None:
            return 0.0
        weight = model.weight_gb if model is not None and model.weight_gb is not None else t.weight_gb
        pool = self.c.pool_of(run.node)
        bw = (pool.storage_gbps if pool and pool.storage_gbps else None) or t.storage_gbps
        return weight / max(1, int(annotation(pod, L.SIZE_ANNOTATION) or 1)) / bw

    def _alloc_ip(self) -> str:
        if self._next_ip > _POD_ADDRESSES and self._free_ips:
            i = self._free_ips.popleft()
        else:
            i, self._next_ip = self._next_ip, self._next_ip + 1
        return f"127.{self.pod_network}.{(i - 1) // 254}.{(i - 1) % 254 + 1}"

    @staticmethod
    def _ip_index(ip: str) -> int:
        _, _, x, y = (int(p) for p in ip.split("."))
        return x * 254 + y


def _conds(now: str, *, ready: bool) -> list[dict]:
    r = "True" if ready else "False"
    return [
        {"type": "PodScheduled", "status": "True", "lastTransitionTime": now},
        {"type": "Initialized", "status": "True", "lastTransitionTime": now},
        {"type": "ContainersReady", "status": r, "lastTransitionTime": now},
        {"type": "Ready", "status": r, "lastTransitionTime": now},
    ]


def _unscheduled_message(pod: dict | None) -> str:
    """The message of a pod's PodScheduled=False condition, or ""."""
    for c in ((pod or {}).get("status") or {}).get("conditions") or ():
        if c.get("type") == "PodScheduled" and c.get("status") == "False":
            return str(c.get("message") or "")
    return ""


def _containers(pod: dict) -> list[dict]:
    return pod["spec"].get("containers") or []


def _images(pod: dict) -> list[str]:
    return [c.get("image", "") for c in _containers(pod)]
