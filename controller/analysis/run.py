"""Run an analysis: take each metric's measurements on schedule, judge them, stop at the first failed
metric. The clock, the sleep and the measuring function are injectable, so the loop is tested without
waiting and the embedded cluster's tests can run it against a real Prometheus in wall time.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from lwsflow.controller.analysis import evaluate as ev
from lwsflow.controller.analysis.providers import (
    ProviderError,
    SmokeMeasure,
    command_value,
    http_value,
    prometheus_value,
)
from lwsflow.controller.analysis.spec import AnalysisSpec, Metric, check_args, promql_duration, render
from lwsflow.controller.errors import InvalidInput

# (metric, args) -> (value, baseline); raises ProviderError
Measure = Callable[[Metric, dict[str, str]], tuple[float | None, float | None]]


@dataclass
class AnalysisResult:
    phase: ev.Phase
    measurements: list[ev.Measurement] = field(default_factory=list)
    metrics: dict[str, ev.Phase | None] = field(default_factory=dict)

    def as_dict(self) -> dict[str, object]:
        return {"phase": self.phase, "metrics": dict(self.metrics),
                "measurements": [m.as_dict() for m in self.measurements]}


def provider_measure(prometheus: str | None, smoke: SmokeMeasure | None = None) -> Measure:
    """The real providers; ``prometheus`` is the default address for prometheus metrics, ``smoke``
    runs the smoke test (wired by the caller; without it a smoke metric is inconclusive)."""
    def measure(metric: Metric, args: dict[str, str]) -> tuple[float | None, float | None]:
        p = metric.provider
        if p.prometheus:
            address = p.prometheus.address or prometheus
            if not address:
                raise ProviderError("no Prometheus address (--prometheus or provider.prometheus.address)")
            value = prometheus_value(address, render(p.prometheus.query, args))
            baseline = None
            if metric.compare:
                # blue-green: the stable revision runs in another LWS (``stable_lws``)
                stable = dict(args, revision=args.get("stable_revision", ""),
                              lws=args.get("stable_lws") or args.get("lws", ""))
                baseline = prometheus_value(address, render(p.prometheus.query, stable))
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


def check_inputs(spec: AnalysisSpec, args: dict[str, str]) -> None:
    """Every argument the spec uses has a safe value; compare needs the stable revision."""
    check_args(args)
    for m in spec.metrics:
        full = dict(args, window=args.get("window") or promql_duration(spec.window or m.interval))
        for text in m.provider.templates():
            render(text, full)
        if m.compare and not args.get("stable_revision"):
            raise InvalidInput(f"metric {m.name} compares with the stable revision; give --stable-revision",
                               field="stable_revision")


def run_analysis(spec: AnalysisSpec, args: dict[str, str], measure: Measure, *,
                 sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.monotonic,
                 on_measurement: Callable[[ev.Measurement], None] | None = None) -> AnalysisResult:
    """Measure every metric ``count`` times (first at ``initialDelay``, then every ``interval``)."""
    check_inputs(spec, args)
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
        margs = dict(args, window=args.get("window") or promql_duration(spec.window or metric.interval))
        try:
            value, baseline = measure(metric, margs)
            phase, detail = ev.judge(metric, value, baseline)
        except ProviderError as exc:
            value, baseline, (phase, detail) = None, None, ("inconclusive", str(exc))
        m = ev.Measurement(metric.name, i + 1, phase, value, baseline, detail, clock() - t0)
        result.measurements.append(m)
        if on_measurement:
            on_measurement(m)
        result.metrics[metric.name] = ev.metric_phase(metric, result.measurements)
        if result.metrics[metric.name] == "failed":
            break  # Argo stops the analysis at the first failed metric
    result.phase = ev.overall(result.metrics.values())
    return result
