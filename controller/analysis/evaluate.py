"""Judging measurements and metrics (pure: no I/O, no clock) — Argo Rollouts' rules.

A measurement is ``failed`` when the failure condition holds, or the success condition is set and does
not hold; ``successful`` when the success condition holds (or only a failure condition is set and it
does not); ``inconclusive`` when a value it needs is missing (no samples yet, no baseline) or, for
the statistical modes, when the measurement had too little traffic to be shown within tolerance;
``error`` when the provider could not answer. A metric fails once more than ``failureLimit``
measurements failed, ends in error after more than ``consecutiveErrorLimit`` errors in a row, and is
inconclusive when more than ``inconclusiveLimit`` were inconclusive; after ``count`` measurements it
passes only if at least one was successful. The analysis fails when any metric fails.

**Sequential decisions** (``run_analysis``'s default): the statistical modes judge each measurement
as one look of a group-sequential test (``Look``, ``stats.sequential_levels``), at the nominal levels
that keep the chance of ever failing (alpha) or ever passing (1 - POWER) at the tolerance valid over
all of the metric's ``count`` looks. Such a metric passes at its first successful look and fails at
its first failed one (the spending already controls the error, so ``failureLimit`` counts only the
failures of conditions); after ``count`` looks without a decision it is inconclusive.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from lwsflow.controller.analysis import condition, stats
from lwsflow.controller.analysis.spec import Metric

Phase = Literal["successful", "failed", "inconclusive", "error"]
# a number, or the counts a statistical compare mode tests (proportion: Counts, histogram: Buckets)
Observation = float | stats.Counts | stats.Buckets | None


@dataclass(frozen=True)
class Look:
    """A measurement's place in a sequential analysis: its 1-based ``index`` among the metric's
    planned looks and every look's planned information fraction (the last 1.0)."""

    index: int
    fractions: tuple[float, ...]

    def levels(self, alpha: float, latency: bool = False) -> tuple[float, float]:
        """(fail, pass) nominal p-value levels of this look. ``latency``: the fail side spends
        nothing at the first look (``stats.spent``'s delay: its counts are mostly a fresh engine's
        warm-up, which a slower release cannot be told from) and from then on as without."""
        i = min(self.index, len(self.fractions)) - 1
        delay = self.fractions[0] if latency and len(self.fractions) > 1 else 0.0
        return (stats.sequential_levels(alpha, stats.FAIL_RHO, self.fractions, delay)[i],
                stats.sequential_levels(1.0 - stats.POWER, stats.PASS_RHO, self.fractions)[i])


@dataclass(frozen=True)
class Measurement:
    metric: str
    index: int  # 1-based within its metric
    phase: Phase
    value: float | None
    baseline: float | None = None
    detail: str = ""
    at: float = 0.0  # seconds since the analysis started

    def line(self) -> str:
        def fmt(v: float | None) -> str:
            return "-" if v is None else f"{v:.6g}"
        base = f" stable={fmt(self.baseline)}" if self.baseline is not None else ""
        extra = f" ({self.detail})" if self.detail else ""
        return (f"{self.metric} #{self.index} t={self.at:.1f}s value={fmt(self.value)}{base}: "
                f"{self.phase}{extra}")

    def as_dict(self) -> dict[str, object]:
        return {"metric": self.metric, "index": self.index, "phase": self.phase, "value": self.value,
                "baseline": self.baseline, "detail": self.detail, "at": round(self.at, 3)}


def shown(metric: Metric, obs: Observation) -> float | None:
    """The number a measurement shows: the ratio of counts, the histogram's quantile."""
    if isinstance(obs, stats.Counts):
        return obs.ratio
    if isinstance(obs, stats.Buckets):
        return obs.quantile(metric.compare.quantile if metric.compare else 0.95)
    return obs


# how the detail of a measurement inconclusive for want of evidence begins (``short_of_traffic``)
SHORT = ("too little traffic", "too few requests", "not shown within tolerance")


def short_of_traffic(m: Measurement) -> bool:
    """Inconclusive for want of evidence (more traffic decides it), not for a gap in the data."""
    return m.phase == "inconclusive" and m.detail.startswith(SHORT)


