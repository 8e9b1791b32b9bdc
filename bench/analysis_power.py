"""Analysis power curve: per effect size, the share of releases the analysis gate passes, fails and
leaves inconclusive, and the time it takes, at four traffic levels, for today's fixed horizon and the
sequential design side by side (``--designs fixed,sequential``); the false holds of healthy releases.

What is real and what is modelled. The decision code is the product's own: ``run_analysis``
(``controller/analysis/run.py``) with the built-in ``vllm`` / ``vllm-pd`` template (its queries'
results are what the measure function hands it), judged by ``evaluate.py`` and ``stats.py``. What
Prometheus would answer is computed in virtual time from requests sampled as the stand-in engines'
profiles sample them (``sim/engine/openai_api.py``: TTFT and ITL log-normal from a median and a p95,
one ITL per request shared by its tokens, errors and KV-transfer failures as Bernoulli draws,
slowdown over uptime) on the engines' bucket boundaries (``sim/engine/metrics.py``), arriving as a
Poisson process. Each query's ``increase(...[{{elapsed}}])`` is the exact count of the requests in
that range (Prometheus's extrapolation and scrape timing are not modelled: the real-Prometheus mode of
``analysis_bench.py`` spot-checks those). That makes an analysis of the templates' production
timescale (30 s x 4) at 50 requests a second a few milliseconds of CPU instead of minutes of wall time.

Scenarios (the candidate against a stable revision serving TTFT median 45 ms / p95 60 ms, ITL 10 / 14
ms, 0.1% errors, 4-32 output tokens; each revision has its own seeded stream):

* ``identical``: the candidate's profile and load shape are the stable's;
* ``healthy-noise``: the stable's profile, but its traffic comes in bursts (rate x (1 +/- 0.5) over a
  40 s period) and its first requests are slower (a warm-up: latency x 1.3 decaying with a 10 s time
  constant);
* ``ttft+5`` ... ``ttft+40``: TTFT median and p95 that many percent higher;
* ``errors-0.5`` ... ``errors-5``: that share of the candidate's requests answer 500;
* ``kv-0.5`` ... ``kv-5`` (P/D, ``vllm-pd``): that share of the decode's KV pulls fail (each also an
  error answer, as the engine does), the stable's none;
* ``degrading``: latency grows 5% per minute of uptime.

Designs: ``fixed`` is the fixed horizon before sequential decisions (every measurement at the full
alpha, failureLimit 1, the metric decided after ``count`` measurements: ``run_analysis(...,
sequential=False)``); ``sequential`` the default now (``evaluate.Look``, ``stats.sequential_levels``:
each statistical metric decides at its first decisive look, the analysis ends once all have passed).

Timescales: ``production`` is the template as shipped (30 s interval and window, 4 measurements,
failureLimit 1, inconclusiveLimit 1); ``short`` the real-Prometheus bench's (10 s window, a
measurement every 2 s, 19 of them). The analysis starts 10 s after the candidate's first request (the
hook's wait for discovery and two scrapes).

Seeds: ``TUNING_SEEDS`` (0-9) are the only ones to look at while choosing thresholds; the figures
reported in docs/analysis.md come from ``--seed-base 1000`` (seeds 1000 + run), never used to tune.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from lwsflow.controller.analysis import evaluate as ev
from lwsflow.controller.analysis.run import run_analysis
from lwsflow.controller.analysis.spec import AnalysisSpec, Metric, validate_spec
from lwsflow.controller.analysis.stats import Buckets, Counts
from lwsflow.controller.analysis.templates import vllm

TUNING_SEEDS = range(0, 10)
EVALUATION_SEED_BASE = 1000
# sim/engine/metrics.py's _LATENCY_BUCKETS (the stand-in engine's histograms)
BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
           20.0, 40.0, 80.0, math.inf)
Z95 = 1.6449  # the 95th percentile of the standard normal: a profile's p95 -> log-normal sigma
START_S = 10.0  # the candidate's first request -> the analysis's first measurement (the hook's wait)
RATES = (1.0, 5.0, 10.0, 50.0)
DESIGNS = ("fixed", "sequential")


@dataclass(frozen=True)
class Profile:
    """A revision's behaviour, as the stand-in engine's ``EngineOptions`` describe it."""

    ttft_s: float = 0.045
    ttft_p95_s: float = 0.060
    itl_s: float = 0.010
    itl_p95_s: float = 0.014
    error_ratio: float = 0.001
    kv_failure_ratio: float = 0.0
    slowdown_per_min: float = 0.0
    warmup: float = 0.0  # latency x (1 + warmup * exp(-t / 10 s)): a fresh engine's first requests
    bursty: bool = False  # rate x (1 + 0.5 sin(2 pi t / 40 s))


STABLE = Profile()
SCENARIOS: dict[str, tuple[Profile, bool]] = {  # name -> (candidate, P/D)
    "identical": (STABLE, False),
    "healthy-noise": (Profile(warmup=0.3, bursty=True), False),
    **{f"ttft+{p}": (Profile(ttft_s=0.045 * (1 + p / 100), ttft_p95_s=0.060 * (1 + p / 100)), False)
       for p in (5, 10, 20, 40)},
    **{f"errors-{p:g}": (Profile(error_ratio=p / 100), False) for p in (0.5, 1, 2, 5)},
    **{f"kv-{p:g}": (Profile(kv_failure_ratio=p / 100), True) for p in (0.5, 1, 5)},
    "degrading": (Profile(slowdown_per_min=0.05), False),
}
HEALTHY = ("identical", "healthy-noise")
TIMESCALES = {"production": None, "short": {"window": "10s", "interval": "2s", "count": 19}}


def spec_for(pd: bool, timescale: str) -> AnalysisSpec:
    """The built-in template, as shipped (production) or at the short bench timescale."""
    doc: dict[str, Any] = vllm(pd=pd)
    short = TIMESCALES[timescale]
    if short:
        doc["window"] = short["window"]
        for m in doc["metrics"]:
            m.update(interval=short["interval"], count=short["count"])
    return validate_spec(doc)


class Revision:
    """One revision's requests over ``horizon`` seconds, sampled once; counts up to any time."""

    def __init__(self, profile: Profile, rate: float, horizon: float, rng: np.random.Generator) -> None:
        n = rng.poisson(rate * horizon * 1.6) + 16
        t = np.cumsum(rng.exponential(1.0 / (rate * 1.5), n))
        if profile.bursty:  # thinning: keep an arrival with probability rate(t) / max rate
            keep = rng.random(n) < (1 + 0.5 * np.sin(2 * math.pi * t / 40.0)) / 1.5
        else:
            keep = rng.random(n) < 1 / 1.5
        t = t[keep & (t < horizon)]
        n = len(t)
        scale = (1 + profile.slowdown_per_min * t / 60.0) * (1 + profile.warmup * np.exp(-t / 10.0))

        def lognormal(median: float, p95: float) -> np.ndarray:
            return np.asarray(rng.lognormal(math.log(median), math.log(p95 / median) / Z95, n) * scale)

        ttft, itl = lognormal(profile.ttft_s, profile.ttft_p95_s), lognormal(profile.itl_s, profile.itl_p95_s)
        tokens = rng.integers(4, 33, n)
        plain_error = rng.random(n) < profile.error_ratio  # the engine answers 500 before any KV pull
        kv_failed = (rng.random(n) < profile.kv_failure_ratio) & ~plain_error
        error = kv_failed | plain_error
        self.t = t
        bounds = np.asarray(BUCKETS)
        ok = ~error
        # cumulative counts by arrival, so a range's count is a difference of two rows
        self.cum_error = np.concatenate([[0], np.cumsum(error)])
        self.cum_kv_failed = np.concatenate([[0], np.cumsum(kv_failed)])
        self.cum_ok = np.concatenate([[0], np.cumsum(ok)])
        ttft_b = np.searchsorted(bounds, ttft)  # bucket index: le = BUCKETS[i] is the first >= x
        itl_b = np.searchsorted(bounds, itl)
        onehot_t = np.zeros((n, len(BUCKETS)))
        onehot_t[np.arange(n)[ok], ttft_b[ok]] = 1
        onehot_i = np.zeros((n, len(BUCKETS)))
        onehot_i[np.arange(n)[ok], itl_b[ok]] = (tokens - 1)[ok]  # one ITL per token gap
        self.cum_ttft = np.vstack([np.zeros(len(BUCKETS)), np.cumsum(onehot_t, axis=0)])
        self.cum_itl = np.vstack([np.zeros(len(BUCKETS)), np.cumsum(onehot_i, axis=0)])

    def _rows(self, since: float, until: float) -> tuple[int, int]:
        return int(np.searchsorted(self.t, max(since, 0.0))), int(np.searchsorted(self.t, until))

    def observe(self, metric: str, since: float, until: float) -> ev.Observation:
        """What the template's query of ``metric`` answers over (since, until]."""
        a, b = self._rows(since, until)
        ok, errors = self.cum_ok[b] - self.cum_ok[a], self.cum_error[b] - self.cum_error[a]
        if metric == "error-ratio":
            return Counts(float(errors), float(ok + errors))
        if metric == "kv-transfer-failures":  # failed among attempted (successful + failed)
            failed = self.cum_kv_failed[b] - self.cum_kv_failed[a]
            return Counts(float(failed), float(ok + failed))
        if metric == "queue-length":
            return 0.0
        per_bucket = (self.cum_ttft if metric == "ttft-p95" else self.cum_itl)[b] - \
            (self.cum_ttft if metric == "ttft-p95" else self.cum_itl)[a]
        if per_bucket.sum() <= 0:
            return None
        return Buckets.of(dict(zip(BUCKETS, np.cumsum(per_bucket).tolist(), strict=True)),
                          requests=float(ok) if metric == "itl-p95" else None)


