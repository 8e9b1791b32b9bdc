"""Analysis benchmark: does the analysis gate pass good releases and stop bad ones, and how fast?

``--power`` runs the power curve instead (``analysis_power.py``: per effect size, traffic level and
timescale, in virtual time with the product's decision code); without it, the real-Prometheus
end-to-end spot check below.

Over seeded runs it prints:

* **good releases wrongly failed** (target 0 of 50): a candidate with the stable profile;
* **bad releases that got through** (target 0 of 50 each), four kinds: ``slower`` (TTFT 40% slower
  at median and p95), ``errors`` (5% of requests answer 500), ``kv`` (P/D: 5% of the decode's KV
  pulls fail, as a NIXL transfer would), ``degrading`` (as fast as stable at start, 4% slower per
  second of uptime: 10% after 2.5 s, doubled after 25 s);
* the **time from the bad revision's first served request to the rollback decision** (the failing
  measurement), median and spread, per kind.

What one run covers: the measurement and verdict layer exactly as a rollout stage runs it, against a
real Prometheus (Debian's 2.42, scraping every second through a ``file_sd`` target file, as
``--prometheus local`` does). The candidate's and the stable revision's stand-in engines, each in its
own process, serve the profiles on loopback under seeded OpenAI traffic (``components.loadgen``; P/D
runs prefill→decode hand-offs, up to 8 at once). Their targets carry the revision labels the templates
select on; the hook's wait for two scrapes of every new target (``Prometheus.wait_for_targets``) comes
first, then ``run_analysis`` with the built-in ``vllm`` / ``vllm-pd`` template at a shorter timescale
(window 10 s, a measurement every 2 s, 19 of them, failureLimit 1, inconclusiveLimit 1; counts over
``[{{elapsed}}]``, so the evidence accumulates over the analysis). What it does
not cover: the embedded cluster's rollout around it (gate, partition, rollback; ``tests/analysis``
runs those end to end); a full rollout per run would take ~45 s, 250 of them too long for a 2-core machine.

    nice -n 19 .venv/bin/python bench/analysis_bench.py [--runs 50] [--parallel 2] [--seed 0]
        [--json FILE] [--start N]

``--start N`` runs only the runs N.. of the seed, so two processes can share one seed's runs; their
printed lines, concatenated, give the figures with ``--summarize``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import re
import signal
import statistics
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lwsflow.components.loadgen import LoadGenerator, LoadSpec
from lwsflow.components.prometheus import Prometheus, start_prometheus
from lwsflow.controller.analysis.run import provider_measure, run_analysis
from lwsflow.controller.analysis.spec import validate_spec
from lwsflow.controller.analysis.templates import vllm

KINDS = ("good", "slower", "errors", "kv", "degrading")
STABLE = {"ttft_s": 0.045, "ttft_p95_s": 0.060, "itl_s": 0.010, "itl_p95_s": 0.014}
CANDIDATE: dict[str, dict[str, float]] = {
    "good": dict(STABLE),
    "slower": {**STABLE, "ttft_s": 0.063, "ttft_p95_s": 0.084},
    "errors": {**STABLE, "error_ratio": 0.05},
    "kv": {**STABLE, "kv_failure_ratio": 0.05},
    "degrading": {**STABLE, "slowdown_per_min": 2.4},
}
RATE = 10.0  # requests per second per revision
# the templates' 30 s / 30 s / 4 at a shorter timescale: 10 s windows, a measurement every 2 s; the
# counts accumulate from one window before the analysis ({{elapsed}}). failureLimit 1 needs two failed
# measurements, the second one interval after the evidence first suffices: 13 measurements (~300
# requests per revision at the last) let ~3.5% of 5% faults through (errors seed 47), 19 (~420) ~0.2%
# (tests/analysis/unit/test_stats.py::test_error_analysis_power_by_length)
WINDOW_S, INTERVAL_S, COUNT = 10, 2, 19
MODEL = "m"
_PREFILL = {"do_remote_decode": True, "do_remote_prefill": False, "remote_engine_id": None,
            "remote_block_ids": None, "remote_host": None, "remote_port": None}


def spec(pd: bool) -> Any:
    doc = vllm(pd=pd)
    for m in doc["metrics"]:
        m.update(interval=f"{INTERVAL_S}s", count=COUNT, initialDelay="0s", failureLimit=1,
                 inconclusiveLimit=1)
    doc["window"] = f"{WINDOW_S}s"
    return validate_spec(doc)


class Targets:
    """The shared file_sd file: every concurrent run's targets."""

    def __init__(self, prom: Prometheus) -> None:
        self.prom, self.groups, self.lock = prom, {}, threading.Lock()  # type: dict[str, list[dict]]

    def set(self, run: str, groups: list[dict[str, Any]]) -> None:
        with self.lock:
            self.groups[run] = groups
            self.prom.set_targets([g for gs in self.groups.values() for g in gs])


