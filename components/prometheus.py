"""Run a real Prometheus (Debian's ``prometheus`` binary) on 127.0.0.1 for analysis, and keep its
scrape targets in step with the serving pods the API reports.

Debian's build has no ``kubernetes_sd_configs``, so targets come from a ``file_sd`` JSON file that
``write_targets`` rewrites atomically (Prometheus re-reads it on change). Each serving pod (the leader:
worker index 0, running, with a pod IP) becomes one target labelled with its LWS, role, revision (the
LWS template hash), group index and namespace, so queries can select one revision.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from lwsflow.components.atomic import write_file_atomic
from lwsflow.components.proc import stop_process
from lwsflow.controller import httpclient
from lwsflow.controller.api import labels as L
from lwsflow.controller.api.serving import serving_port
from lwsflow.controller.errors import OperationFailed

TARGETS_FILE = "targets.json"
# label names the analysis queries select on (Prometheus label names: [a-zA-Z_][a-zA-Z0-9_]*)
TARGET_LABELS = ("lws", "role", "revision", "group", "namespace", "pod")


def find_prometheus() -> str:
    """The prometheus binary; OperationFailed naming the fix when it is missing."""
    path = shutil.which("prometheus")
    if path is None:
        raise OperationFailed("prometheus is not installed; run scripts/setup "
                              "(or apt-get install -y prometheus)")
    return path


def serving_targets(pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """file_sd groups for the serving pods among ``pods``: one target per running leader pod."""
    groups: list[dict[str, Any]] = []
    for pod in pods:
        meta = pod.get("metadata") or {}
        lbl = meta.get("labels") or {}
        status = pod.get("status") or {}
        if lbl.get(L.WORKER_INDEX, "0") != "0" or status.get("phase") != "Running" or not status.get("podIP"):
            continue  # workers hold shards; only the leader serves HTTP and /metrics
        if meta.get("deletionTimestamp"):
            continue
        # a DisaggregatedSet's pods go by the DS: its child LWS are renamed at every revision, and the
        # analysis compares revisions of one role under one name (components/analysis_hook.py)
        lws = lbl.get(L.DS_NAME) or lbl.get(L.NAME)
        if not lws:
            continue
        port = serving_port(pod.get("spec") or {}, meta.get("annotations") or {})
        groups.append({
            "targets": [f"{status['podIP']}:{port}"],
            "labels": {
                "lws": lws,
                "role": lbl.get(L.ROLE) or lbl.get(L.DS_ROLE) or "aggregated",
                "revision": lbl.get(L.TEMPLATE_REVISION_HASH, ""),
                "group": lbl.get(L.GROUP_INDEX, ""),
                "namespace": meta.get("namespace", ""),
                "pod": meta.get("name", ""),
            },
        })
    groups.sort(key=lambda g: (g["labels"]["namespace"], g["labels"]["pod"]))
    return groups


def write_targets(path: Path, groups: list[dict[str, Any]]) -> None:
    """Replace the file_sd file atomically (Prometheus must never read half a file)."""
    write_file_atomic(path, json.dumps(groups, indent=1).encode())


def active_targets(url: str) -> list[dict[str, Any]]:
    """The active scrape targets of the Prometheus at ``url``."""
    resp = httpclient.shared().get(f"{url}/api/v1/targets", params={"state": "active"}, timeout=5.0)
    resp.raise_for_status()
    targets: list[dict[str, Any]] = resp.json()["data"]["activeTargets"]
    return targets


def wait_for_targets(url: str, pods: set[tuple[str, str]], timeout_s: float = 20.0, scrapes: int = 2,
                     written: Callable[[], set[tuple[str, str]]] | None = None) -> bool:
    """Wait until every (pod, revision) in ``pods`` is an active target scraped successfully
    ``scrapes`` times while we watched (a group's pod keeps its name across revisions, so the name
    alone would match the old target). Two scrapes because ``rate()`` needs two samples in its
    window: after one, every query of a new pod is "no data". Prometheus's discovery hands new
    targets to the scrapers at most every 5 s, so a just-written target file takes up to ~6 s to
    be scraped (docs/analysis.md, the time rule). With ``written`` (the targets in the file now), a
    pod that left the file while we waited (deleted: a DisaggregatedSet's old child right after its
    gate) is waited for no longer."""
    deadline = time.monotonic() + timeout_s
    seen: dict[tuple[str, str], set[str]] = {p: set() for p in pods}
    listed: set[tuple[str, str]] = set()
    while True:
        try:
            for t in active_targets(url):
                key = (t["labels"].get("pod"), t["labels"].get("revision"))
                last = t.get("lastScrape", "")
                if key in seen and t.get("health") == "up" and last and not last.startswith("0001"):
                    seen[key].add(last)
        except (httpx.HTTPError, KeyError, ValueError):
            pass
        if written is not None:  # once in the file, then gone from it: deleted
            now = written()
            listed |= seen.keys() & now
            seen = {p: v for p, v in seen.items() if p in now or p not in listed}
        if all(len(v) >= scrapes for v in seen.values()):
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@dataclass
class Prometheus:
    """A running Prometheus: ``url``, ``targets_path``; ``stop()`` or use as a context manager."""

    url: str
    targets_path: Path
    workdir: Path
    proc: subprocess.Popen[bytes] = field(repr=False)
    _own_dir: bool = field(default=False, repr=False)
    _stop: threading.Event = field(default_factory=threading.Event, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _groups: list[dict[str, Any]] = field(default_factory=list, repr=False)

    def follow(self, list_pods: Callable[[], list[dict[str, Any]]], every_s: float = 1.0) -> None:
        """Keep the targets in step with ``list_pods()`` in a background thread until ``stop()``
        (new pods are scraped from their first seconds, so a window can cover them)."""
        def loop() -> None:
            while not self._stop.wait(every_s):
                try:
                    self.sync_from_pods(list_pods())
                except Exception:  # an API hiccup: keep the last targets, try again next round
                    continue
        self.sync_from_pods(list_pods())
        threading.Thread(target=loop, name="prometheus-targets", daemon=True).start()

    def set_targets(self, groups: list[dict[str, Any]]) -> None:
        with self._lock:
            self._groups = list(groups)
            write_targets(self.targets_path, groups)

    def sync_from_pods(self, pods: list[dict[str, Any]],
                       namespace: str | None = None) -> list[dict[str, Any]]:
        """Rewrite the targets from a pod list (e.g. ``Kube.list(POD, ns)``); returns the groups.
        With ``namespace`` only that namespace's targets are replaced (``pods`` are its pods), so
        rollouts in several namespaces share one Prometheus."""
        groups = serving_targets(pods)
        with self._lock:
            if namespace is not None:
                groups = [g for g in groups if g["labels"]["namespace"] == namespace]
                keep = [g for g in self._groups if g["labels"]["namespace"] != namespace]
                self._groups = sorted(keep + groups, key=lambda g: (g["labels"]["namespace"],
                                                                    g["labels"]["pod"]))
            else:
                self._groups = groups
            write_targets(self.targets_path, self._groups)
        return groups

    def active_targets(self) -> list[dict[str, Any]]:
        return active_targets(self.url)

    def wait_for_targets(self, pods: set[tuple[str, str]], timeout_s: float = 20.0,
                         scrapes: int = 2) -> bool:
        return wait_for_targets(self.url, pods, timeout_s, scrapes, written=self.written)

    def written(self) -> set[tuple[str, str]]:
        """The (pod, revision) targets in the file now (``follow`` rewrites it every second)."""
        with self._lock:
            return {(g["labels"]["pod"], g["labels"]["revision"]) for g in self._groups}

    def stop(self) -> None:
        self._stop.set()
        stop_process(self.proc, grace_s=10)
        if self._own_dir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> Prometheus:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def config_yaml(scrape_interval_s: float, targets_path: Path) -> str:
    """A one-job config: scrape every target of the file_sd file at ``scrape_interval_s``."""
    interval = f"{max(int(scrape_interval_s * 1000), 100)}ms"
    return json.dumps({  # JSON is YAML; no quoting surprises
        "global": {"scrape_interval": interval, "evaluation_interval": interval,
                   "scrape_timeout": interval},
        "scrape_configs": [{
            "job_name": "lwsflow-serving",
            "honor_labels": False,
            "file_sd_configs": [{"files": [str(targets_path)], "refresh_interval": "1s"}],
        }],
    }, indent=1)


def start_prometheus(scrape_interval_s: float = 1.0, workdir: Path | None = None,
                     ready_timeout_s: float = 30.0) -> Prometheus:
    """Start Prometheus on 127.0.0.1 (a free port) with a fresh tsdb under ``workdir`` (a temp dir
    when None, removed on stop) and an empty target file; returns once ``/-/ready`` answers 200."""
    binary = find_prometheus()
    own = workdir is None
    wd = Path(tempfile.mkdtemp(prefix="lwsflow-prom-")) if workdir is None else workdir
    wd.mkdir(parents=True, exist_ok=True)
    targets = wd / TARGETS_FILE
    write_targets(targets, [])
    (wd / "prometheus.yml").write_text(config_yaml(scrape_interval_s, targets))
    last_err = ""
    for _ in range(3):  # another process may take the free port between the probe and the bind
        port = _free_port()
        log = (wd / "prometheus.log").open("wb")
        proc = subprocess.Popen(
            [binary, f"--config.file={wd / 'prometheus.yml'}", f"--storage.tsdb.path={wd / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{port}", "--storage.tsdb.retention.time=1d",
             "--log.level=warn"],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        log.close()
        prom = Prometheus(f"http://127.0.0.1:{port}", targets, wd, proc, own)
        deadline = time.monotonic() + ready_timeout_s
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                if httpclient.shared().get(f"{prom.url}/-/ready", timeout=1.0).status_code == 200:
                    return prom
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        tail = (wd / "prometheus.log").read_text(errors="replace").strip().splitlines()[-1:]
        last_err = tail[0] if tail else f"exit {proc.poll()}"
        prom._own_dir = False
        prom.stop()
    if own:
        shutil.rmtree(wd, ignore_errors=True)
    raise OperationFailed(f"prometheus did not become ready: {last_err[:300]}")