@dataclass
class Outcome:
    phase: str
    decided_s: float  # from the candidate's first request to the verdict
    failed_by: list[str] = field(default_factory=list)
    short_of_traffic: int = 0  # measurements inconclusive for too little traffic


def one_run(scenario: str, rate: float, timescale: str, seed: int, design: str = "sequential") -> Outcome:
    candidate, pd = SCENARIOS[scenario]
    spec = spec_for(pd, timescale)
    m0 = spec.metrics[0]
    window = spec.window or m0.interval
    horizon = START_S + m0.initial_delay + m0.count * m0.interval + 1.0
    rng = np.random.default_rng(seed)
    new = Revision(candidate, rate, horizon, np.random.default_rng(rng.integers(2**63)))
    old = Revision(STABLE, rate, horizon, np.random.default_rng(rng.integers(2**63)))
    now = [START_S]

    def measure(metric: Metric, args: dict[str, str]) -> tuple[ev.Observation, ev.Observation]:
        since = START_S - window  # [{{elapsed}}]: one window before the analysis began up to now
        return new.observe(metric.name, since, now[0]), old.observe(metric.name, since, now[0])

    def sleep(s: float) -> None:
        now[0] += s

    res = run_analysis(spec, {"revision": "new", "stable_revision": "old", "namespace": "ns", "lws": "m"},
                       measure, sleep=sleep, clock=lambda: now[0], sequential=design == "sequential")
    return Outcome(res.phase, now[0], [k for k, v in res.metrics.items() if v == "failed"],
                   sum("too little traffic" in m.detail for m in res.measurements))


