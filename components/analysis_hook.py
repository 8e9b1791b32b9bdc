"""An analysis spec as a rollout stage hook: after a stage's gate, measure the new revision against the
stable one (``controller/analysis``) and pass or fail the stage on the verdict.

The analysis runs **per role**: an LWS has one (its ``lwsflow.io/role``, else ``aggregated``); each LWS
of a P/D pair is rolled (and so analysed) as its own role, decode first; a DisaggregatedSet is analysed
once per role after its one stage. Per role, the new revision is the template hash of the role's newest
LWS (its leader StatefulSet's, what the LWS controller writes to updated groups; for a DS the child LWS
created last) and the stable one the other hash among that role's running leaders, remembered per role
from an earlier stage so a later one (no stable pod left) can say so. The arguments are ``{{role}}``,
``{{lws}}`` (the LWS, or for a DS the DS: Prometheus labels its pods with it, as its child LWS are
renamed at every revision), ``{{revision}}``, ``{{stable_revision}}``, ``{{namespace}}``. When lwsflow
runs its own Prometheus, the hook rewrites its file_sd targets from the pods before measuring.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from lwsflow.components.prometheus import Prometheus
from lwsflow.controller.analysis.evaluate import Measurement
from lwsflow.controller.analysis.providers import SmokeMeasure
from lwsflow.controller.analysis.run import Measure, provider_measure, run_analysis
from lwsflow.controller.analysis.spec import AnalysisSpec
from lwsflow.controller.api import labels as L
from lwsflow.controller.kube.client import Kube
from lwsflow.controller.kube.resources import LWS, POD, STATEFULSET
from lwsflow.controller.rollout.hooks import Hook, HookContext, HookResult


def _label(obj: dict, key: str) -> str:
    return str(((obj.get("metadata") or {}).get("labels") or {}).get(key, ""))


@dataclass(frozen=True)
class RoleTarget:
    """One role to analyse: the ``{{lws}}`` and ``{{role}}`` arguments, its revisions and its pods."""

    lws: str
    role: str
    new: str
    stable: str  # "" when no pod of another revision runs
    pods: list[dict]


def _split(new: str, pods: list[dict]) -> str:
    """The most common revision other than ``new`` among running leaders ("" if none)."""
    leaders = [p for p in pods if _label(p, L.WORKER_INDEX) == "0"
               and (p.get("status") or {}).get("phase") == "Running"]
    others = Counter(h for p in leaders if (h := _label(p, L.TEMPLATE_REVISION_HASH)) and h != new)
    return others.most_common(1)[0][0] if others else ""


def revisions(kube: Kube, namespace: str, lws: str) -> tuple[str, str, list[dict]]:
    """(new, stable, pods) of one LWS: stable is the most common other revision among running leaders."""
    pods, _ = kube.list(POD, namespace, label_selector=f"{L.NAME}={lws}")
    new = _label(kube.get(STATEFULSET, namespace, lws), L.TEMPLATE_REVISION_HASH)
    return new, _split(new, pods), pods


def ds_targets(kube: Kube, namespace: str, ds: str) -> list[RoleTarget]:
    """Per role of a DisaggregatedSet: the newest child LWS's revision against the role's other pods
    (lws-semantics §f: the child LWS with the newest creationTimestamp per role is the target)."""
    children, _ = kube.list(LWS, namespace, label_selector=f"{L.DS_NAME}={ds}")
    newest: dict[str, dict] = {}
    for c in children:
        role = _label(c, L.DS_ROLE)
        key = ((c.get("metadata") or {}).get("creationTimestamp") or "", c["metadata"]["name"])
        cur = newest.get(role)
        if cur is None or key > ((cur["metadata"].get("creationTimestamp") or ""), cur["metadata"]["name"]):
            newest[role] = c
    out = []
    for role, child in sorted(newest.items()):
        pods, _ = kube.list(POD, namespace, label_selector=f"{L.DS_NAME}={ds},{L.DS_ROLE}={role}")
        new = _label(kube.get(STATEFULSET, namespace, child["metadata"]["name"]), L.TEMPLATE_REVISION_HASH)
        out.append(RoleTarget(ds, role, new, _split(new, pods), pods))
    return out


def targets(kube: Kube, ctx: HookContext) -> list[RoleTarget]:
    """The roles a stage of ``ctx``'s target analyses (one for an LWS or a pair role, all for a DS)."""
    if ctx.kind == L.DS_KIND:
        return ds_targets(kube, ctx.namespace, ctx.name)
    new, stable, pods = revisions(kube, ctx.namespace, ctx.name)
    return [RoleTarget(ctx.name, _label(ctx.obj, L.ROLE) or "aggregated", new, stable, pods)]


# (stage context, the run's arguments, the measurement just taken): the policy status and Events
OnMeasurement = Callable[[HookContext, dict[str, str], Measurement], None]


