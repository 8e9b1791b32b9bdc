"""``status.analysis`` of a RolloutPolicy: every measurement and verdict of the rollout's analysis,
bounded (counts of all, the last ``ANALYSIS_MEASUREMENTS_LIMIT`` per metric in full, the last
``ANALYSIS_VERDICTS_LIMIT`` verdicts). Pure functions of (previous status, what happened).

Unlike the rest of the status this is not derived from the target's annotations (measurements live
nowhere else): the rollout's driver writes it. A new rollout id starts it afresh; a controller that
takes over continues the counts of the same rollout.
"""

from __future__ import annotations

from typing import Any

from lwsflow.controller.analysis.evaluate import Measurement, Phase
from lwsflow.controller.api.wire import Obj
from lwsflow.controller.policy.model import ANALYSIS_MEASUREMENTS_LIMIT, ANALYSIS_VERDICTS_LIMIT

VERDICT = {"successful": "Successful", "failed": "Failed", "inconclusive": "Inconclusive",
           "error": "Error"}


def begin(old: Obj | None, rollout_id: str, stage: int, revision: str, stable: str, now: str) -> Obj:
    """The status as a stage's analysis starts (``stage`` 1-based)."""
    cur: Obj = dict(old) if old and old.get("rolloutId") == rollout_id else {
        "rolloutId": rollout_id, "metrics": [], "verdicts": []}
    # the metrics keep their last verdict until this stage's (a skipped stage gives none)
    return {**cur, "stage": stage, "phase": "Running", "revision": revision, "stableRevision": stable,
            "metrics": list(cur.get("metrics") or [])}


def measured(cur: Obj, stage: int, m: Measurement, now: str) -> Obj:
    """``cur`` with one more measurement of ``m.metric``."""
    metrics: list[dict[str, Any]] = [dict(x) for x in cur.get("metrics") or []]
    entry = next((x for x in metrics if x.get("name") == m.metric), None)
    if entry is None:
        entry = {"name": m.metric, "phase": "", "successful": 0, "failed": 0, "inconclusive": 0,
                 "error": 0, "measurements": []}
        metrics.append(entry)
    entry[m.phase] = int(entry.get(m.phase) or 0) + 1
    rec: dict[str, Any] = {"stage": stage, "index": m.index, "phase": m.phase, "detail": m.detail[:300],
                           "time": now}
    if m.value is not None:  # absent, not null: the CRD's structural schema has no nullable numbers
        rec["value"] = m.value
    if m.baseline is not None:
        rec["baseline"] = m.baseline
    entry["measurements"] = [*(entry.get("measurements") or []), rec][-ANALYSIS_MEASUREMENTS_LIMIT:]
    return {**cur, "metrics": metrics}


def finished(cur: Obj, stage: int, metric_phases: dict[str, Phase | None], phase: str, message: str,
             now: str) -> Obj:
    """``cur`` with the stage's verdict (``phase``: Successful, Failed, Inconclusive, Error or Skipped)."""
    # a metric without a verdict was cut short (the analysis stops at the first failed metric); a
    # skipped stage measured nothing and leaves the last verdicts as they were
    metrics = [x if phase == "Skipped" else {**x, "phase": metric_phases.get(x["name"]) or "undecided"}
               for x in cur.get("metrics") or []]
    verdict = {"stage": stage, "phase": phase, "revision": cur.get("revision", ""),
               "stableRevision": cur.get("stableRevision", ""), "message": message[:500], "time": now}
    verdicts = [*(cur.get("verdicts") or []), verdict][-ANALYSIS_VERDICTS_LIMIT:]
    return {**cur, "phase": phase, "metrics": metrics, "verdicts": verdicts}