_ENGINE_MAIN = (
    "import json, sys, threading\n"
    "from lwsflow.sim.engine import start_engine\n"
    "h = start_engine(**json.loads(sys.argv[1]))\n"
    "print(h.port, flush=True)\n"
    "sys.stdin.read()\n"  # until the bench closes our stdin
    "h.stop()\n")


class Engine:
    """A stand-in engine in its own process (as a pod's engine is), so the bench's own threads (load,
    Prometheus queries) do not share its interpreter lock and distort its latencies. ``started()``
    waits for its port, so that a run's engines start side by side."""

    def __init__(self, **options: Any) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", _ENGINE_MAIN, json.dumps(options)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.port, self.url = 0, ""

    def started(self) -> Engine:
        assert self.proc.stdout is not None
        self.port = int(self.proc.stdout.readline())
        self.url = f"http://127.0.0.1:{self.port}"
        return self

    def served(self) -> float:
        """Requests this engine finished (its /metrics)."""
        text = httpx.get(f"{self.url}/metrics", timeout=5).text
        return sum(float(line.split()[-1]) for line in text.splitlines()
                   if line.startswith("vllm:e2e_request_latency_seconds_count"))

    def stop(self) -> None:
        with contextlib.suppress(OSError):
            assert self.proc.stdin is not None
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def _group(eng: Engine, lws: str, revision: str, role: str) -> dict[str, Any]:
    return {"targets": [f"127.0.0.1:{eng.port}"], "labels": {
        "lws": lws, "role": role, "revision": revision, "group": "0", "namespace": "bench",
        "pod": f"{lws}-{revision}-{role}"}}


class PdTraffic:
    """Poisson-paced prefill→decode hand-offs against one revision's pair, several at once (a router
    serves requests side by side), so the pair gets its rate however long one hand-off takes."""

    def __init__(self, prefill: Engine, decode: Engine, rate: float, seed: int) -> None:
        self.p, self.d, self.rate, self.rng = prefill, decode, rate, random.Random(seed)
        self.stop_ev = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def _one(self, client: httpx.Client, max_tokens: int) -> None:
        try:
            r = client.post(f"{self.p.url}/v1/completions", json={
                "model": MODEL, "prompt": "the cache", "max_tokens": 1, "kv_transfer_params": dict(_PREFILL)})
            params = r.json().get("kv_transfer_params") if r.status_code == 200 else None
            if params:  # streamed, as a router streams to clients: ITL is observed per streamed token
                with client.stream("POST", f"{self.d.url}/v1/completions", json={
                        "model": MODEL, "prompt": "the cache", "max_tokens": max_tokens,
                        "stream": True, "kv_transfer_params": params}) as resp:
                    for _ in resp.iter_lines():
                        pass
        except httpx.HTTPError:
            pass

    def _loop(self) -> None:
        with httpx.Client(timeout=10, limits=httpx.Limits(max_connections=8)) as client, \
                ThreadPoolExecutor(8) as pool:
            while not self.stop_ev.wait(self.rng.expovariate(self.rate)):
                pool.submit(self._one, client, self.rng.randint(2, 6))

    def __enter__(self) -> PdTraffic:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop_ev.set()
        self.thread.join(timeout=15)


