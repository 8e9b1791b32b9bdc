"""Controller scale bench: the controller against a simple poller baseline, on the embedded cluster.

For each size N (default 100, 1,000, 5,000) and each engine (``poller``: the baseline, the simplest
controller that could work, which lists every policy and GETs every target every ``--poll`` seconds,
:func:`poller`; ``informer``: ``lwsflow controller run``), a fresh embedded cluster gets N
LeaderWorkerSets (2 groups x 1 pod, partition frozen at replicas) and N RolloutPolicies (stages
``1, 100%``); one replica (a subprocess) is started and measured, both engines side by side in one run:

* **adopted**: wall seconds from the controller's start until every policy shows a stable revision;
* **idle req/s**: API requests per second the controller sends while nothing changes, watches not
  counted, counted on the *server* side (the embedded API's request hook, by User-Agent), over 20 s;
* **idle CPU** (% of one core, from /proc over the same window) and **RSS** (MiB) of the controller;
* **change -> first write**: 50 templates synced at once (GitOps: new template, partition frozen);
  per target, wall seconds from its sync to the controller's first write to it (server side),
  median and p99.

The poller above --poller-max policies is skipped (one pass takes longer than a change may wait); the
run says so. Figures go to docs/controller.md with the command that produced them:

    .venv/bin/python bench/controller_scale.py [--sizes 100,1000,5000] [--changes 50] [--idle 20]
        [--engines poller,informer] [--poller-max 1000] [--poll 2] [--json FILE]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from lwsflow.controller.errors import NotFound
from lwsflow.controller.kube.client import Kube
from lwsflow.controller.kube.resources import LWS, ROLLOUT_POLICY
from lwsflow.controller.rollout import gate, state
from lwsflow.sim.apiserver.faults import ApiFaults, RequestInfo
from lwsflow.sim.config import ClusterConfig, PoolConfig, Timings
from lwsflow.sim.kinds import ROLLOUT_POLICY as POLICY_KIND
from lwsflow.sim.lws_controller import LWS as LWS_KEY
from lwsflow.sim.testing import EmbeddedCluster

NS = "default"
BIN = Path(sys.executable).parent / "lwsflow"
CONTROLLER_UA = "lwsflow-controller/"
WRITES = {"create", "patch", "update", "delete"}
POLICY_KEY = POLICY_KIND.key
SEEN = "bench.lwsflow.io/poller-seen"  # the poller's one write per changed target


class Requests:
    """Every resource request the controller sends, as the API server saw it (time, verb, resource, name)."""

    def __init__(self) -> None:
        self.log: list[tuple[float, str, str, str]] = []
        self.lock = threading.Lock()

    def hook(self, req: RequestInfo) -> None:
        if req.user_agent.startswith(CONTROLLER_UA):
            with self.lock:
                self.log.append((time.monotonic(), req.verb, req.resource, req.name))

    def between(self, t0: float, t1: float) -> list[tuple[float, str, str, str]]:
        with self.lock:
            return [r for r in self.log if t0 <= r[0] < t1]


def lws(name: str) -> dict[str, Any]:
    return {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
            "metadata": {"name": name, "namespace": NS},
            "spec": {"replicas": 2, "rolloutStrategy": {
                "type": "RollingUpdate", "rollingUpdateConfiguration": {
                "maxSurge": 0, "maxUnavailable": 1, "partition": 2}},
                "leaderWorkerTemplate": {"size": 1, "workerTemplate": {
                    "metadata": {"annotations": {"sim.lwsflow.io/load-seconds": "1"}},
                    "spec": {"containers": [{"name": "engine", "image": "vllm:1"}]}}}}}


def policy(name: str) -> dict[str, Any]:
    return {"apiVersion": "lwsflow.io/v1alpha1", "kind": "RolloutPolicy",
            "metadata": {"name": name, "namespace": NS},
            "spec": {"targetRef": {"kind": "LeaderWorkerSet", "name": name},
                     "stages": [{"groups": 1}, {"groups": "100%"}], "progressDeadline": "10m"}}


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, round(q * (len(s) - 1))))]


def wait(pred: Any, timeout: float, what: str, every: float = 0.2) -> float:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if pred():
            return time.monotonic() - t0
        time.sleep(every)
    raise TimeoutError(f"{what}: not within {timeout:.0f}s")


def poller(kubeconfig: str, period_s: float) -> None:
    """The baseline engine (run as ``--poller-child``): every ``period_s`` it lists every policy and
    GETs every target. A target without a stable revision is adopted (its template hash written to
    the policy's status); a target whose template is not the stable one gets one write, where a
    controller would start its rollout. No cache, no watch, no queue: what the informer core replaces."""
    kube = Kube.connect(kubeconfig, qps=1000, burst=1000)
    kube.api.user_agent = CONTROLLER_UA + "poller"
    while True:
        t0 = time.monotonic()
        policies, _ = kube.list(ROLLOUT_POLICY, NS)
        for p in policies:
            target = p["spec"]["targetRef"]["name"]
            try:
                obj = kube.get(LWS, NS, target)
            except NotFound:
                continue
            cur = state.template_hash(state.template_of(obj))
            stable = (p.get("status") or {}).get("stableRevision")
            if not stable:
                kube.merge_patch(ROLLOUT_POLICY, NS, p["metadata"]["name"],
                                 {"status": {"stableRevision": cur}}, subresource="status")
            elif stable != cur and (obj["metadata"].get("annotations") or {}).get(SEEN) != cur:
                kube.merge_patch(LWS, NS, target, {"metadata": {"annotations": {SEEN: cur}}})
        time.sleep(max(0.0, period_s - (time.monotonic() - t0)))


def measure(n: int, engine: str, changes: int, idle_s: float, tmp: Path, speed: float,
            poll_s: float) -> dict[str, Any]:
    reqs = Requests()
    cfg = ClusterConfig(pools=[PoolConfig(name="cpu", count=max(4, n // 50), cpu=256, memory_gi=1024)],
                        timings=Timings(pull_gbps=100.0, image_gb=0.1, cpu_image_gb=0.1,
                                        container_start_s=1.0,
                                        weight_gb=0.0))
    sim = EmbeddedCluster(tmp, cfg, speed=speed, token="bench-token",
                          faults=ApiFaults(request_hook=reqs.hook))
    sim.start()
    kube = Kube.connect(str(sim.kubeconfig), qps=1000, burst=1000)
    kube.api.user_agent = "lwsflow-bench"
    out: dict[str, Any] = {"policies": n, "engine": engine}
    proc = None
    try:
        names = [f"m{i:05d}" for i in range(n)]
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda nm: kube.create(LWS, NS, lws(nm)), names))
            list(pool.map(lambda nm: kube.create(ROLLOUT_POLICY, NS, policy(nm)), names))
        store = sim.store

        def all_rolled() -> bool:
            with store.lock:
                return sum(1 for o in store.iter_raw(LWS_KEY) if gate.lws_fully_rolled(o).passed) >= n
        out["setup_s"] = round(wait(all_rolled, 1800, "LWS ready", every=1.0), 1)
        log = (tmp / f"controller-{engine}.log").open("wb")
        cmd = [str(BIN), "controller", "run", "-n", NS, "--kubeconfig", str(sim.kubeconfig),
               "--metrics-addr", "127.0.0.1:0", "--health-addr", "127.0.0.1:0"]
        if engine == "poller":
            cmd = [sys.executable, __file__, "--poller-child", str(sim.kubeconfig), "--poll", str(poll_s)]
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)

        def adopted() -> bool:
            with store.lock:
                return sum(1 for p in store.iter_raw(POLICY_KEY)
                           if (p.get("status") or {}).get("stableRevision")) >= n
        out["adopted_s"] = round(wait(adopted, 1800, "adoption", every=0.2), 2)
        time.sleep(3.0)  # the last statuses and their watch events settle
        c0, w0 = cpu_s(proc.pid), time.monotonic()
        time.sleep(idle_s)
        c1, w1 = cpu_s(proc.pid), time.monotonic()
        idle = [r for r in reqs.between(w0, w1) if r[1] != "watch"]
        out["idle_req_per_s"] = round(len(idle) / (w1 - w0), 2)
        out["idle_cpu_pct"] = round(100 * (c1 - c0) / (w1 - w0), 1)
        out["rss_mib"] = round(rss_mib(proc.pid), 0)
        # 50 templates synced at once, as Argo CD would: new image, partition frozen at replicas
        targets = names[:: max(1, n // changes)][:changes]
        synced: dict[str, float] = {}

        def sync(name: str) -> None:
            obj = kube.get(LWS, NS, name)
            tmpl = obj["spec"]["leaderWorkerTemplate"]
            tmpl["workerTemplate"]["spec"]["containers"][0]["image"] = "vllm:2"
            kube.merge_patch(LWS, NS, name, {"spec": {"leaderWorkerTemplate": tmpl}})
            synced[name] = time.monotonic()
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(sync, targets))
        start = min(synced.values())

        def first_writes() -> dict[str, float]:
            firsts: dict[str, float] = {}
            for t, verb, res, name in reqs.between(start, time.monotonic() + 1):
                if verb in WRITES and res == "leaderworkersets" and name in synced and name not in firsts \
                        and t >= synced[name] - 0.5:
                    firsts[name] = t
            return firsts
        with contextlib.suppress(TimeoutError):
            wait(lambda: len(first_writes()) >= len(targets), 300, "first writes", every=0.5)
        firsts = first_writes()
        lat = [max(0.0, firsts[nm] - synced[nm]) for nm in targets if nm in firsts]
        out["changed"], out["reacted"] = len(targets), len(lat)
        if lat:
            out["first_write_median_s"] = round(statistics.median(lat), 2)
            out["first_write_p99_s"] = round(pct(lat, 0.99), 2)
    finally:
        if proc is not None:
            proc.terminate()
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
        kube.api.close()
        sim.close()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="100,1000,5000")
    ap.add_argument("--engines", default="poller,informer")
    ap.add_argument("--poller-max", type=int, default=1000, help="largest size the poller baseline is run at")
    ap.add_argument("--poll", type=float, default=2.0, help="the poller's pass period (seconds)")
    ap.add_argument("--changes", type=int, default=50)
    ap.add_argument("--idle", type=float, default=20.0)
    ap.add_argument("--speed", type=float, default=1.0, help="cluster seconds per wall second")
    ap.add_argument("--json", default="")
    ap.add_argument("--poller-child", default="", help=argparse.SUPPRESS)  # KUBECONFIG: be the poller
    args = ap.parse_args()
    if args.poller_child:
        poller(args.poller_child, args.poll)
        return 0
    engines = args.engines.split(",")
    for engine in engines:
        if engine not in ("poller", "informer"):
            print(f"--engines: {engine!r}: want poller or informer", file=sys.stderr)
            return 2
    rows: list[dict[str, Any]] = []
    print("| policies | engine | adopted s | idle req/s | idle CPU % | RSS MiB "
          "| change -> first write median / p99 s |")
    print("|---|---|---|---|---|---|---|")
    for n in (int(x) for x in args.sizes.split(",")):
        for engine in engines:
            if engine == "poller" and n > args.poller_max:
                print(f"| {n:,} | poller | skipped: one pass lists {n:,} policies and GETs {n:,} targets, "
                      f"above --poller-max {args.poller_max:,} | | | | |", flush=True)
                continue
            with tempfile.TemporaryDirectory(prefix="ctlscale-") as d:
                r = measure(n, engine, args.changes, args.idle, Path(d), args.speed, args.poll)
            rows.append(r)
            lat = (f"{r['first_write_median_s']} / {r['first_write_p99_s']}"
                   if "first_write_p99_s" in r else "-")
            if r.get("reacted", 0) < r.get("changed", 0):
                lat += f" ({r['reacted']}/{r['changed']} reacted within 300 s)"
            print(f"| {n:,} | {engine} | {r['adopted_s']} | {r['idle_req_per_s']} | {r['idle_cpu_pct']} | "
                  f"{r['rss_mib']:.0f} | {lat} |", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
