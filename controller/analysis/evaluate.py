"""Judging measurements and metrics (pure: no I/O, no clock) — Argo Rollouts' rules.

A measurement is ``failed`` when the failure condition holds, or the success condition is set and does
not hold; ``successful`` when the success condition holds (or only a failure condition is set and it
does not); ``inconclusive`` when a value it needs is missing (no samples yet, no baseline) or the
provider failed. A metric fails once more than ``failureLimit`` measurements failed and is
inconclusive when more than ``inconclusiveLimit`` were inconclusive; the analysis fails when any
metric fails.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from lwsflow.controller.analysis import expr
from lwsflow.controller.analysis.spec import Metric

Phase = Literal["successful", "failed", "inconclusive"]


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


def judge(metric: Metric, value: float | None, baseline: float | None = None,
          error: str = "") -> tuple[Phase, str]:
    """The phase of one measurement and why."""
    if error:
        return "inconclusive", error
    if value is None or math.isnan(value):
        return "inconclusive", "no data"
    succ, fail = metric.conditions()
    values = {"result": value, "baseline": baseline}
    try:
        if fail is not None and expr.evaluate(fail, values):
            return "failed", f"failureCondition {metric.failure_condition} holds"
        if succ is not None:
            if expr.evaluate(succ, values):
                return "successful", ""
            return "failed", "successCondition does not hold" if not metric.compare else (
                f"worse than stable beyond tolerance ({metric.compare.condition()})")
    except expr.MissingValue as missing:
        return "inconclusive", f"no value for {missing}"
    return "successful", ""


def metric_phase(metric: Metric, measurements: Iterable[Measurement]) -> Phase | None:
    """The metric's verdict so far: failed/inconclusive once a limit is passed, else None (running)."""
    ms = [m for m in measurements if m.metric == metric.name]
    if sum(m.phase == "failed" for m in ms) > metric.failure_limit:
        return "failed"
    if sum(m.phase == "inconclusive" for m in ms) > metric.inconclusive_limit:
        return "inconclusive"
    return "successful" if len(ms) >= metric.count else None


def overall(phases: Iterable[Phase | None]) -> Phase:
    """Failed if any metric failed, else inconclusive if any was (or never finished), else successful."""
    ps = list(phases)
    if "failed" in ps:
        return "failed"
    if "inconclusive" in ps or None in ps:
        return "inconclusive"
    return "successful"