def _too_little(requests: float, scale: float | None) -> str:
    """Why a measurement neither failed nor passed: the traffic it had, and what would have sufficed."""
    if scale is None:
        return f"not shown within tolerance on {requests:.4g} requests per revision"
    return (f"too little traffic to pass: {requests:.4g} requests per revision, about "
            f"{math.ceil(requests * scale):d} needed at these ratios")


def _statistical(metric: Metric, value: Observation, baseline: Observation,
                 look: Look | None = None) -> tuple[Phase | None, str]:
    """The tests of a proportion / histogram compare: (failed or inconclusive, why), or (None, the
    figures) when it passes. Passing needs evidence (``stats.POWER``): a measurement neither failed
    nor shown within tolerance is inconclusive. With a ``look`` both tests use its sequential
    levels."""
    assert metric.compare is not None
    c = metric.compare
    alpha, beta = look.levels(c.alpha, c.mode == "histogram") if look else (c.alpha, 1.0 - stats.POWER)
    at = f" (look {look.index} of {len(look.fractions)}: p < {alpha:.2g})" if look else ""
    if value is None or baseline is None:
        return "inconclusive", "no data" if value is None else "no data for the stable revision"
    kind = stats.Counts if c.mode == "proportion" else stats.Buckets
    if not (isinstance(value, kind) and isinstance(baseline, kind)):
        return "inconclusive", f"mode {c.mode} needs counts, the provider gave a number"
    try:
        if isinstance(value, stats.Counts) and isinstance(baseline, stats.Counts):
            if value.total <= 0 or baseline.total <= 0:
                return "inconclusive", "no requests in the window"
            if c.guard is not None and (g := stats.guard_p_value(value, c.guard)) < alpha:
                return "failed", (f"ratio above the absolute guard {c.guard:g} at alpha={c.alpha:g}{at} "
                                  f"({value.events:.4g}/{value.total:.4g}, p={g:.2g})")
            p = stats.proportion_p_value(value, baseline, c.tolerance)
            pass_p = stats.proportion_pass_p_value(value, baseline, c.tolerance)
            detail = (f"{value.events:.4g}/{value.total:.4g} vs stable {baseline.events:.4g}/"
                      f"{baseline.total:.4g}, p={p:.2g}")
            requests = min(value.total, baseline.total)

            def passes(k: float) -> bool:
                assert isinstance(value, stats.Counts) and isinstance(baseline, stats.Counts)
                return stats.proportion_pass_p_value(
                    stats.Counts(value.events * k, value.total * k),
                    stats.Counts(baseline.events * k, baseline.total * k), c.tolerance) < beta
        else:
            assert isinstance(value, stats.Buckets) and isinstance(baseline, stats.Buckets)
            test = stats.histogram_test(value, baseline, c.quantile, c.tolerance)
            p, pass_p, detail = test.p_value, test.pass_p_value, test.detail()
            if test.resolution is not None:
                detail += f"; these buckets resolve slowdowns of {test.resolution:.0%} and more"

            requests = min(value.samples, baseline.samples)

            def passes(k: float) -> bool:
                return test.pass_p(k) < beta
    except ValueError as exc:
        return "inconclusive", str(exc)
    if p < alpha and requests < stats.MIN_REQUESTS:
        # too little evidence to fail: one stalled burst is a large share of a few requests
        return "inconclusive", (f"too few requests to judge ({requests:.4g} < {stats.MIN_REQUESTS:g}; "
                                f"{detail})")
    if p < alpha:
        return "failed", f"worse than stable beyond tolerance at alpha={c.alpha:g}{at} ({detail})"
    if pass_p >= beta:
        # no pass without evidence: this sample could not have caught a release worse by the tolerance
        return "inconclusive", f"{_too_little(requests, stats.needed_scale(passes))} ({detail})"
    return None, detail


