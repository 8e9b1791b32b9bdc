"""An analysis spec as a rollout stage hook: after a stage's gate, measure the new revision against the
stable one (``controller/analysis``) and pass or fail the stage on the verdict.

The revisions come from the API: the new one is the leader StatefulSet's template hash (what the LWS
controller writes to updated groups), the stable one the other hash among the serving leader pods,
remembered from the first stage so the last stage (no stable pod left) can say so. When lwsflow runs
its own Prometheus, the hook rewrites its file_sd targets from the pods before measuring.
"""

from __future__ import annotations

from collections import Counter

from lwsflow.components.prometheus import Prometheus
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


def analysis_hook(spec: AnalysisSpec, kube: Kube, prometheus_url: str | None,
                  prometheus: Prometheus | None = None) -> Hook:
    """The stage hook; LeaderWorkerSet targets (one LWS per role of a pair is future work)."""
    remembered = {"stable": ""}
    needs_stable = any(m.compare for m in spec.metrics)

    def analysis(ctx: HookContext) -> HookResult:
        if ctx.compare:
            return _blue_green(spec, kube, prometheus_url, prometheus, ctx)
        if ctx.kind != L.LWS_KIND:
            return HookResult(False, f"analysis: {ctx.kind} targets are not supported yet (LeaderWorkerSet "
                                     "only)")
        new, stable, pods = revisions(kube, ctx.namespace, ctx.name)
        if prometheus is not None:  # our own Prometheus: scrape the serving pods before measuring
            all_pods, _ = kube.list(POD, ctx.namespace)
            groups = prometheus.sync_from_pods(all_pods)
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
        res = run_analysis(spec, args, provider_measure(prometheus_url))
        summary = ", ".join(f"{k}={v or 'not run'}" for k, v in res.metrics.items())
        return HookResult(res.phase == "successful", f"analysis {res.phase} ({new} vs {stable}): {summary}",
                          [m.as_dict() for m in res.measurements])
    analysis.__name__ = "analysis"
    return analysis


def _blue_green(spec: AnalysisSpec, kube: Kube, prometheus_url: str | None, prometheus: Prometheus | None,
                ctx: HookContext) -> HookResult:
    """One weight stage of a blue-green: each role's green LWS against its blue LWS (both serve now)."""
    if ctx.target_groups >= 100 and any(m.compare for m in spec.metrics):
        return HookResult(True, "analysis skipped at green 100%: blue serves no traffic to compare with")
    if prometheus is not None:
        all_pods, _ = kube.list(POD, ctx.namespace)
        groups = prometheus.sync_from_pods(all_pods)
        lws = {n for pair in ctx.compare.values() for n in pair}
        names = {(g["labels"]["pod"], g["labels"]["revision"]) for g in groups if g["labels"]["lws"] in lws}
        if not prometheus.wait_for_targets(names):
            return HookResult(False, f"analysis: Prometheus did not scrape {sorted(names)} in time")
    details: list[str] = []
    records: list[dict[str, object]] = []
    for role, (green, blue) in ctx.compare.items():
        new = _label(kube.get(STATEFULSET, ctx.namespace, green), L.TEMPLATE_REVISION_HASH)
        stable = _label(kube.get(STATEFULSET, ctx.namespace, blue), L.TEMPLATE_REVISION_HASH)
        args = {"revision": new, "stable_revision": stable, "namespace": ctx.namespace, "lws": green,
                "stable_lws": blue, "role": role}
        res = run_analysis(spec, args, provider_measure(prometheus_url))
        summary = ", ".join(f"{k}={v or 'not run'}" for k, v in res.metrics.items())
        details.append(f"{role} {res.phase} ({green} vs {blue}): {summary}")
        records.extend({"role": role, **m.as_dict()} for m in res.measurements)
        if res.phase != "successful":
            return HookResult(False, f"analysis at green {ctx.target_groups}%: " + "; ".join(details),
                              records)
    return HookResult(True, f"analysis at green {ctx.target_groups}%: " + "; ".join(details), records)
