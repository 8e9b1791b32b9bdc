"""A rollout under tight Kueue quota (issue 33, item 7): lwsflow's plan against a naive ``maxSurge``
rollout, side by side in one run on the reference cluster with real Kueue (``refcluster up --kueue``).

The workload: an LWS of 4 groups, one 8-GPU pod each, labelled for a LocalQueue whose ClusterQueue has
exactly 32 GPUs, so all of it is held by the running groups and none is left for a surge group. The
release (a new image) asks for ``maxSurge: 1, maxUnavailable: 0``, the usual zero-downtime setting.

- **naive**: ``kubectl apply`` of the release, the LWS controller rolling on its own. Its surge group
  gets a Workload that cannot be admitted: its pod stays gated, no old group is replaced (none may be
  unavailable), and the rollout stalls. Measured for ``--limit`` seconds.
- **lwsflow**: ``lwsflow rollout --manifest ... --on-quota-shortage inPlace`` on a copy in its own
  namespace and ClusterQueue: the preflight reads the quota, finds no room for the surge group and
  rolls in place (``maxSurge 0``, one group down at a time), so no new Workload needs admission.

For each: whether it completed (all groups updated and Ready at ``spec.replicas``), the time to that,
the groups updated at the end, the peak GPUs the ClusterQueue had reserved (sampled every 0.2 s) and
the surge pods left gated.

    .venv/bin/python bench/kueue_quota_bench.py [--limit 120]

Needs ``scripts/build-refcluster`` (with Kueue); without it, it says so and exits 0.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lwsflow.components.kustomize import kubectl_path
from lwsflow.controller.api import labels as L
from lwsflow.rehearsal.refcluster import binaries, launcher

GPU = L.GPU_RESOURCE
KUEUE = "kueue.x-k8s.io/v1beta2"
GROUPS, GPUS = 4, 8


def _lws(image: str, surge: int) -> dict[str, Any]:
    pod = {"tolerations": [{"key": GPU, "operator": "Exists", "effect": "NoSchedule"}],
           "containers": [{"name": "engine", "image": image, "resources": {"limits": {GPU: GPUS}}}]}
    return {"apiVersion": L.LWS_API_VERSION, "kind": L.LWS_KIND,
            "metadata": {"name": "q", "labels": {L.KUEUE_QUEUE: "serving"}},
            "spec": {"replicas": GROUPS,
                     "rolloutStrategy": {"type": "RollingUpdate", "rollingUpdateConfiguration": {
                         "maxSurge": surge, "maxUnavailable": 0 if surge else 1}},
                     "leaderWorkerTemplate": {"size": 1, "workerTemplate": {"spec": pod}}}}


def _quota(ns: str) -> list[dict[str, Any]]:
    return [{"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": "h100"}, "spec": {}},
            {"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": f"cq-{ns}"},
             "spec": {"namespaceSelector": {}, "resourceGroups": [{"coveredResources": [GPU], "flavors": [
                 {"name": "h100", "resources": [{"name": GPU, "nominalQuota": GROUPS * GPUS}]}]}]}},
            {"apiVersion": KUEUE, "kind": "LocalQueue", "metadata": {"name": "serving", "namespace": ns},
             "spec": {"clusterQueue": f"cq-{ns}"}}]


class Cluster:
    def __init__(self, kubeconfig: Path) -> None:
        self.kubeconfig = kubeconfig

    def kubectl(self, *args: str, stdin: str | None = None) -> str:
        out = subprocess.run([str(kubectl_path()), "--kubeconfig", str(self.kubeconfig), *args], input=stdin,
                             capture_output=True, text=True, timeout=60, check=True)
        return out.stdout

    def get(self, *args: str) -> dict[str, Any]:
        return dict(json.loads(self.kubectl("get", *args, "-o", "json")))

    def apply(self, docs: list[dict[str, Any]], ns: str = "") -> None:
        self.kubectl("apply", *(["-n", ns] if ns else []), "-f", "-",
                     stdin="\n---\n".join(json.dumps(d) for d in docs))

    def done(self, ns: str, image: str) -> tuple[bool, int]:
        """(all groups on ``image``, Ready, nothing beyond spec.replicas; groups updated)."""
        lws = self.get("lws", "q", "-n", ns)
        st = lws.get("status") or {}
        on = lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]["image"] == image
        updated = int(st.get("updatedReplicas") or 0)
        ok = on and GROUPS == st.get("replicas") == st.get("readyReplicas") == updated
        return ok, updated

    def reserved(self, ns: str) -> int:
        cq = self.get("clusterqueue", f"cq-{ns}")
        return sum(int(r.get("total") or 0) for fl in (cq.get("status") or {}).get("flavorsReservation") or []
                   for r in fl.get("resources") or [] if r["name"] == GPU)

    def gated_surge(self, ns: str) -> int:
        pods = self.get("pods", "-n", ns, "-l", f"{L.NAME}=q")["items"]
        return sum(1 for p in pods if int(p["metadata"]["labels"].get(L.GROUP_INDEX, 0)) >= GROUPS
                   and (p["spec"].get("schedulingGates") or []))


@dataclass
class Result:
    name: str
    completed_s: float | None = None
    updated: int = 0
    peak: int = 0
    gated: int = 0
    samples: list[int] = field(default_factory=list)


def _sample(c: Cluster, ns: str, res: Result, stop: threading.Event) -> None:
    while not stop.is_set():
        with contextlib.suppress(subprocess.CalledProcessError):
            res.samples.append(c.reserved(ns))
        stop.wait(0.2)


def _setup(c: Cluster, ns: str) -> None:
    c.kubectl("create", "namespace", ns)
    c.apply(_quota(ns))
    c.apply([_lws("engine:v1", 1)], ns)
    deadline = time.monotonic() + 180
    while not c.done(ns, "engine:v1")[0]:
        if time.monotonic() > deadline:
            raise SystemExit(f"{ns}: the first release never got Ready under Kueue")
        time.sleep(0.5)


def _measure(c: Cluster, ns: str, name: str, start: Any, limit: float) -> Result:
    res, stop = Result(name), threading.Event()
    sampler = threading.Thread(target=_sample, args=(c, ns, res, stop), daemon=True)
    sampler.start()
    t0 = time.monotonic()
    proc = start()
    while time.monotonic() - t0 < limit:
        ok, res.updated = c.done(ns, "engine:v2")
        if ok:
            res.completed_s = time.monotonic() - t0
            break
        time.sleep(0.2)
    if proc is not None:
        proc.wait(timeout=60)
    stop.set()
    sampler.join(5)
    res.peak, res.gated = max(res.samples, default=0), c.gated_surge(ns)
    return res


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--limit", type=float, default=120.0, help="seconds each rollout is given")
    args = ap.parse_args()
    if binaries.missing(kueue=True):
        gone = ", ".join(binaries.missing(kueue=True))
        print(f"kueue bench: reference cluster not built ({gone} missing); run scripts/build-refcluster")
        return 0
    with tempfile.TemporaryDirectory(prefix="lwsflow-kueue-bench-") as d:
        state = Path(d) / "state"
        kubeconfig = launcher.up(launcher.UpOptions(state_dir=state, ready_delay_s=1.0, kueue=True))
        try:
            c = Cluster(kubeconfig)
            for ns in ("naive", "lwsflow"):
                _setup(c, ns)
            release = Path(d) / "release.json"
            release.write_text(json.dumps(_lws("engine:v2", 1)))

            def naive() -> None:
                c.apply([_lws("engine:v2", 1)], "naive")

            def planned() -> subprocess.Popen[str]:
                return subprocess.Popen(
                    [str(Path(sys.executable).parent / "lwsflow"), "rollout", "lws/q", "-n", "lwsflow",
                     "--kubeconfig", str(kubeconfig),
                     "--manifest", str(release), "--stages", "100%", "--deadline", f"{int(args.limit)}s",
                     "--on-quota-shortage", "inPlace"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                    text=True)

            results = [_measure(c, "naive", "naive kubectl apply (maxSurge 1)", naive, args.limit),
                       _measure(c, "lwsflow", "lwsflow rollout --on-quota-shortage inPlace", planned,
                                args.limit)]
        finally:
            launcher.down(state)
    print(f"{GROUPS} groups x {GPUS} {GPU}, ClusterQueue nominal {GROUPS * GPUS} (none free), release asks "
          f"maxSurge 1 / maxUnavailable 0; each given {args.limit:g} s (real Kueue v0.17.0):")
    for r in results:
        done = f"completed in {r.completed_s:.1f} s" if r.completed_s is not None else \
            f"NOT completed in {args.limit:g} s"
        print(f"  {r.name:46} {done}; {r.updated}/{GROUPS} groups updated; peak quota reserved "
              f"{r.peak}/{GROUPS * GPUS} {GPU}; surge pods gated at the end: {r.gated}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