def judge(metric: Metric, value: Observation, baseline: Observation = None,
          error: str = "", look: Look | None = None) -> tuple[Phase, str]:
    """The phase of one measurement and why; a provider that could not answer is an error. ``look``:
    the measurement is one look of a sequential analysis (statistical modes only)."""
    if error:
        return "error", error
    tested = ""
    if metric.compare and metric.compare.statistical:
        phase, tested = _statistical(metric, value, baseline, look)
        if phase is not None:
            return phase, tested
    number, base = shown(metric, value), shown(metric, baseline)
    if number is None or math.isnan(number):
        return "inconclusive", "no data"
    succ, fail = metric.conditions()
    values = {"result": number, "baseline": base}
    try:
        if fail is not None and condition.evaluate(fail, values):
            return "failed", f"failureCondition {metric.failure_condition} holds"
        if succ is not None:
            if condition.evaluate(succ, values):
                return "successful", tested
            bound = metric.compare.condition() if metric.compare else None
            return "failed", (f"worse than stable beyond tolerance ({bound})" if bound
                              else "successCondition does not hold")
    except condition.MissingValue as missing:
        return "inconclusive", f"no value for {missing}"
    return "successful", tested


def sequential(metric: Metric) -> bool:
    """Whether the metric decides sequentially (a statistical compare) in a sequential analysis."""
    return bool(metric.compare and metric.compare.statistical)


def metric_phase(metric: Metric, measurements: Iterable[Measurement], *, seq: bool = False,
                 final: bool = False) -> Phase | None:
    """The metric's verdict so far: failed / error / inconclusive once a limit is passed, else None
    (running). Measurements inconclusive for too little traffic do not count against
    ``inconclusiveLimit`` (the counts accumulate over the analysis, so early ones are short by
    design), but after ``count`` measurements a metric passes only when one was successful and the
    last judged one was not short of traffic (no pass without evidence): otherwise it is in error
    when every measurement was one, else inconclusive. ``seq``: a sequential analysis, where a
    statistical metric passes at its first successful look and fails at its first failed one;
    ``final``: judge as if ``count`` were reached (the analysis ends early, every statistical metric
    having passed)."""
    ms = [m for m in measurements if m.metric == metric.name]
    seq = seq and sequential(metric)
    if sum(m.phase == "failed" for m in ms) > (0 if seq else metric.failure_limit):
        return "failed"
    run = 0
    for m in ms:
        run = run + 1 if m.phase == "error" else 0
        if run > metric.consecutive_error_limit:
            return "error"
    if sum(m.phase == "inconclusive" and not short_of_traffic(m) for m in ms) > metric.inconclusive_limit:
        return "inconclusive"
    if seq and any(m.phase == "successful" for m in ms):
        return "successful"
    if len(ms) < metric.count and not final:
        return None
    judged = [m for m in ms if m.phase != "error"]
    if not any(m.phase == "successful" for m in ms) or (judged and short_of_traffic(judged[-1])):
        return "error" if not judged else "inconclusive"
    return "successful"


def metric_phases(metrics: Iterable[Metric], measurements: Iterable[Measurement],
                  seq: bool = True) -> dict[str, Phase | None]:
    """Every metric's verdict from one analysis's measurements, as ``run_analysis`` decides them
    (``seq``: sequentially, where the analysis ends once every statistical metric has passed and the
    others have had a successful measurement)."""
    ms, mets = list(measurements), list(metrics)
    out = {m.name: metric_phase(m, ms, seq=seq) for m in mets}
    stat = [m for m in mets if sequential(m)] if seq else []
    if stat and all(out[m.name] == "successful" for m in stat):
        for m in mets:
            if out[m.name] is None and any(x.metric == m.name and x.phase == "successful" for x in ms):
                out[m.name] = metric_phase(m, ms, seq=True, final=True)
    return out


def overall(phases: Iterable[Phase | None]) -> Phase:
    """Failed if any metric failed, else error if any was, else inconclusive if any was (or never
    finished), else successful."""
    ps = list(phases)
    if "failed" in ps:
        return "failed"
    if "error" in ps:
        return "error"
    if "inconclusive" in ps or None in ps:
        return "inconclusive"
    return "successful"
