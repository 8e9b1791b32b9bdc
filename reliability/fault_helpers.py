"""The fault campaign's ground truth: an embedded cluster served over HTTPS, and a history of every
partition change the *store* saw, with the pods as they were at that instant.

The controller under test only ever talks HTTP to the server (real ``kubernetes`` client); the
history is recorded by a store subscriber, so it cannot be fooled by what the controller believes.
The checks return a list of problems (empty: the invariant held), so the tests assert on them and
``reliability/fault_campaign.py`` counts trials survived with the same code.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lwsflow.controller.api import labels as L
from lwsflow.controller.kube.client import Kube
from lwsflow.controller.kube.resources import LWS
from lwsflow.controller.rollout import gate, state
from lwsflow.sim.apiserver import ApiFaults
from lwsflow.sim.apiserver.server import RequestRecord
from lwsflow.sim.config import ClusterConfig, PoolConfig, Timings
from lwsflow.sim.lws_controller import LWS as LWS_KEY
from lwsflow.sim.testing import EmbeddedCluster, Recorded, StoreRecorder
from reliability.sim_views import SimViews

SPEED = 200.0  # virtual seconds per wall second: a 20 s model load takes 0.1 s
TOKEN = "fault-campaign-token"
NS = "default"
OLD_IMAGE, NEW_IMAGE = "vllm:1", "vllm:2"


def cluster_config(nodes: int = 8) -> ClusterConfig:
    """CPU nodes only (the rollout logic does not care about GPUs) and fast pulls."""
    return ClusterConfig(
        pools=[PoolConfig(name="cpu", count=nodes, cpu=256, memory_gi=1024)],
        timings=Timings(pull_gbps=100.0, image_gb=0.1, cpu_image_gb=0.1, container_start_s=1.0,
                        weight_gb=0.0, restart_backoff_s=5.0),
    )


def lws_manifest(name: str, *, replicas: int = 4, size: int = 2, image: str = OLD_IMAGE,
                 load_s: int = 10, annotations: dict[str, str] | None = None) -> dict:
    """An LWS with maxSurge 0 / maxUnavailable 1, so stage k's groups are exactly [R - t_k, R)."""
    ann = {"sim.lwsflow.io/load-seconds": str(load_s), **(annotations or {})}
    return {
        "apiVersion": L.LWS_API_VERSION, "kind": L.LWS_KIND,
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "replicas": replicas,
            "rolloutStrategy": {"type": "RollingUpdate",
                                "rollingUpdateConfiguration": {"maxSurge": 0, "maxUnavailable": 1}},
            "leaderWorkerTemplate": {"size": size, "workerTemplate": {
                "metadata": {"annotations": ann},
                "spec": {"containers": [{"name": "engine", "image": image}]}}},
        },
    }


def release(manifest: dict, image: str = NEW_IMAGE, **annotations: str) -> dict:
    """``manifest`` with another image (and pod annotations, e.g. the sim's never-ready)."""
    import copy

    out = copy.deepcopy(manifest)
    tmpl = out["spec"]["leaderWorkerTemplate"]["workerTemplate"]
    tmpl["spec"]["containers"][0]["image"] = image
    tmpl["metadata"]["annotations"].update(annotations)
    return out


def image_of(obj: dict) -> str:
    return obj["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]["image"]


def _ready(pod: dict) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or [])


@dataclass(frozen=True)
class Change:
    """The LWS at the instant its partition or image changed, with the pods' truth at that instant."""

    rv: int
    partition: int
    image: str
    phase: str
    passed: int
    good: frozenset[int]  # groups whose every pod runs ``image`` and is Ready
    counters: dict[str, int]


class History:
    """Per LWS the sequence of :class:`Change`, read from the harness's ``StoreRecorder`` (whose
    subscriber runs under the store lock: each change and its pods are consistent)."""

    def __init__(self, store: StoreRecorder) -> None:
        self.store = store
        self._since: dict[str, int] = {}
        self._lock = threading.Lock()

    def _lws(self, name: str) -> list[Recorded]:
        with self._lock:
            since = self._since.get(name, 0)
        return [r for r in self.store.entries(LWS_KEY, name, since=since) if r.type != "DELETED"]

    def of(self, name: str) -> list[Change]:
        out: list[Change] = []
        for r in self._lws(name):
            obj = r.object
            part, img = gate.partition(obj), image_of(obj)
            if out and out[-1].partition == part and out[-1].image == img:
                continue
            st = state.RolloutState.from_object(obj)
            out.append(Change(r.rv, part, img, st.phase, st.passed, _good(name, obj, img, r.pods),
                              gate.counters(obj)))
        return out

    def passes_of(self, name: str) -> list[tuple[int, int]]:
        """(resourceVersion, stages passed) each time the recorded ``passed`` changed."""
        out: list[tuple[int, int]] = []
        for r in self._lws(name):
            st = state.RolloutState.from_object(r.object)
            if st.id and (not out or out[-1][1] != st.passed):
                out.append((r.rv, st.passed))
        return out

    def forget(self, name: str) -> None:
        """Drop ``name``'s history (a deleted object; a later one of that name starts afresh)."""
        with self._lock:
            self._since[name] = self.store.position()

    def restart(self, name: str) -> None:
        """Start ``name``'s history again at the object as it is now (the next rollout of it)."""
        with self._lock:
            self._since[name] = self.store.last_position(LWS_KEY, name)


