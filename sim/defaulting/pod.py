"""A Pod's defaults and what admission adds when one is created.

Defaults (every write, SetDefaults_Pod): the pod spec's (``podspec.py``), requests copied from
limits for each resource a container limits but does not request, ``enableServiceLinks: true``.

Create only (admission and the registry's PrepareForCreate): the DefaultTolerationSeconds plugin's
``not-ready`` / ``unreachable`` NoExecute tolerations (300 s), the Priority plugin's ``priority: 0``
and ``preemptionPolicy`` (no PriorityClass is modelled), and a fresh status: ``Pending`` with the
QoS class. The ServiceAccount plugin's part (``serviceAccountName``, the token volume) is in
``sim/serviceaccounts.py``, next to its refusal.
"""

from __future__ import annotations

from typing import Any

from lwsflow.sim.defaulting.podspec import default_pod_spec
from lwsflow.sim.defaulting.table import dicts

TOLERATION_SECONDS = 300  # --default-not-ready-toleration-seconds / --default-unreachable-...
_NO_EXECUTE = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")
_QOS_RESOURCES = ("cpu", "memory")


def default_pod(pod: dict[str, Any]) -> None:
    spec = pod.get("spec")
    if not isinstance(spec, dict):
        return
    default_pod_spec(spec)
    for c in (*dicts(spec, "initContainers"), *dicts(spec, "containers")):
        res = c.get("resources")
        limits = res.get("limits") if isinstance(res, dict) else None
        if isinstance(res, dict) and isinstance(limits, dict) and limits:
            requests = res.get("requests")
            res["requests"] = {**limits, **(requests if isinstance(requests, dict) else {})}
    if spec.get("enableServiceLinks") is None:
        spec["enableServiceLinks"] = True


def admit_new_pod(pod: dict[str, Any]) -> None:
    """What a Pod gets on create only: tolerations, priority, a fresh Pending status."""
    spec = pod.get("spec")
    if not isinstance(spec, dict):
        return
    given = spec.get("tolerations")
    tolerations: list[Any] = given if isinstance(given, list) else []
    for key in _NO_EXECUTE:
        if not any(_tolerates_no_execute(t, key) for t in tolerations):
            tolerations = [*tolerations, {"key": key, "operator": "Exists", "effect": "NoExecute",
                                          "tolerationSeconds": TOLERATION_SECONDS}]
    spec["tolerations"] = tolerations
    if not spec.get("priorityClassName"):
        spec.setdefault("priority", 0)
    spec.setdefault("preemptionPolicy", "PreemptLowerPriority")
    status = pod.get("status")
    pod["status"] = {"phase": "Pending", "qosClass": qos_class(spec),
                     **(status if isinstance(status, dict) else {})}


def _tolerates_no_execute(t: object, key: str) -> bool:
    """The plugin leaves a pod alone that already has a toleration for the taint: its key or none,
    with the NoExecute effect or none (plugin/pkg/admission/defaulttolerationseconds)."""
    if not isinstance(t, dict):
        return False
    return t.get("key") in (None, "", key) and t.get("effect") in (None, "", "NoExecute")


def qos_class(spec: dict[str, Any]) -> str:
    """Guaranteed (cpu and memory limited, requests equal to limits, in every container), BestEffort
    (no cpu or memory requests or limits anywhere), else Burstable (pkg/apis/core/v1/helper/qos)."""
    containers = [*dicts(spec, "initContainers"), *dicts(spec, "containers")]
    requests: list[dict[str, Any]] = []
    limits: list[dict[str, Any]] = []
    for c in containers:
        got = c.get("resources")
        res: dict[str, Any] = got if isinstance(got, dict) else {}
        requests.append({k: v for k, v in (res.get("requests") or {}).items() if k in _QOS_RESOURCES})
        limits.append({k: v for k, v in (res.get("limits") or {}).items() if k in _QOS_RESOURCES})
    if not any(requests) and not any(limits):
        return "BestEffort"
    guaranteed = all(set(lim) == set(_QOS_RESOURCES) and {**lim, **req} == lim
                     for req, lim in zip(requests, limits, strict=True))
    return "Guaranteed" if guaranteed else "Burstable"
