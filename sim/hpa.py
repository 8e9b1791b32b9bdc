"""What kube-controller-manager's HPA controller writes when the cluster has no metrics API, as the
embedded cluster has none (checked on the reference cluster, Kubernetes 1.36): the target's scale
is read (``AbleToScale``), the metrics cannot be (``ScalingActive=False``), so nothing is scaled.

* target missing: ``AbleToScale=False`` ``FailedGetScale``, ``currentMetrics: null``;
* target found: ``AbleToScale=True`` ``SucceededGetScale``, ``ScalingActive=False`` with the
  reason of the first metric (``FailedGetResourceMetric`` for a resource metric, and the message
  naming ``pods.metrics.k8s.io``), one empty entry per metric in ``currentMetrics``, the target's
  replicas as ``currentReplicas`` and ``desiredReplicas: 0``; Warning events as the controller's.

Pods, Object and External metrics get their reasons with the custom/external metrics API named;
their exact messages were not compared with a real cluster.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from lwsflow.sim import kinds
from lwsflow.sim.store import dotted, rfc3339

if TYPE_CHECKING:
    from lwsflow.sim.cluster import Cluster

HPA = kinds.HPA.key
COMPONENT = "horizontal-pod-autoscaler"
_NO_API = "the server could not find the requested resource"
_REASONS = {"Pods": "FailedGetPodsMetric", "Object": "FailedGetObjectMetric",
            "External": "FailedGetExternalMetric", "ContainerResource": "FailedGetContainerResourceMetric"}


def target_of(c: Cluster, hpa: dict) -> tuple[kinds.ResourceType | None, dict | None]:
    ref = (hpa.get("spec") or {}).get("scaleTargetRef") or {}
    rtype = kinds.BY_KIND.get((ref.get("apiVersion", ""), ref.get("kind", "")))
    if rtype is None:
        return None, None
    return rtype, c.store.get_raw(rtype.key, hpa["metadata"]["namespace"], ref.get("name", ""))


def reconcile(c: Cluster, ns: str, name: str) -> None:
    hpa = c.store.get_raw(HPA, ns, name)
    if hpa is None:
        return
    rtype, target = target_of(c, hpa)
    old = hpa.get("status") or {}
    since = {x.get("type"): x for x in old.get("conditions") or ()}
    now = rfc3339(c.now())
    ref = (hpa.get("spec") or {}).get("scaleTargetRef") or {}
    warnings: list[tuple[str, str]] = []
    if target is None or rtype is None or not rtype.has_scale:
        plural = f"{rtype.plural}.{rtype.group}" if rtype and rtype.group else (rtype.plural if rtype else "")
        msg = f'{plural} "{ref.get("name", "")}" not found'
        conds = [_cond(since, "AbleToScale", "False", "FailedGetScale",
                       f"the HPA controller was unable to get the target's current scale: {msg}", now)]
        status: dict[str, Any] = {"conditions": conds, "currentMetrics": None, "desiredReplicas": 0}
        warnings.append(("FailedGetScale", msg))
    else:
        metrics = (hpa.get("spec") or {}).get("metrics") or []
        reason, error = _metric_error(metrics[0] if metrics else {})
        conds = [
            _cond(since, "AbleToScale", "True", "SucceededGetScale",
                  "the HPA controller was able to get the target's current scale", now),
            _cond(since, "ScalingActive", "False", reason,
                  f"the HPA was unable to compute the replica count: {error}", now),
        ]
        status = {"conditions": conds, "currentMetrics": [{"type": ""} for _ in metrics],
                  "desiredReplicas": 0}
        current = int(dotted(target, rtype.scale_status_path) or 0)
        if current:
            status["currentReplicas"] = current  # omitempty
        warnings += [(reason, error), ("FailedComputeMetricsReplicas",
                                       f"invalid metrics ({len(metrics)} invalid out of {len(metrics)}), "
                                       f"first error is: failed to get {_what(metrics[0] if metrics else {})}"
                                       f" value: {error}")]
    if status != old:
        c.store.replace(HPA, {**hpa, "status": status}, subresource="status", check_version=False)
        for reason, message in warnings:
            c.emit_event(hpa, reason, message, etype="Warning", component=COMPONENT)


def _cond(since: dict[str, dict], ctype: str, status: str, reason: str, message: str, now: str) -> dict:
    old = since.get(ctype) or {}
    when = old.get("lastTransitionTime") if old.get("status") == status else now
    return {"type": ctype, "status": status, "lastTransitionTime": when, "reason": reason, "message": message}


def _metric_error(metric: dict) -> tuple[str, str]:
    kind = metric.get("type", "Resource")
    if kind in ("Resource", "ContainerResource"):
        source = metric.get("resource") or metric.get("containerResource") or {}
        res = source.get("name", "cpu")
        target = (source.get("target") or {}).get("type", "Utilization")
        how = "utilization" if target == "Utilization" else "usage"
        return _REASONS.get(kind, "FailedGetResourceMetric"), (
            f"failed to get {res} {how}: unable to get metrics for resource {res}: unable to fetch metrics "
            f"from resource metrics API: {_NO_API} (get pods.metrics.k8s.io)")
    source = metric.get(kind[:1].lower() + kind[1:]) or {}
    name = (source.get("metric") or {}).get("name", "")
    api = "external.metrics.k8s.io" if kind == "External" else "custom.metrics.k8s.io"
    return _REASONS.get(kind, "FailedGetPodsMetric"), (
        f"unable to get metric {name}: unable to fetch metrics from {api}: {_NO_API}")


def _what(metric: dict) -> str:
    kind = metric.get("type", "Resource")
    if kind == "Resource":
        return f"{(metric.get('resource') or {}).get('name', 'cpu')} resource metric"
    name = ((metric.get(kind[:1].lower() + kind[1:]) or {}).get("metric") or {}).get("name", "")
    return f"{name} {kind.lower()} metric"
