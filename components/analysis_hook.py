"""An analysis spec as a rollout stage hook: after a stage's gate, measure the new revision against the
stable one (``controller/analysis``) and pass or fail the stage on the verdict.

The revisions come from the API: the new one is the leader StatefulSet's template hash (what the LWS
controller writes to updated groups), the stable one the other hash among the serving leader pods,
remembered from the first stage so the last stage (no stable pod left) can say so. When lwsflow runs
its own Prometheus, the hook rewrites its file_sd targets from the pods before measuring.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

from lwsflow.components.prometheus import Prometheus
from lwsflow.controller.analysis.evaluate import Measurement
from lwsflow.controller.analysis.providers import SmokeMeasure
from lwsflow.controller.analysis.run import provider_measure, run_analysis
from lwsflow.controller.analysis.spec import AnalysisSpec
from lwsflow.controller.api import labels as L
from lwsflow.controller.kube.client import Kube
from lwsflow.controller.kube.resources import POD, STATEFULSET
from lwsflow.controller.rollout.hooks import Hook, HookContext, HookResult


def _label(obj: dict, key: str) -> str:
    return str(((obj.get("metadata") or {}).get("labels") or {}).get(key, ""))


def revisions(kube: Kube, namespace: str, lws: str) -> tuple[str, str, list[dict]]:
    """(new, stable, pods): stable is the most common other revision among running leaders ("" if none)."""
    pods, _ = kube.list(POD, namespace, label_selector=f"{L.NAME}={lws}")
    new = _label(kube.get(STATEFULSET, namespace, lws), L.TEMPLATE_REVISION_HASH)
    leaders = [p for p in pods if _label(p, L.WORKER_INDEX) == "0"
               and (p.get("status") or {}).get("phase") == "Running"]
    others = Counter(h for p in leaders if (h := _label(p, L.TEMPLATE_REVISION_HASH)) and h != new)
    return new, (others.most_common(1)[0][0] if others else ""), pods


# (stage context, the run's arguments, the measurement just taken): the policy status and Events
OnMeasurement = Callable[[HookContext, dict[str, str], Measurement], None]


def analysis_hook(spec: AnalysisSpec, kube: Kube, prometheus_url: str | None,
                  prometheus: Prometheus | None = None, *, smoke: SmokeMeasure | None = None,
                  on_measurement: OnMeasurement | None = None) -> Hook:
    """The stage hook; LeaderWorkerSet targets (one LWS per role of a pair is future work).
    ``smoke`` wires the smoke provider; ``on_measurement`` sees each measurement as it is taken."""
    remembered = {"stable": ""}
    needs_stable = any(m.compare for m in spec.metrics)

    def analysis(ctx: HookContext) -> HookResult:
        if ctx.kind != L.LWS_KIND:
            return HookResult(False, f"analysis: {ctx.kind} targets are not supported yet (LeaderWorkerSet "
                                     "only)")
        new, stable, pods = revisions(kube, ctx.namespace, ctx.name)
        if prometheus is not None:  # our own Prometheus: scrape the serving pods before measuring
            all_pods, _ = kube.list(POD, ctx.namespace)
            groups = prometheus.sync_from_pods(all_pods, namespace=ctx.namespace)
            names = {(g["labels"]["pod"], g["labels"]["revision"]) for g in groups
                     if g["labels"]["lws"] == ctx.name}
            if not prometheus.wait_for_targets(names):
                return HookResult(False, f"analysis: Prometheus did not scrape {sorted(names)} in time")
        stable = stable or remembered["stable"]
        remembered["stable"] = stable
        if needs_stable and not any(_label(p, L.TEMPLATE_REVISION_HASH) == stable for p in pods):
            return HookResult(True, f"analysis skipped at stage {ctx.stage}: no pod of the stable revision "
                                    "serves any more to compare with")
        role = _label(ctx.obj, L.ROLE) or "aggregated"
        args = {"revision": new, "stable_revision": stable, "namespace": ctx.namespace, "lws": ctx.name,
                "role": role}
        seen = None if on_measurement is None else (lambda m: on_measurement(ctx, args, m))
        res = run_analysis(spec, args, provider_measure(prometheus_url, smoke), on_measurement=seen)
        summary = ", ".join(f"{k}={v or 'not run'}" for k, v in res.metrics.items())
        return HookResult(res.phase == "successful", f"analysis {res.phase} ({new} vs {stable}): {summary}",
                          [m.as_dict() for m in res.measurements])
    analysis.__name__ = "analysis"
    return analysis
