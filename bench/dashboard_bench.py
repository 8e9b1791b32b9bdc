"""`lwsflow dashboard` over a 1,000-policy namespace: how long its overview takes to open, and how
soon a change reaches an open page.

Run: ``.venv/bin/python bench/dashboard_bench.py [--policies 1000] [--runs 10]``. Starts the embedded
cluster (HTTPS, token), creates the policies (a tenth of them mid-rollout, a few failed, so the order
matters) and the dashboard with the cluster's kubeconfig, then prints:

- cold open: from starting the dashboard (kubeconfig, list of every kind, first watch) to the first
  full overview page received over HTTP;
- open: the median and worst of ``--runs`` full overview pages (what a browser asks for: HTML with
  every row) once the cache is filled;
- live: the median and worst time from a status write's API answer to the server-sent event that
  carries it to an open overview page (the watch, the cache, a render, the stream).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from lwsflow.controller.kube.client import Kube  # noqa: E402
from lwsflow.controller.kube.resources import ROLLOUT_POLICY  # noqa: E402
from lwsflow.dashboard import serve  # noqa: E402
from lwsflow.sim.testing import EmbeddedCluster  # noqa: E402

NS = "bench"


def _status(i: int) -> dict:
    if i % 100 == 7:
        return {"phase": "Failed", "message": "stage 2 gate: deadline", "stages": 3, "currentStage": 0}
    if i % 10 == 3:
        return {"phase": "Progressing", "stages": 3, "currentStage": 2, "stageText": "2/3",
                "stableRevision": f"{i:016x}", "canaryRevision": f"{i + 1:016x}"}
    return {"phase": "Succeeded", "stages": 3, "currentStage": 0, "stableRevision": f"{i:016x}"}


def _fill(kube: Kube, n: int) -> None:
    kube.request("POST", "/api/v1/namespaces", body={"metadata": {"name": NS}})
    for i in range(n):
        name = f"model-{i:04d}"
        kube.create(ROLLOUT_POLICY, NS, {
            "apiVersion": "lwsflow.io/v1alpha1", "kind": "RolloutPolicy",
            "metadata": {"name": name, "namespace": NS},
            "spec": {"targetRef": {"kind": "LeaderWorkerSet", "name": name},
                     "stages": [{"groups": 1}, {"groups": "50%"}, {"groups": "100%", "pause": {}}]}})
        kube.merge_patch(ROLLOUT_POLICY, NS, name, {"status": _status(i)}, subresource="status")


def _live(url: str, kube: Kube, runs: int) -> list[float]:
    """Seconds from each status write's answer to the SSE event showing it."""
    seen: list[tuple[float, str]] = []
    ready = threading.Event()

    def read() -> None:
        with httpx.stream("GET", url + "sse/overview", timeout=60) as s:
            for line in s.iter_lines():
                if line.startswith("event: update"):
                    ready.set()
                if line.startswith("data: ") and "bench-live-" in line:
                    seen.append((time.perf_counter(), line))

    threading.Thread(target=read, daemon=True).start()
    assert ready.wait(30), "no first event"
    out = []
    for k in range(runs):
        mark = f"bench-live-{k}"
        t0 = time.perf_counter()
        kube.merge_patch(ROLLOUT_POLICY, NS, "model-0001", {"status": {"message": mark}},
                         subresource="status")
        t1 = time.perf_counter()
        end = t1 + 10
        while time.perf_counter() < end:
            hit = next((t for t, line in seen if mark in line), None)
            if hit is not None:
                out.append(hit - t1)
                break
            time.sleep(0.002)
        else:
            raise SystemExit(f"live: {mark} never reached the page")
        time.sleep(max(0.0, 0.15 - (time.perf_counter() - t0)))  # past the per-page 10/s limit
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--policies", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=10)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d, EmbeddedCluster(d) as sim:
        kube = Kube.connect(str(sim.kubeconfig))
        t = time.perf_counter()
        _fill(kube, args.policies)
        print(f"setup: {args.policies} RolloutPolicies in namespace {NS} ({time.perf_counter() - t:.1f}s)")
        http = httpx.Client(timeout=60)  # made before the clock starts: a browser has its own already
        t0 = time.perf_counter()
        dash = serve(str(sim.kubeconfig), NS)
        try:
            first = http.get(dash.url)
            cold = time.perf_counter() - t0
            rows = first.text.count("data-policy=")
            assert first.status_code == 200 and rows == args.policies, (first.status_code, rows)
            times = []
            for _ in range(args.runs):
                t = time.perf_counter()
                page = http.get(dash.url)
                times.append(time.perf_counter() - t)
                assert page.text.count("data-policy=") == args.policies
            size = len(page.content)
            live = _live(dash.url, kube, args.runs)
        finally:
            dash.stop()
            http.close()
    print(f"cold open: {cold:.3f}s (dashboard start, list, first overview of {rows} rows)")
    print(f"open: median {statistics.median(times):.3f}s, worst {max(times):.3f}s over {args.runs} full "
          f"overview pages ({size / 1024:.0f} KiB each)")
    print(f"live: median {statistics.median(live) * 1000:.0f}ms, worst {max(live) * 1000:.0f}ms from a "
          f"status write to the server-sent event on an open overview ({args.runs} writes)")


if __name__ == "__main__":
    main()
