"""Run an analysis: take each metric's measurements on schedule, judge them, stop at the first failed
metric. The clock, the sleep and the measuring function are injectable, so the loop is tested without
waiting and the embedded cluster's tests can run it against a real Prometheus in wall time.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from lwsflow.controller.analysis import evaluate as ev
from lwsflow.controller.analysis.providers import (
    ProviderError,
    SmokeMeasure,
    command_value,
    http_value,
    prometheus_buckets,
    prometheus_value,
)
from lwsflow.controller.analysis.spec import AnalysisSpec, Metric, check_args, promql_duration, render
from lwsflow.controller.analysis.stats import Counts
from lwsflow.controller.api.duration import parse_duration
from lwsflow.controller.errors import InvalidInput

# (metric, args) -> (value, baseline): numbers, or for compare modes proportion / histogram the counts
# (evaluate.Observation); raises ProviderError
Measure = Callable[[Metric, dict[str, str]], tuple[ev.Observation, ev.Observation]]


@dataclass
class AnalysisResult:
    phase: ev.Phase
    measurements: list[ev.Measurement] = field(default_factory=list)
    metrics: dict[str, ev.Phase | None] = field(default_factory=dict)

    def as_dict(self) -> dict[str, object]:
        return {"phase": self.phase, "metrics": dict(self.metrics),
                "measurements": [m.as_dict() for m in self.measurements]}

    def traffic_note(self) -> str:
        """What the console says when metrics ended short of traffic: per such metric, its last
        measurement's traffic and what would have sufficed ("" when none did)."""
        short = []
        for name, phase in self.metrics.items():
            judged = [m for m in self.measurements if m.metric == name and m.phase != "error"]
            if phase != "successful" and judged and ev.short_of_traffic(judged[-1]):
                short.append(f"{name}: {judged[-1].detail.split(' (')[0]}")
        return ("too little traffic to judge (" + "; ".join(short) + ")") if short else ""

    def summary(self) -> str:
        """``metric=verdict, ...`` and the traffic note."""
        text = ", ".join(f"{k}={v or 'not run'}" for k, v in self.metrics.items())
        note = self.traffic_note()
        return f"{text}; {note}" if note else text


def provider_measure(prometheus: str | None, smoke: SmokeMeasure | None = None) -> Measure:
    """The real providers; ``prometheus`` is the default address for prometheus metrics, ``smoke``
    runs the smoke test (wired by the caller; without it a smoke metric is inconclusive)."""
    def measure(metric: Metric, args: dict[str, str]) -> tuple[ev.Observation, ev.Observation]:
        p = metric.provider
        if p.prometheus:
            address = p.prometheus.address or prometheus
            if not address:
                raise ProviderError("no Prometheus address (--prometheus or provider.prometheus.address)")
            value = _prometheus_observation(address, metric, args)
            baseline: ev.Observation = None
            if metric.compare:
                # blue-green: the stable revision runs in another LWS (``stable_lws``)
                stable = dict(args, revision=args.get("stable_revision", ""),
                              lws=args.get("stable_lws") or args.get("lws", ""))
                baseline = _prometheus_observation(address, metric, stable)
            return value, baseline
        if p.smoke:
            if smoke is None:
                raise ProviderError("the smoke provider is not wired here")
            return smoke(p.smoke, args), None
        if p.http:
            return http_value(p.http, args), None
        assert p.command is not None
        return command_value(p.command, args), None
    return measure


def _prometheus_observation(address: str, metric: Metric, args: dict[str, str]) -> ev.Observation:
    assert metric.provider.prometheus is not None
    query = render(metric.provider.prometheus.query, args)
    mode = metric.compare.mode if metric.compare else ""
    if mode == "histogram":
        assert metric.compare is not None
        buckets = prometheus_buckets(address, query)
        if buckets is None or not metric.compare.requests:
            return buckets
        # per-token observations: the requests they come from are the samples (stats.Buckets.samples)
        requests = prometheus_value(address, render(metric.compare.requests, args))
        return None if requests is None else replace(buckets, requests=requests)
    if mode == "proportion":
        assert metric.compare is not None
        events = prometheus_value(address, query)
        total = prometheus_value(address, render(metric.compare.total, args))
        return None if events is None or total is None else Counts(events, total)
    return prometheus_value(address, query)