def _first_served(eng: Engine, timeout: float = 10.0) -> float:
    """Time of the engine's first finished request (its /metrics, polled every 20 ms)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if eng.served() > 0:
            return time.monotonic()
        time.sleep(0.02)
    return time.monotonic()


@dataclass
class RunResult:
    kind: str
    seed: int
    phase: str
    decision_s: float | None  # first served request -> the failing measurement (bad kinds)
    metrics: dict[str, Any] = field(default_factory=dict)
    wall_s: float = 0.0


def one_run(kind: str, seed: int, prom: Prometheus, targets: Targets) -> RunResult:
    t_start = time.monotonic()
    pd = kind == "kv"
    lws = f"{kind}-{seed}"
    roles = ("prefill", "decode") if pd else ("aggregated",)
    engines: dict[tuple[str, str], Engine] = {}
    try:
        for rev, profile in (("stable", STABLE), ("new", CANDIDATE[kind])):
            for role in roles:
                opts = dict(profile) if role != "prefill" else {k: v for k, v in profile.items()
                                                                if k != "kv_failure_ratio"}
                engines[(rev, role)] = Engine(model=MODEL, role=role, side_channel_port=0,
                                              seed=seed * 7 + len(engines), **opts)
        for e in engines.values():
            e.started()
        targets.set(lws, [_group(e, lws, rev, role) for (rev, role), e in engines.items()])
        loads: list[Any] = []
        for i, rev in enumerate(("stable", "new")):
            if pd:
                pair = engines[(rev, "prefill")], engines[(rev, "decode")]
                loads.append(PdTraffic(*pair, RATE, seed * 3 + i))
            else:
                url = engines[(rev, "aggregated")].url
                loads.append(LoadGenerator(LoadSpec(model=MODEL, rate=RATE, seed=seed * 3 + i,
                                                    max_tokens=(2, 6), prompt_words=(4, 32)),
                                           lambda u=url: [u]))
        for load in loads:
            load.__enter__()
        try:
            first = _first_served(engines[("new", roles[-1])])
            pods = {(f"{lws}-{rev}-{role}", rev) for rev, role in engines}
            if not prom.wait_for_targets(pods, timeout_s=30):
                return RunResult(kind, seed, "error: targets not scraped", None,
                                 wall_s=time.monotonic() - t_start)
            res = run_analysis(spec(pd), {"namespace": "bench", "lws": lws, "revision": "new",
                                          "stable_revision": "stable", "role": roles[-1]},
                               provider_measure(prom.url))
            decided = time.monotonic()
        finally:
            for load in loads:
                load.__exit__(None, None, None)
        failing = [m for m in res.measurements if m.phase == "failed"]
        return RunResult(kind, seed, res.phase, decided - first if res.phase == "failed" else None,
                         {"metrics": {k: v for k, v in res.metrics.items()},
                          "failed_by": sorted({m.metric for m in failing}),
                          "lines": [m.line() for m in res.measurements]}, time.monotonic() - t_start)
    finally:
        targets.set(lws, [])
        for e in engines.values():
            e.stop()


def _spread(xs: list[float]) -> str:
    if not xs:
        return "-"
    xs = sorted(xs)
    q = statistics.quantiles(xs, n=10, method="inclusive") if len(xs) >= 2 else [xs[0]] * 9
    return (f"median {statistics.median(xs):.1f} s (p10 {q[0]:.1f}, p90 {q[-1]:.1f}, "
            f"min {xs[0]:.1f}, max {xs[-1]:.1f})")


def parse_lines(text: str) -> list[RunResult]:
    """The runs of an earlier run's printed lines (``--summarize``)."""
    out = []
    for m in _LINE.finditer(text):
        by = [x.strip().strip("'") for x in m["by"].split(",") if x.strip()]
        out.append(RunResult(m["kind"], int(m["seed"]), m["phase"],
                             float(m["decided"]) if m["decided"] else None, {"failed_by": by}))
    return out