@dataclass
class Cell:
    scenario: str
    rate: float
    timescale: str
    outcomes: list[Outcome]
    design: str = "sequential"

    @property
    def held(self) -> float:
        """The share not passed (failed, inconclusive or error: each rolls the stage back)."""
        return sum(o.phase != "successful" for o in self.outcomes) / len(self.outcomes)

    def share(self, phase: str) -> float:
        return sum(o.phase == phase for o in self.outcomes) / len(self.outcomes)

    def median_decision(self) -> float | None:
        held = [o.decided_s for o in self.outcomes if o.phase != "successful"]
        return statistics.median(held) if held else None

    def times(self) -> tuple[float, float]:
        """Median and 90th percentile of the time to the verdict, whatever it was."""
        xs = sorted(o.decided_s for o in self.outcomes)
        return statistics.median(xs), xs[min(len(xs) - 1, math.ceil(0.9 * len(xs)) - 1)]


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The 95% Wilson score interval of a share k / n."""
    if n == 0:
        return 0.0, 1.0
    p = k / n
    mid, half = (p + z * z / (2 * n)), z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, (mid - half) / (1 + z * z / n)), min(1.0, (mid + half) / (1 + z * z / n))


def cells(scenarios: list[str], rates: list[float], timescales: list[str], runs: int,
          seed_base: int, designs: tuple[str, ...] = DESIGNS) -> Iterator[Cell]:
    for timescale in timescales:
        for rate in rates:
            for scenario in scenarios:
                for design in designs:  # the same seeds: each design judges the same traffic
                    yield Cell(scenario, rate, timescale,
                               [one_run(scenario, rate, timescale, seed_base + i, design)
                                for i in range(runs)], design)


def side_by_side(results: list[Cell]) -> str:
    """A markdown table: per timescale, rate and scenario, each design's shares passed / failed /
    inconclusive and the median and 90th percentile time from the candidate's first request to the
    verdict."""
    designs = list(dict.fromkeys(c.design for c in results))
    head = "| timescale | req/s | scenario | " + " | ".join(
        f"{d}: passed / failed / inconclusive | {d}: median / p90 s" for d in designs) + " |"
    out = [head, "|---|---|---|" + "---|---|" * len(designs)]
    rows: dict[tuple[str, float, str], dict[str, Cell]] = {}
    for c in results:
        rows.setdefault((c.timescale, c.rate, c.scenario), {})[c.design] = c
    for (timescale, rate, scenario), by in rows.items():
        parts = []
        for d in designs:
            c = by[d]
            med, p90 = c.times()
            parts.append(f"{c.share('successful'):.0%} / {c.share('failed'):.0%} / "
                         f"{c.share('inconclusive') + c.share('error'):.0%} | {med:.0f} / {p90:.0f}")
        out.append(f"| {timescale} | {rate:g} | {scenario} | " + " | ".join(parts) + " |")
    return "\n".join(out)


def table(results: list[Cell]) -> str:
    """A markdown table: held back (95% interval), failed / inconclusive, decision time."""
    out = ["| timescale | req/s | scenario | held back | failed | inconclusive | decision (median s) |",
           "|---|---|---|---|---|---|---|"]
    for c in results:
        n = len(c.outcomes)
        k = sum(o.phase != "successful" for o in c.outcomes)
        lo, hi = wilson(k, n)
        med = c.median_decision()
        what = "wrongly held" if c.scenario in HEALTHY else "held"
        out.append(f"| {c.timescale} | {c.rate:g} | {c.scenario} | {k}/{n} {what} ({lo:.0%}-{hi:.0%}) | "
                   f"{c.share('failed'):.0%} | {c.share('inconclusive') + c.share('error'):.0%} | "
                   f"{'-' if med is None else f'{med:.0f}'} |")
    return "\n".join(out)


def run(scenarios: list[str], rates: list[float], timescales: list[str], runs: int, seed_base: int,
        designs: tuple[str, ...] = DESIGNS) -> str:
    t0 = time.monotonic()
    results = list(cells(scenarios, rates, timescales, runs, seed_base, designs))
    seeds = f"{seed_base}-{seed_base + runs - 1}"
    tuning = "yes" if seed_base < TUNING_SEEDS.stop else "no (evaluation seeds)"
    return (f"{side_by_side(results)}\n\nseeds {seeds} (any tuning seed {TUNING_SEEDS.start}-"
            f"{TUNING_SEEDS.stop - 1} among them: {tuning}); {runs} runs a cell; "
            f"{time.monotonic() - t0:.0f} s")


def _expected_buckets(median: float, p95: float, n: float) -> Buckets:
    """``n`` requests of a log-normal profile, spread over the engine's buckets as expected counts."""
    sigma = math.log(p95 / median) / Z95
    cdf = [0.5 * math.erfc(-(math.log(le) - math.log(median)) / (sigma * math.sqrt(2)))
           if math.isfinite(le) else 1.0 for le in BUCKETS]
    return Buckets.of({le: n * c for le, c in zip(BUCKETS, cdf, strict=True)})


