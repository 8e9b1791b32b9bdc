"""Rollout controller benchmark on the embedded cluster (issue 4).

32 groups x size 2 with a 10-minute model load, stages 1,25%,50%,100%. Prints:

* the controller's makespan (over HTTP, real client; the cluster runs in real time at ``--speed`` in
  its own process, so it never shares the controller's interpreter) against the
  lower bound for the same stages and budgets: LWS alone moved through the same partitions by a
  zero-latency oracle in pure virtual time;
* LWS's own rolling update of the same change (no stages) for comparison;
* reaction latency per stage (ground truth from the store: the cluster time the stage gate became
  true -> the cluster time the next partition was written; target <= 1 s virtual), and the
  controller's own measure;
* API requests per stage.

    .venv/bin/python bench/rollout_bench.py [--replicas 32] [--size 2] [--load 600] [--speed 100]
        [--max-unavailable 4] [--max-surge 0] [--json FILE]
"""

from __future__ import annotations

import argparse
import copy
import json
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lwsflow.controller.api import labels as L
from lwsflow.controller.kube.client import Kube
from lwsflow.controller.rollout import gate, session
from lwsflow.controller.rollout.engine import LwsRollout, RolloutOptions
from lwsflow.controller.rollout.stages import partition_for, resolve_stages
from lwsflow.sim.apiserver import ApiServer
from lwsflow.sim.cluster import Cluster
from lwsflow.sim.config import ClusterConfig, PoolConfig, Timings
from lwsflow.sim.store import Event

KEY = "leaderworkersets.leaderworkerset.x-k8s.io"
NS, NAME, STAGES = "default", "bench", "1,25%,50%,100%"


def config() -> ClusterConfig:
    return ClusterConfig(pools=[PoolConfig(name="cpu", count=32, cpu=512, memory_gi=4096)],
                         timings=Timings(pull_gbps=1.0, image_gb=10.0, cpu_image_gb=10.0,
                                         container_start_s=5.0, weight_gb=0.0))


def manifest(a: argparse.Namespace, image: str) -> dict:
    return {"apiVersion": L.LWS_API_VERSION, "kind": L.LWS_KIND,
            "metadata": {"name": NAME, "namespace": NS},
            "spec": {"replicas": a.replicas, "rolloutStrategy": {
                "type": "RollingUpdate", "rollingUpdateConfiguration": {
                    "maxUnavailable": a.max_unavailable, "maxSurge": a.max_surge}},
                "leaderWorkerTemplate": {"size": a.size, "workerTemplate": {
                    "metadata": {"annotations": {"sim.lwsflow.io/load-seconds": str(a.load)}},
                    "spec": {"containers": [{"name": "engine", "image": image}]}}}}}


def _lws(c: Cluster) -> dict:
    return c.store.get(KEY, NS, NAME)


def _ready_cluster(a: argparse.Namespace) -> Cluster:
    c = Cluster(config())
    c.store.create(KEY, manifest(a, "vllm:1"))
    c.run_until(lambda cl: gate.lws_fully_rolled(_lws(cl)).passed, timeout_virtual=10 * 3600)
    return c


def _set_template(c: Cluster, a: argparse.Namespace, partition: int) -> None:
    new = manifest(a, "vllm:2")["spec"]["leaderWorkerTemplate"]

    def edit(o: dict) -> None:
        o["spec"]["leaderWorkerTemplate"] = copy.deepcopy(new)
        o["spec"]["rolloutStrategy"]["rollingUpdateConfiguration"]["partition"] = partition
    c.store.mutate(KEY, NS, NAME, edit)


def _set_partition(c: Cluster, partition: int) -> None:
    def edit(o: dict) -> None:
        o["spec"]["rolloutStrategy"]["rollingUpdateConfiguration"]["partition"] = partition
    c.store.mutate(KEY, NS, NAME, edit)