def analysis_hook(spec: AnalysisSpec, kube: Kube, prometheus_url: str | None,
                  prometheus: Prometheus | None = None, *, smoke: SmokeMeasure | None = None,
                  on_measurement: OnMeasurement | None = None) -> Hook:
    """The stage hook for LeaderWorkerSet, P/D-pair and DisaggregatedSet targets. ``smoke`` wires the
    smoke provider; ``on_measurement`` sees each measurement as it is taken."""
    remembered: dict[tuple[str, str], str] = {}  # (lws, role) -> stable revision seen at an earlier stage
    needs_stable = any(m.compare for m in spec.metrics)

    def analysis(ctx: HookContext) -> HookResult:
        if ctx.accepted:  # paused inconclusive, then promoted: a person decided for this stage
            return HookResult(True, f"analysis at stage {ctx.stage}: inconclusive, passed by promote")
        if ctx.compare:
            return _blue_green(spec, kube, provider_measure(prometheus_url, smoke), prometheus, ctx)
        if ctx.kind not in (L.LWS_KIND, L.DS_KIND):
            return HookResult(False, f"analysis: {ctx.kind} targets are not supported")
        roles = targets(kube, ctx)
        stables = {(t.lws, t.role): t.stable or remembered.get((t.lws, t.role), "") for t in roles}
        remembered.update(stables)
        # a role with no stable pod left is skipped before, not after, waiting for Prometheus to scrape
        # the others (up to ~6 s for its discovery: docs/analysis.md, the time rule)
        skip = {(t.lws, t.role) for t in roles if needs_stable and not any(
            _label(p, L.TEMPLATE_REVISION_HASH) == stables[(t.lws, t.role)] for p in t.pods)}
        want = {(t.lws, t.role) for t in roles} - skip
        unscraped = _scrape_first(prometheus, kube, ctx.namespace,
                                  lambda lab: (lab["lws"], lab["role"]) in want) if want else None
        if unscraped is not None:
            return unscraped
        ok, pause, details, records = True, False, [], []
        for t in roles:
            stable = stables[(t.lws, t.role)]
            who = f"role {t.role}" if len(roles) > 1 or t.role != "aggregated" else ""
            if (t.lws, t.role) in skip:
                details.append(f"analysis skipped{' for ' + who if who else ''} at stage {ctx.stage}: no pod "
                               "of the stable revision serves any more to compare with")
                continue
            args = {"revision": t.new, "stable_revision": stable, "namespace": ctx.namespace, "lws": t.lws,
                    "role": t.role}
            seen = None if on_measurement is None else (lambda m, a=args: on_measurement(ctx, a, m))
            res = run_analysis(spec, args, provider_measure(prometheus_url, smoke), on_measurement=seen)
            summary = res.summary()  # with a note when metrics were short of traffic
            details.append(f"analysis {res.phase}{' (' + who + ')' if who else ''} ({t.new} vs {stable}): "
                           f"{summary}")
            records += [{**m.as_dict(), "role": t.role} for m in res.measurements]
            ok = ok and res.phase == "successful"
            # no decision (too little evidence): a person decides, unless the spec says roll back
            pause = res.phase == "inconclusive" and spec.on_inconclusive == "pause"
            if not ok:
                break  # the first role without a pass decides the stage
        return HookResult(ok, "; ".join(details) or "analysis: no role to analyse", records,
                          pause=pause and not ok)
    analysis.__name__ = "analysis"
    return analysis


def _scrape_first(prometheus: Prometheus | None, kube: Kube, namespace: str,
                  keep: Callable[[dict[str, str]], bool]) -> HookResult | None:
    """With our own Prometheus: point it at ``namespace``'s serving pods and wait until the targets
    whose labels ``keep`` selects have been scraped; a failed HookResult when they were not in time."""
    if prometheus is None:
        return None
    all_pods, _ = kube.list(POD, namespace)
    groups = prometheus.sync_from_pods(all_pods, namespace=namespace)
    names = {(g["labels"]["pod"], g["labels"]["revision"]) for g in groups if keep(g["labels"])}
    if not prometheus.wait_for_targets(names):
        return HookResult(False, f"analysis: Prometheus did not scrape {sorted(names)} in time")
    return None


def _bg_revision(kube: Kube, ctx: HookContext, name: str, role: str) -> str:
    """The revision of ``role`` in a blue-green side: an LWS's leader StatefulSet's, or for a DS
    (``name`` the DS, as Prometheus labels its pods) its role's newest child LWS's."""
    if ctx.kind == L.DS_KIND:
        return next((t.new for t in ds_targets(kube, ctx.namespace, name) if t.role == role), "")
    return _label(kube.get(STATEFULSET, ctx.namespace, name), L.TEMPLATE_REVISION_HASH)


def _blue_green(spec: AnalysisSpec, kube: Kube, measure: Measure, prometheus: Prometheus | None,
                ctx: HookContext) -> HookResult:
    """One weight stage of a blue-green: each role's green LWS (or DS role) against blue's (both serve
    now)."""
    if ctx.target_groups >= 100 and any(m.compare for m in spec.metrics):
        return HookResult(True, "analysis skipped at green 100%: blue serves no traffic to compare with")
    lws = {n for pair in ctx.compare.values() for n in pair}
    unscraped = _scrape_first(prometheus, kube, ctx.namespace, lambda lab: lab["lws"] in lws)
    if unscraped is not None:
        return unscraped
    details: list[str] = []
    records: list[dict[str, object]] = []
    for role, (green, blue) in ctx.compare.items():
        new, stable = _bg_revision(kube, ctx, green, role), _bg_revision(kube, ctx, blue, role)
        args = {"revision": new, "stable_revision": stable, "namespace": ctx.namespace, "lws": green,
                "stable_lws": blue, "role": role}
        res = run_analysis(spec, args, measure)
        summary = res.summary()  # with a note when metrics were short of traffic
        details.append(f"{role} {res.phase} ({green} vs {blue}): {summary}")
        records.extend({"role": role, **m.as_dict()} for m in res.measurements)
        if res.phase != "successful":
            return HookResult(False, f"analysis at green {ctx.target_groups}%: " + "; ".join(details),
                              records)
    return HookResult(True, f"analysis at green {ctx.target_groups}%: " + "; ".join(details), records)
