"""Reference cluster figures: warm start (``lwsflow refcluster up``, binaries built), a first
LeaderWorkerSet to all pods Ready, and stop. Target: start under 30 s (docs/reference-cluster.md).

Usage: ``.venv/bin/python bench/refcluster_bench.py [RUNS]`` (default 3). Needs scripts/build-refcluster
to have run; otherwise it says so and exits 0 (the figures are then not measured).
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from lwsflow.components.kustomize import kubectl_path
from lwsflow.rehearsal.refcluster import binaries, launcher

LWS = """{"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet", "metadata": {"name": "b"},
 "spec": {"replicas": 4, "leaderWorkerTemplate": {"size": 4, "workerTemplate": {"spec": {"containers": [
 {"name": "c", "image": "engine:v1"}]}}}}}"""


def _ready_pods(kubeconfig: Path) -> int:
    out = subprocess.run([str(kubectl_path()), "--kubeconfig", str(kubeconfig), "get", "pods", "-o", "json"],
                         capture_output=True, text=True, check=True, timeout=30)
    pods = json.loads(out.stdout)["items"]
    return sum(any(c["type"] == "Ready" and c["status"] == "True"
                   for c in p["status"].get("conditions") or []) for p in pods)


def main(runs: int) -> int:
    if binaries.missing():
        gone = ", ".join(binaries.missing())
        print(f"refcluster: not built ({gone} missing); run scripts/build-refcluster")
        return 0
    starts, firsts, stops = [], [], []
    for _ in range(runs):
        with tempfile.TemporaryDirectory(prefix="lwsflow-refbench-") as d:
            state = Path(d) / "state"
            t0 = time.perf_counter()
            kubeconfig = launcher.up(launcher.UpOptions(state_dir=state, ready_delay_s=1.0))
            starts.append(time.perf_counter() - t0)
            t1 = time.perf_counter()
            subprocess.run([str(kubectl_path()), "--kubeconfig", str(kubeconfig), "apply", "-f", "-"],
                           input=LWS, text=True, capture_output=True, check=True, timeout=30)
            while _ready_pods(kubeconfig) < 16:
                if time.perf_counter() - t1 > 120:
                    raise SystemExit("16 pods not Ready in 120 s")
                time.sleep(0.2)
            firsts.append(time.perf_counter() - t1)
            t2 = time.perf_counter()
            launcher.down(state)
            stops.append(time.perf_counter() - t2)
    print(f"refcluster up (warm):          median {statistics.median(starts):5.1f} s  "
          f"(runs: {', '.join(f'{s:.1f}' for s in starts)}; target < 30 s)")
    print(f"4x4 LWS to 16 pods Ready:      median {statistics.median(firsts):5.1f} s  (ready delay 1 s)")
    print(f"refcluster down:               median {statistics.median(stops):5.1f} s")
    size = sum(f.stat().st_size for f in binaries.bin_dir().iterdir() if f.is_file())
    print(f"binaries: {size / 2**20:.0f} MiB in {binaries.bin_dir()}")
    return 0


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 3))