_LINE = re.compile(r"^  (?P<kind>\w+)\s+seed\s+(?P<seed>\d+): (?P<phase>\S+)\s+"
                   r"(?:decided (?P<decided>[\d.]+) s after first request )?\[(?P<by>[^\]]*)\]", re.M)


def summarize(kinds: list[str], results: list[RunResult], json_path: str) -> None:
    summary: dict[str, Any] = {}
    for kind in kinds:
        rs = [r for r in results if r.kind == kind]
        phases = {p: sum(r.phase == p for r in rs) for p in sorted({r.phase for r in rs})}
        if kind == "good":
            wrong = sum(r.phase != "successful" for r in rs)
            print(f"good releases wrongly failed: {wrong} of {len(rs)} (target 0) {phases}")
            summary[kind] = {"wrongly_failed": wrong, "runs": len(rs), "phases": phases}
            continue
        through = sum(r.phase == "successful" for r in rs)
        times = [r.decision_s for r in rs if r.decision_s is not None]
        by = sorted({m for r in rs for m in r.metrics.get("failed_by", [])})
        print(f"bad releases ({kind}) that got through: {through} of {len(rs)} (target 0) {phases}; "
              f"failed by {by}; first served request -> rollback decision: {_spread(times)}")
        summary[kind] = {"got_through": through, "runs": len(rs), "phases": phases,
                         "decision_s": times, "failed_by": by}
    if json_path:
        Path(json_path).write_text(json.dumps(summary, indent=1))


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if "--power" in args:  # the power curve in virtual time (analysis_power.py)
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        import analysis_power

        return analysis_power.main([a for a in args if a != "--power"])
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=50, help="runs per kind")
    ap.add_argument("--start", type=int, default=0,
                    help="first run index (a second process can take the later runs of the same seed)")
    ap.add_argument("--parallel", type=int, default=2, help="runs at once (each: 2-4 engines, ~20 req/s)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--kinds", default=",".join(KINDS))
    ap.add_argument("--json", default="")
    ap.add_argument("--verbose", action="store_true", help="print every measurement")
    ap.add_argument("--summarize", default="", help="only print the figures of an earlier run's output")
    args = ap.parse_args(argv)
    kinds = [k for k in args.kinds.split(",") if k]
    if args.summarize:
        summarize(kinds, parse_lines(Path(args.summarize).read_text()), args.json)
        return 0
    # a bench started in the background has SIGINT ignored: SIGTERM stops it too, with the figures
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    jobs = [(k, args.seed * 1000 + i) for i in range(args.start, args.runs) for k in kinds]
    t0 = time.monotonic()
    results: list[RunResult] = []
    stopped = False
    with start_prometheus(scrape_interval_s=1.0) as prom:
        targets = Targets(prom)
        pool = ThreadPoolExecutor(args.parallel)
        try:
            for r in pool.map(lambda j: one_run(j[0], j[1], prom, targets), jobs):
                results.append(r)
                when = "" if r.decision_s is None else f"decided {r.decision_s:.1f} s after first request "
                print(f"  {r.kind:9} seed {r.seed:5}: {r.phase:12} {when}{r.metrics.get('failed_by', '')} "
                      f"({r.wall_s:.0f} s)", flush=True)
                if args.verbose:
                    for line in r.metrics.get("lines", []):
                        print("      " + line)
        except KeyboardInterrupt:  # SIGINT: report the runs that finished
            stopped = True
        pool.shutdown(wait=not stopped, cancel_futures=True)
    print(f"\n{len(results)} runs in {time.monotonic() - t0:.0f} s wall, {args.parallel} at a time, "
          f"seed {args.seed}")
    summarize(kinds, results, args.json)
    if stopped:
        print("stopped early (SIGINT): the figures cover the runs above", flush=True)
        os._exit(0)  # runs in flight are abandoned with their engines' processes (stdin closes)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
