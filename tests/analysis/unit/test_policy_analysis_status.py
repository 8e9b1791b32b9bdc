"""status.analysis of a RolloutPolicy (controller/analysis/status.py): every measurement counted,
the last few kept in full, verdicts per stage, a new rollout starts afresh; the model and its CRD
accept what it writes (issue 17)."""

from __future__ import annotations

from lwsflow.controller.analysis import status as ast
from lwsflow.controller.analysis.evaluate import Measurement
from lwsflow.controller.policy.model import (
    ANALYSIS_MEASUREMENTS_LIMIT,
    RolloutPolicySpec,
    RolloutPolicyStatus,
)
from lwsflow.controller.policy.status import derived, same

NOW = "2026-01-01T00:00:00Z"


def _m(i: int, phase: str = "successful", value: float | None = 0.05) -> Measurement:
    return Measurement("ttft-p95", i, phase, value, 0.045 if value is not None else None)  # type: ignore[arg-type]


def test_measurements_are_counted_and_bounded() -> None:
    cur = ast.begin(None, "r1", 1, "new", "old", NOW)
    n = ANALYSIS_MEASUREMENTS_LIMIT + 5
    for i in range(1, n + 1):
        cur = ast.measured(cur, 1, _m(i, "inconclusive" if i == 1 else "successful",
                                      None if i == 1 else 0.05), NOW)
    cur = ast.finished(cur, 1, {"ttft-p95": "successful"}, "Successful", "analysis successful", NOW)
    [metric] = cur["metrics"]
    assert (metric["successful"], metric["inconclusive"], metric["failed"]) == (n - 1, 1, 0)
    assert [x["index"] for x in metric["measurements"]] == list(range(6, n + 1))
    assert "value" in metric["measurements"][-1] and metric["phase"] == "successful"
    assert cur["verdicts"] == [{"stage": 1, "phase": "Successful", "revision": "new", "stableRevision": "old",
                                "message": "analysis successful", "time": NOW}]
    RolloutPolicyStatus.model_validate({"analysis": cur})  # what the CRD's schema is made from


def test_next_stage_keeps_counts_a_new_rollout_starts_afresh() -> None:
    cur = ast.measured(ast.begin(None, "r1", 1, "new", "old", NOW), 1, _m(1), NOW)
    cur = ast.finished(cur, 1, {"ttft-p95": "successful"}, "Successful", "", NOW)
    second = ast.measured(ast.begin(cur, "r1", 2, "new", "old", NOW), 2, _m(1, "failed", 0.07), NOW)
    [metric] = second["metrics"]
    assert (metric["successful"], metric["failed"], metric["phase"]) == (1, 1, "successful")
    assert second["stage"] == 2 and second["phase"] == "Running" and len(second["verdicts"]) == 1
    fresh = ast.begin(second, "r2", 1, "newer", "new", NOW)
    assert fresh["metrics"] == [] and fresh["verdicts"] == [] and fresh["rolloutId"] == "r2"


def test_status_writes_leave_analysis_to_the_driver() -> None:
    """The reconcile loop's status is derived from the target; `analysis` is the driver's: an
    unchanged derived status is not rewritten because of it, and a write never carries a stale copy."""
    a = {"phase": "Progressing", "conditions": [], "analysis": {"rolloutId": "r1"}}
    assert same(a, {"phase": "Progressing", "conditions": []})
    assert "analysis" not in derived(a)


def test_policy_spec_takes_the_cli_analysis_spec_inline() -> None:
    spec = RolloutPolicySpec.model_validate({
        "targetRef": {"kind": "LeaderWorkerSet", "name": "m"}, "stages": [{"groups": 1}, {"groups": "100%"}],
        "analysis": {"window": "5s", "metrics": [{
            "name": "ttft-p95", "interval": "1s", "count": 3, "initialDelay": "5s",
            "provider": {"prometheus": {"query": "x{revision=\"{{revision}}\"}"}},
            "compare": {"mode": "relative", "tolerance": 10}}]}})
    assert spec.analysis is not None and spec.analysis.metrics[0].initial_delay == 5.0


def test_a_policy_analysis_without_an_analysis_wired_fails_every_stage() -> None:
    """A controller built without the analysis factory (the CLI always wires it) must not pass a stage
    unmeasured: the policy's analysis becomes a failing hook after each stage's checks."""
    from lwsflow.controller.incluster.driver import options
    from lwsflow.controller.rollout.hooks import HookContext, run_hook

    spec = RolloutPolicySpec.model_validate({
        "targetRef": {"kind": "LeaderWorkerSet", "name": "m"},
        "stages": [{"groups": 1, "checks": [{"http": {"url": "http://127.0.0.1:1/"}}]}, {"groups": "100%"}],
        "analysis": {"metrics": [{"name": "s", "provider": {"smoke": {}},
                                  "successCondition": "result >= 1"}]}})
    opts = options(spec, retry=False, smoke=None)
    assert opts.stage_hooks is not None
    assert [[getattr(h, "__name__", "") for h in hooks] for hooks in opts.stage_hooks] == [
        ["http:http://127.0.0.1:1/", "analysis:unavailable"], ["analysis:unavailable"]]
    res = run_hook(opts.stage_hooks[1][0], HookContext("LeaderWorkerSet", "default", "m", 2, 2, 2))
    assert not res.ok and "no analysis" in res.detail