def requests_table() -> str:
    """Per built-in metric, the requests per revision an equal release needs to be shown within
    tolerance (stats.POWER): the proportion mode at several base ratios, the histogram mode at the
    stable profile above (its expected bucket counts), and the time that takes at each traffic level."""
    from lwsflow.controller.analysis.stats import needed_scale, requests_to_judge

    rows: list[tuple[str, float | None]] = [
        (f"error-ratio / kv-transfer-failures (0.5 points), both at {r:.1%}", requests_to_judge(0.005, r))
        for r in (0.0, 0.001, 0.01, 0.02)]
    spec = spec_for(False, "production")
    for name, (median, p95) in (("ttft-p95 (10%), TTFT 45 / 60 ms", (0.045, 0.060)),
                                ("itl-p95 (10%), ITL 10 / 14 ms", (0.010, 0.014))):
        metric = next(m for m in spec.metrics if m.name == name.split()[0])

        def passes(k: float, median: float = median, p95: float = p95, metric: Metric = metric) -> bool:
            b = _expected_buckets(median, p95, 10 * k)
            return ev.judge(metric, b, b)[0] == "successful"
        k = needed_scale(passes, 1e5)
        rows.append((name, None if k is None else math.ceil(10 * k)))
    out = ["| metric, equal revisions | requests per revision | "
           + " | ".join(f"at {r:g} req/s" for r in RATES) + " |", "|---|---|" + "---|" * len(RATES)]
    for name, n in rows:
        times = " | ".join("-" if n is None else f"{n / r:.0f} s" for r in RATES)
        out.append(f"| {name} | {'never' if n is None else n} | {times} |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="analysis_bench.py --power",
                                 description="the analysis gate's power curve in virtual time")
    ap.add_argument("--runs", type=int, default=100, help="runs per cell (scenario x rate x timescale)")
    ap.add_argument("--seed-base", type=int, default=EVALUATION_SEED_BASE,
                    help=f"seeds seed-base.. (tuning: {TUNING_SEEDS.start}-{TUNING_SEEDS.stop - 1}; "
                         f"figures: {EVALUATION_SEED_BASE}+)")
    ap.add_argument("--scenarios", default=",".join(SCENARIOS))
    ap.add_argument("--rates", default=",".join(f"{r:g}" for r in RATES))
    ap.add_argument("--timescales", default="production",
                    help=f"of {','.join(TIMESCALES)} (short: the real-Prometheus bench's)")
    ap.add_argument("--designs", default=",".join(DESIGNS), help="fixed (the horizon of before), sequential")
    ap.add_argument("--requests-table", action="store_true",
                    help="only print the requests an equal release needs per built-in metric")
    a = ap.parse_args(argv)
    if a.requests_table:
        print(requests_table())
        return 0
    print(run(a.scenarios.split(","), [float(r) for r in a.rates.split(",")], a.timescales.split(","),
              a.runs, a.seed_base, tuple(a.designs.split(","))), flush=True)
    return 0