def _good(lws: str, obj: dict, image: str, pods: Mapping[tuple[str, str], dict]) -> frozenset[int]:
    """Groups whose every pod runs ``image`` and is Ready, among ``pods``."""
    size = obj["spec"]["leaderWorkerTemplate"]["size"]
    groups: dict[int, list[dict]] = {}
    for p in pods.values():
        labels = p["metadata"].get("labels") or {}
        if labels.get(L.NAME) == lws and not p["metadata"].get("deletionTimestamp"):
            groups.setdefault(int(labels.get(L.GROUP_INDEX, -1)), []).append(p)
    return frozenset(gi for gi, members in groups.items() if len(members) == size and all(
        p["spec"]["containers"][0]["image"] == image and _ready(p) for p in members))


@dataclass
class FaultEnv(SimViews):
    """The served cluster, a client for the test itself, and the history."""

    kube: Kube
    kubeconfig: Path
    history: History
    faults: ApiFaults
    requests: Counter[tuple[str, str]] = field(default_factory=Counter)  # (resource, name) -> count
    verbs: Counter[str] = field(default_factory=Counter)  # verb -> requests the server has seen

    def requests_for(self, name: str) -> int:
        """Requests the server has seen for the LWS ``name`` (any client, any verb)."""
        return self.requests[("leaderworkersets", name)]

    def wait(self, name: str, pred: Any, timeout_wall: float = 30.0) -> dict:
        """Poll the LWS until ``pred(obj)`` (the test client retries injected errors like any client)."""
        end = time.monotonic() + timeout_wall
        obj: dict = {}
        while time.monotonic() < end:
            obj = self.kube.get(LWS, NS, name)
            if pred(obj):
                return obj
            time.sleep(0.05)
        raise AssertionError(f"{name}: not reached in {timeout_wall}s (cluster loop error: "
                             f"{self.cluster.loop_error!r}): {obj.get('status')}")

    def create_ready(self, manifest: dict) -> dict:
        """Create the LWS with the API faults paused, and wait until every group is Ready."""
        with self.faults_paused():
            self.kube.create(LWS, NS, manifest)
            return self.wait(manifest["metadata"]["name"], lambda o: gate.lws_fully_rolled(o).passed)

    def delete(self, name: str) -> None:
        with self.faults_paused():
            self.kube.delete(LWS, NS, name)
        self.history.forget(name)

    def faults_paused(self) -> _Paused:
        return _Paused(self.faults)

    def close(self) -> None:
        self.kube.api.close()
        self.sim.close()


class _Paused:
    """Context manager: the server's error/conflict rates are 0 inside (set-up, final reads)."""

    def __init__(self, faults: ApiFaults) -> None:
        self.faults = faults
        self.saved = (0.0, 0.0)

    def __enter__(self) -> None:
        self.saved = (self.faults.error_rate, self.faults.conflict_rate)
        self.faults.error_rate = self.faults.conflict_rate = 0.0

    def __exit__(self, *exc: object) -> None:
        self.faults.error_rate, self.faults.conflict_rate = self.saved


def start_env(tmp: Path, *, faults: ApiFaults | None = None, speed: float = SPEED,
              nodes: int = 8, engines: bool = False) -> FaultEnv:
    """A `sim serve`-style server in this process (HTTPS + token on 127.0.0.1:0), running in realtime.

    ``engines``: leader pods serve real HTTP (the stand-in engine on their loopback pod IPs), so a
    smoke test can reach them; their failure modes come from the pod annotation.
    """
    faults = faults or ApiFaults()
    sim = EmbeddedCluster(tmp, cluster_config(nodes), speed=speed, token=TOKEN, faults=faults,
                          engines=engines, engine_options={"side_channel_port": 0})
    history = History(StoreRecorder(sim.cluster, keys=[LWS_KEY]))
    sim.start()
    server = sim.api
    env = FaultEnv(sim, Kube.connect(str(sim.kubeconfig), attempts=30), sim.kubeconfig, history, faults)
    log, lock = server.log, threading.Lock()

    def counted(rec: RequestRecord) -> None:  # lets a trial see when a subprocess starts talking
        with lock:
            env.requests[(rec[2], rec[5])] += 1
            env.verbs[rec[0]] += 1
        log(rec)
    server.log = counted  # type: ignore[method-assign]
    return env


@dataclass
class Trial:
    """One trial: what was tried, how it ended, and every invariant it broke (none: survived)."""

    kind: str
    name: str
    result: str = ""
    problems: list[str] = field(default_factory=list)
    detail: dict[str, object] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def survived(self) -> bool:
        return not self.problems