def check_inputs(spec: AnalysisSpec, args: dict[str, str]) -> None:
    """Every argument the spec uses has a safe value; compare needs the stable revision."""
    check_args(args)
    for m in spec.metrics:
        full = _args(spec, m, args, 0.0)
        for text in m.templates():
            render(text, full)
        if m.compare and not args.get("stable_revision"):
            raise InvalidInput(f"metric {m.name} compares with the stable revision; give --stable-revision",
                               field="stable_revision")


def _args(spec: AnalysisSpec, metric: Metric, args: dict[str, str], since_start: float) -> dict[str, str]:
    """``{{window}}`` (given, or the spec's, or the metric's interval) and ``{{elapsed}}``: one window
    plus the time since the analysis began, the range over which evidence accumulates."""
    window = args.get("window") or promql_duration(spec.window or metric.interval)
    return dict(args, window=window,
                elapsed=promql_duration(parse_duration(window, "window") + since_start))


def planned_fractions(spec: AnalysisSpec, metric: Metric) -> tuple[float, ...]:
    """The information fraction of each planned look: counts over ``[{{elapsed}}]`` cover one window
    plus the time since the analysis began, so under steady traffic look k has seen ``window +
    initialDelay + (k - 1) * interval`` seconds of it."""
    window = spec.window or metric.interval
    seen = [window + metric.initial_delay + k * metric.interval for k in range(metric.count)]
    return tuple(x / seen[-1] for x in seen)


def run_analysis(spec: AnalysisSpec, args: dict[str, str], measure: Measure, *,
                 sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.monotonic,
                 on_measurement: Callable[[ev.Measurement], None] | None = None,
                 sequential: bool = True) -> AnalysisResult:
    """Measure every metric up to ``count`` times (first at ``initialDelay``, then every
    ``interval``). ``sequential`` (the default): the statistical metrics decide at the first look
    whose evidence suffices (``evaluate.Look``), and once every one of them has passed the analysis
    ends, the other metrics judged on the measurements they have; ``False``: the fixed horizon (each
    measurement at the full alpha, ``failureLimit`` for every metric), kept for the bench."""
    check_inputs(spec, args)
    fractions = {m.name: planned_fractions(spec, m) for m in spec.metrics}
    seq_metrics = [m for m in spec.metrics if ev.sequential(m)] if sequential else []
    schedule = sorted((m.initial_delay + i * m.interval, k, i) for k, m in enumerate(spec.metrics)
                      for i in range(m.count))
    result = AnalysisResult("successful", metrics={m.name: None for m in spec.metrics})
    t0 = clock()
    for due, k, i in schedule:
        metric = spec.metrics[k]
        if result.metrics[metric.name] is not None:
            continue  # this metric is already decided (a limit passed)
        wait = t0 + due - clock()
        if wait > 0:
            sleep(wait)
        margs = _args(spec, metric, args, clock() - t0)
        value: ev.Observation = None
        baseline: ev.Observation = None
        look = ev.Look(i + 1, fractions[metric.name]) if sequential and ev.sequential(metric) else None
        try:
            value, baseline = measure(metric, margs)
            phase, detail = ev.judge(metric, value, baseline, look=look)
        except ProviderError as exc:  # counted apart (consecutiveErrorLimit), never a pass
            phase, detail = ev.judge(metric, None, error=str(exc))
        m = ev.Measurement(metric.name, i + 1, phase, ev.shown(metric, value), ev.shown(metric, baseline),
                           detail, clock() - t0)
        result.measurements.append(m)
        if on_measurement:
            on_measurement(m)
        result.metrics[metric.name] = ev.metric_phase(metric, result.measurements, seq=sequential)
        if result.metrics[metric.name] in ("failed", "error"):
            break  # Argo stops the analysis at the first failed (or errored) metric
        if seq_metrics and all(result.metrics[m.name] == "successful" for m in seq_metrics) and \
                _end_early(spec, result):
            break
    result.phase = ev.overall(result.metrics.values())
    return result


def _end_early(spec: AnalysisSpec, result: AnalysisResult) -> bool:
    """Every statistical metric has passed: judge the others on what they measured so far, once each
    has had a successful measurement (until then they keep measuring: a first one without data
    is no verdict)."""
    pending = [m for m in spec.metrics if result.metrics[m.name] is None]
    if any(not any(x.metric == m.name and x.phase == "successful" for x in result.measurements)
           for m in pending):
        return False
    for m in pending:
        result.metrics[m.name] = ev.metric_phase(m, result.measurements, seq=True, final=True)
    return True
