"""A RolloutPolicy's analysis in the in-cluster controller: the stage hook, recorded in the policy's
status (``status.analysis``, bounded) and as Events on the policy, measurement by measurement.

The hook itself (revisions from the API, Prometheus targets, the measuring loop) is the same as
``lwsflow rollout --analysis``'s; it lives in components, so the CLI wires a factory in
(``AnalysisFactory``), as it does for the smoke check.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from lwsflow.controller.analysis import evaluate as ev
from lwsflow.controller.analysis import status as ast
from lwsflow.controller.analysis.spec import AnalysisSpec
from lwsflow.controller.api import labels as L
from lwsflow.controller.api.wire import Obj
from lwsflow.controller.errors import ApiError
from lwsflow.controller.kube.client import Kube
from lwsflow.controller.kube.events import EventRecorder
from lwsflow.controller.kube.resources import ROLLOUT_POLICY
from lwsflow.controller.rollout import state
from lwsflow.controller.rollout.hooks import Hook, HookContext, HookResult, run_hook

log = logging.getLogger("lwsflow.controller.analysis")

OnMeasurement = Callable[[HookContext, dict[str, str], ev.Measurement], None]
AnalysisFactory = Callable[[AnalysisSpec, OnMeasurement], Hook]
"""(spec, on_measurement) -> the stage hook (``components.analysis_hook.analysis_hook``)."""


class AnalysisRecorder:
    """Keeps ``status.analysis`` of one policy for one driver and emits its Events."""

    def __init__(self, kube: Kube, events: EventRecorder, policy: Obj, spec: AnalysisSpec,
                 now: Callable[[], float], rollout_id: Callable[[HookContext], str] | None = None) -> None:
        self.kube, self.events, self.policy, self.spec, self.now = kube, events, policy, spec, now
        # the id of the rollout a stage belongs to (default: the target's rollout annotations; a
        # blue-green's is on its HTTPRoute)
        self.rollout_id = rollout_id or (lambda ctx: state.RolloutState.from_object(ctx.obj).id)
        self.cur: Obj | None = (policy.get("status") or {}).get("analysis")
        self._stage: tuple[str, int] | None = None  # (rollout id, stage) the current entry belongs to
        self._taken: list[ev.Measurement] = []
        self._lock = threading.Lock()

    def _ensure(self, ctx: HookContext, args: dict[str, str] | None) -> Obj:
        key = (self.rollout_id(ctx), ctx.stage)
        if self._stage != key or self.cur is None:
            self._stage, self._taken = key, []
            a = args or {}
            self.cur = ast.begin(self.cur, key[0], ctx.stage, a.get("revision", ""),
                                 a.get("stable_revision", ""), state.iso(self.now()))
        return self.cur

    def measured(self, ctx: HookContext, args: dict[str, str], m: ev.Measurement) -> None:
        with self._lock:
            cur = self._ensure(ctx, args)
            self._taken.append(m)
            self.cur = ast.measured(cur, ctx.stage, m, state.iso(self.now()))
            self._write()
        self.events.emit(self.policy, "AnalysisMeasurement", f"stage {ctx.stage}: {m.line()}"[:1000],
                         warning=m.phase == "failed")

    def finished(self, ctx: HookContext, res: HookResult) -> None:
        with self._lock:
            cur = self._ensure(ctx, None)
            phases = ev.metric_phases(self.spec.metrics, self._taken)  # sequential, as run_analysis
            if not self._taken:  # skipped (no stable pod left to compare with), or an error before measuring
                phase = "Skipped" if res.ok else "Failed"
            elif res.ok:
                phase = "Successful"
            else:
                phase = ast.VERDICT[ev.overall(phases.values())]
            self.cur = ast.finished(cur, ctx.stage, phases, phase, res.detail, state.iso(self.now()))
            self._write()
        then = ("; the rollout pauses: `kubectl lwsflow promote` passes the stage, `kubectl lwsflow "
                "abort` rolls it back") if res.pause else ""
        self.events.emit(self.policy, f"Analysis{phase}", f"stage {ctx.stage}{then}: {res.detail}"[:1000],
                         warning=phase in ("Failed", "Inconclusive", "Error"))

    def _write(self) -> None:
        meta = self.policy["metadata"]
        try:
            self.kube.merge_patch(ROLLOUT_POLICY, meta["namespace"], meta["name"],
                                  {"status": {"analysis": self.cur}}, field_manager=L.FIELD_MANAGER,
                                  subresource="status")
        except ApiError as exc:  # the status is a record; the rollout's verdict does not depend on it
            log.warning("%s/%s: status.analysis: %s", meta["namespace"], meta["name"], exc)


def recorded_hook(factory: AnalysisFactory, rec: AnalysisRecorder) -> Hook:
    """The analysis hook, with every measurement and the verdict recorded by ``rec``."""
    inner = factory(rec.spec, rec.measured)

    def analysis(ctx: HookContext) -> HookResult:
        res = run_hook(inner, ctx)
        rec.finished(ctx, res)
        return res
    analysis.__name__ = "analysis"
    return analysis


def unavailable_hook() -> Hook:
    """A policy with an analysis but no analysis wired into this controller: fail, never pass unmeasured."""
    def analysis(_ctx: HookContext) -> HookResult:
        return HookResult(False, "analysis: no analysis is wired into this controller")
    analysis.__name__ = "analysis:unavailable"
    return analysis