# -- invariants ----------------------------------------------------------------------------------------


def expected_partitions(replicas: int, targets: list[int]) -> list[int]:
    """Frozen at ``replicas``, then ``replicas - t`` for each stage's group target (a stage that keeps
    the partition, e.g. a P/D role's scaled target, is no change and so not in the list)."""
    out = [replicas]
    for t in targets:
        if replicas - t != out[-1]:
            out.append(replicas - t)
    return out


def decode_first_problems(decode_passes: list[tuple[int, int]], prefill: list[Change], *,
                          replicas: int, targets: list[int], new: str = NEW_IMAGE) -> list[str]:
    """P/D pair: prefill's partition for stage k is written only after decode recorded stage k passed."""
    problems = []
    forward = [c for c in prefill[1:] if c.image == new]
    for k, c in enumerate(forward[1:], start=1):
        passed = max((p for rv, p in decode_passes if rv < c.rv), default=0)
        if passed < k:
            problems.append(f"prefill moved to partition {c.partition} (stage {k}) while decode had "
                            f"passed {passed} stage(s)")
    return problems


def history_problems(changes: list[Change], *, replicas: int, targets: list[int], result: str,
                     old: str = OLD_IMAGE, new: str = NEW_IMAGE, at_rest: bool = False) -> list[str]:
    """Everything wrong with one rollout's partition history (see the module docstring).

    * forward (the new image): a prefix of ``expected_partitions`` -- non-increasing, every stage's
      partition applied exactly once, none skipped; all of it when ``result`` is "succeeded";
    * no gate bypassed: when the partition leaves stage k's value, stage k's groups
      ``[replicas - t_k, replicas)`` are all on the new image and Ready (pods, at that instant);
    * "rolled-back": the forward prefix is followed by exactly one change, to partition 0 on the old
      image, and nothing after it;
    * ``at_rest`` (GitOps mode): the controller may end by freezing the partition back at
      ``replicas`` (same image), so the next synced template cannot roll every group at once.
    """
    problems: list[str] = []
    if not changes or changes[0].image != old:
        return [f"history does not start on {old}: {changes[:1]}"]
    if at_rest and len(changes) > 2 and changes[-1].partition == replicas and \
            changes[-2].partition == 0 and changes[-1].image == changes[-2].image:
        changes = changes[:-1]
    rest = changes[1:]
    forward = [c for c in rest if c.image == new]
    n_fwd = len(forward)
    if rest[:n_fwd] != forward:
        problems.append(f"the new image came back after a rollback: {_seq(rest)}")
    want = expected_partitions(replicas, targets)
    got = [c.partition for c in forward]
    if got != want[:len(got)]:
        problems.append(f"partitions {got} are not a prefix of {want} (stage skipped or repeated)")
    for i in range(2, min(len(forward), len(want))):  # leaving stage i-1 needs its gate
        stage_groups = set(range(want[i - 1], replicas))
        missing = stage_groups - forward[i].good
        if missing:
            problems.append(f"partition {want[i - 1]} -> {forward[i].partition} while groups "
                            f"{sorted(missing)} were not updated and Ready (gate bypassed)")
    back = rest[n_fwd:]
    if result == "succeeded":
        if got != want:
            problems.append(f"succeeded but partitions {got} != {want}")
        if back:
            problems.append(f"succeeded but changed after the last stage: {_seq(back)}")
    elif result == "rolled-back":
        if [(c.partition, c.image) for c in back] != [(0, old)]:
            problems.append(f"rollback history {_seq(back)} is not one change to partition 0 on {old}")
    else:
        problems.append(f"ended {result!r}, neither succeeded nor rolled back")
    return problems


def final_problems(obj: dict, result: str, *, old: str = OLD_IMAGE, new: str = NEW_IMAGE,
                   at_rest: bool = False) -> list[str]:
    """The final equality: every group on the expected image and Ready, the phase recorded."""
    problems = []
    g = gate.lws_fully_rolled(obj)
    if not g.passed:
        problems.append(f"final equality does not hold: {g.detail}")
    want_image, want_phase = (new, state.SUCCEEDED) if result == "succeeded" else (old, state.ROLLED_BACK)
    if image_of(obj) != want_image:
        problems.append(f"image {image_of(obj)} after {result}, expected {want_image}")
    phase = state.RolloutState.from_object(obj).phase
    if phase != want_phase:
        problems.append(f"phase {phase} after {result}, expected {want_phase}")
    if gate.partition(obj) not in ((0, gate.replicas(obj)) if at_rest else (0,)):
        problems.append(f"partition {gate.partition(obj)} left after {result}")
    return problems


def _seq(changes: list[Change]) -> str:
    return ", ".join(f"{c.partition}@{c.image}" for c in changes) or "nothing"


@contextmanager
def served(tmp: Path, **kw: Any) -> Iterator[FaultEnv]:
    """``start_env`` as a context manager (closed however the block ends)."""
    env = start_env(tmp, **kw)
    try:
        yield env
    finally:
        env.close()