def oracle_lower_bound(a: argparse.Namespace) -> dict[str, Any]:
    """LWS alone through the same partitions, each lowered the instant the previous stage passed."""
    c = _ready_cluster(a)
    targets = resolve_stages(STAGES, a.replicas)
    t0 = c.now()
    _set_template(c, a, a.replicas)
    ends = []
    for t in targets:
        _set_partition(c, partition_for(t, a.replicas))
        c.run_until(lambda cl, t=t: gate.lws_stage_gate(_lws(cl), t).passed, timeout_virtual=10 * 3600)
        ends.append(round(c.now() - t0, 1))
    return {"makespan_s": round(c.now() - t0, 1), "stage_ends_s": ends}


def lws_own_rolling_update(a: argparse.Namespace) -> dict[str, Any]:
    """The same change applied with partition 0: LWS's own rolling update, no stages."""
    c = _ready_cluster(a)
    t0 = c.now()
    _set_template(c, a, 0)
    c.run_until(lambda cl: gate.lws_fully_rolled(_lws(cl)).passed, timeout_virtual=10 * 3600)
    return {"makespan_s": round(c.now() - t0, 1)}


class GroundTruth:
    """Store subscriber: when each stage's gate became true and when each partition was written."""

    def __init__(self, cluster: Cluster, targets: list[int], replicas: int) -> None:
        self.c, self.targets, self.replicas = cluster, targets, replicas
        self.gate_true: dict[int, float] = {}
        self.partition_at: dict[int, float] = {}
        self.lock = threading.Lock()

    def __call__(self, ev: Event) -> None:
        if ev.key != KEY or ev.type == "DELETED" or ev.object["metadata"]["name"] != NAME:
            return
        obj, now = ev.object, self.c.now()
        with self.lock:
            p = gate.partition(obj)
            self.partition_at.setdefault(p, now)
            for k, t in enumerate(self.targets):
                if (k not in self.gate_true and p == partition_for(t, self.replicas)
                        and gate.lws_stage_gate(obj, t).passed):
                    self.gate_true[k] = now


def serve(a: argparse.Namespace, workdir: Path) -> int:
    """The cluster side, in its own process (so the simulator never competes with the controller
    for one interpreter's GIL): serve the ready cluster, record the ground truth, write it on stop."""
    c = _ready_cluster(a)
    targets = resolve_stages(STAGES, a.replicas)
    truth = GroundTruth(c, targets, a.replicas)
    c.store.subscribe(truth)
    api = ApiServer(c.store, token="bench-token", clock=c.now, speed=a.speed)
    api.start()
    # headers and body go out in two sends; without this, Nagle + delayed ACK add ~40 ms a request
    api._httpd.RequestHandlerClass.disable_nagle_algorithm = True  # type: ignore[union-attr]
    c.start_realtime(a.speed)
    api.write_kubeconfig(workdir / "kubeconfig")
    (workdir / "ready").touch()
    end = time.monotonic() + 4 * 3600
    while not (workdir / "stop").exists() and time.monotonic() < end:
        time.sleep(0.05)
    c.stop()
    api.stop()
    with truth.lock:
        doc = {"gate_true": truth.gate_true, "partition_at": truth.partition_at}
    (workdir / "truth.json").write_text(json.dumps(doc))
    return 0


def controller_run(a: argparse.Namespace) -> dict[str, Any]:
    targets = resolve_stages(STAGES, a.replicas)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        argv = [sys.executable, __file__, "--serve", str(work), "--replicas", str(a.replicas),
                "--size", str(a.size), "--load", str(a.load), "--speed", str(a.speed),
                "--max-unavailable", str(a.max_unavailable), "--max-surge", str(a.max_surge)]
        proc = subprocess.Popen(argv)
        try:
            end = time.monotonic() + 600
            while not (work / "ready").exists():
                if proc.poll() is not None or time.monotonic() > end:
                    raise RuntimeError("the cluster process did not come up")
                time.sleep(0.05)
            kube = Kube.connect(str(work / "kubeconfig"))
            clock = session.clock_for(kube)
            t_wall = time.monotonic()
            out = LwsRollout(kube, NS, NAME, RolloutOptions(stages=STAGES, deadline_s=4 * 3600),
                             clock, manifest=manifest(a, "vllm:2")).run()
            wall = time.monotonic() - t_wall
            (work / "stop").touch()
            proc.wait(60)
            doc = json.loads((work / "truth.json").read_text())
        finally:
            if proc.poll() is None:
                proc.terminate()
                proc.wait(10)
    gate_true = {int(k): v for k, v in doc["gate_true"].items()}
    partition_at = {int(k): v for k, v in doc["partition_at"].items()}
    r = out.report
    reaction = []
    for k in range(len(targets) - 1):
        nxt = partition_for(targets[k + 1], a.replicas)
        if k in gate_true and nxt in partition_at:
            reaction.append(round(partition_at[nxt] - gate_true[k], 3))
    first_write = partition_at.get(a.replicas, r.started or 0.0)
    done = gate_true.get(len(targets) - 1, r.ended or 0.0)
    return {"result": out.result, "makespan_s": round(done - first_write, 1), "wall_s": round(wall, 1),
            "reaction_truth_s": reaction, "reaction_controller_s": [s.reaction_s for s in r.stages[:-1]],
            "api_requests_per_stage": [s.api_requests for s in r.stages],
            "api_requests_total": r.api_requests, "min_ready_groups": r.min_ready_groups,
            "floor": r.floor}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--replicas", type=int, default=32)
    ap.add_argument("--size", type=int, default=2)
    ap.add_argument("--load", type=int, default=600, help="model load, virtual seconds")
    ap.add_argument("--speed", type=float, default=100.0, help="virtual seconds per wall second")
    ap.add_argument("--max-unavailable", type=int, default=4)
    ap.add_argument("--max-surge", type=int, default=0)
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--serve", type=Path, default=None, help=argparse.SUPPRESS)  # the cluster process
    a = ap.parse_args()
    if a.serve is not None:
        return serve(a, a.serve)
    res = {"config": {"replicas": a.replicas, "size": a.size, "load_s": a.load, "speed": a.speed,
                      "maxUnavailable": a.max_unavailable, "maxSurge": a.max_surge, "stages": STAGES},
           "lower_bound": oracle_lower_bound(a), "lws_rolling_update": lws_own_rolling_update(a),
           "controller": controller_run(a)}
    lb, ctl = res["lower_bound"]["makespan_s"], res["controller"]["makespan_s"]
    res["overhead_vs_lower_bound"] = round(ctl / lb - 1, 4) if lb else None
    cfg, own = res["config"], res["lws_rolling_update"]["makespan_s"]
    print(f"rollout bench: {cfg['replicas']} groups x {cfg['size']}, load {cfg['load_s']}s, stages {STAGES}, "
          f"maxUnavailable {cfg['maxUnavailable']}, maxSurge {cfg['maxSurge']}, speed x{cfg['speed']:g}")
    print(f"  LWS own rolling update (no stages):   {own:8.1f} s virtual")
    print(f"  lower bound (same stages, oracle):    {lb:8.1f} s virtual  stage ends "
          f"{res['lower_bound']['stage_ends_s']}")
    over = res["overhead_vs_lower_bound"]
    print(f"  controller over HTTP:                 {ctl:8.1f} s virtual  ({over:+.2%} vs lower bound; "
          f"{res['controller']['wall_s']} s wall; {res['controller']['result']})")
    print(f"  reaction gate->next stage (truth):    {res['controller']['reaction_truth_s']} s virtual "
          "(target <= 1 s)")
    print(f"  reaction (controller's own measure):  {res['controller']['reaction_controller_s']} s")
    print(f"  API requests per stage:               {res['controller']['api_requests_per_stage']} "
          f"(total {res['controller']['api_requests_total']})")
    print(f"  min ready groups / floor:             {res['controller']['min_ready_groups']} / "
          f"{res['controller']['floor']}")
    if a.json:
        a.json.write_text(json.dumps(res, indent=2) + "\n")
    return 0 if res["controller"]["result"] == "succeeded" else 1


if __name__ == "__main__":
    raise SystemExit(main())
