"""Applying a model's built manifest to a cluster: supporting objects, first installs, stage plans.

The rollout controller stages *updates* of a LeaderWorkerSet / DisaggregatedSet that already runs. A
model's first release has nothing to stage: the workload is applied as is and the step waits, with a
deadline in the cluster's clock, until the same readiness predicates the rollout gate uses hold
(``lwsflow.controller.rollout.gate``). Services, autoscalers and other objects around the workload are
server-side applied on every release (idempotent).
"""

from __future__ import annotations

import math
import time
from typing import Any

from lwsflow.controller.api.objects import container_images
from lwsflow.controller.errors import InvalidInput, OperationFailed

FIELD_MANAGER = "lwsflow-pipeline"  # server-side apply owner of what the pipeline applies
_RESOURCES = {
    ("v1", "Service"): ("", "v1", "services"),
    ("v1", "ConfigMap"): ("", "v1", "configmaps"),
    ("autoscaling/v2", "HorizontalPodAutoscaler"): ("autoscaling", "v2", "horizontalpodautoscalers"),
    # llm-d's routing objects (catalog ``llmd:``, docs/llm-d.md)
    ("inference.networking.k8s.io/v1", "InferencePool"): (
        "inference.networking.k8s.io", "v1", "inferencepools"),
    ("gateway.networking.k8s.io/v1", "HTTPRoute"): ("gateway.networking.k8s.io", "v1", "httproutes"),
}


def workloads(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    from lwsflow.controller.kube.resources import BY_KIND

    return [d for d in docs if d.get("kind") in BY_KIND]


def apply_supporting(kube: Any, docs: list[dict[str, Any]]) -> bool:
    """Apply everything but the workload; True when the workload does not exist yet (first install)."""
    from lwsflow.controller.errors import NotFound
    from lwsflow.controller.kube.resources import BY_KIND, Resource

    first = False
    for d in workloads(docs):
        meta = d["metadata"]
        try:
            kube.get(BY_KIND[d["kind"]], meta.get("namespace", "default"), meta["name"])
        except NotFound:
            first = True
    for d in docs:
        if d.get("kind") in BY_KIND:
            continue
        key = _RESOURCES.get((d.get("apiVersion", ""), d.get("kind", "")))
        if key is None:
            raise InvalidInput(f"cannot apply {d.get('apiVersion')}/{d.get('kind')}", field="manifest")
        kube.apply(Resource(*key), d, field_manager=FIELD_MANAGER)
    return first


def _ready(kube: Any, ns: str, obj: dict[str, Any]) -> tuple[bool, str]:
    from lwsflow.controller.rollout import gate
    from lwsflow.controller.rollout.ds import DsKind

    if obj.get("kind") == "DisaggregatedSet":  # a DS without status is judged by its child LWS
        res = gate.ds_gate(obj, DsKind(kube, ns).children(obj))
    else:
        res = gate.lws_fully_rolled(obj)
    return res.passed, res.detail


def install(kube: Any, docs: list[dict[str, Any]], deadline_s: float) -> dict[str, Any]:
    """Apply the workload(s) and wait until every one is fully ready; a report shaped like a rollout's.

    Fails (``OperationFailed``) when readiness does not come within ``deadline_s`` of cluster time.
    """
    from lwsflow.controller.kube.resources import BY_KIND
    from lwsflow.controller.rollout.session import clock_for

    clock = clock_for(kube)
    started = clock.now()
    objs = workloads(docs)
    for d in objs:
        kube.apply(BY_KIND[d["kind"]], d, field_manager=FIELD_MANAGER)
    pending = {(d["kind"], d["metadata"].get("namespace", "default"), d["metadata"]["name"]) for d in objs}
    detail = ""
    while pending:
        for kind, ns, name in sorted(pending):
            ok, detail = _ready(kube, ns, kube.get(BY_KIND[kind], ns, name))
            if ok:
                pending.discard((kind, ns, name))
        if not pending:
            break
        if clock.now() - started > deadline_s:
            names = ", ".join(f"{k}/{n}" for k, _, n in sorted(pending))
            raise OperationFailed(f"install: {names} not ready within {deadline_s:.0f}s: {detail}")
        time.sleep(min(1.0, max(0.02, clock.wall(5.0))))  # 5 s of cluster time between looks
    ended = clock.now()
    replicas = [int((d.get("spec") or {}).get("replicas") or 1) for d in objs]
    return {"kind": objs[0]["kind"] if objs else "", "mode": "install", "result": "succeeded",
            "message": "first install: every group ready", "started": started, "ended": ended,
            "targets": [sum(replicas)], "rollbacks": [],
            "stages": [{"index": 1, "role": "", "target_groups": sum(replicas), "result": "passed",
                        "started": started, "gate_passed": ended, "ended": ended}]}


def staged_rollout(kube: Any, target: str, namespace: str, manifest: Any, *, stages: str, deadline: str,
                   bake: str, hooks: list[Any], log: Any) -> Any:
    """The controller's staged rollout of ``target`` to ``manifest`` (``lwsflow.controller.rollout.session``),
    in the cluster's clock; returns its ``Outcome`` (``exit_code`` 0 only when every stage passed)."""
    from lwsflow.controller.api.duration import parse_duration
    from lwsflow.controller.rollout import session
    from lwsflow.controller.rollout.engine import RolloutOptions

    tgt = session.parse_target(target, namespace)
    opts = RolloutOptions(stages=stages, bake_s=parse_duration(bake, "bake"),
                          deadline_s=parse_duration(deadline, "deadline"))
    opts.hooks.extend(hooks)
    return session.run(kube, session.clock_for(kube), tgt, opts, manifest=manifest,
                       on_step=lambda step: log(f"  {step}"), log=log)


def verify_live(kube: Any, docs: list[dict[str, Any]]) -> None:
    """The postcondition of a release: the cluster's workloads carry exactly the manifest's images.

    A rollout that reports success but left another template in place fails here, so a wrong
    "succeeded" can never let the pipeline promote an image the cluster does not run.
    """
    from lwsflow.controller.kube.resources import BY_KIND

    for d in workloads(docs):
        meta = d["metadata"]
        live = kube.get(BY_KIND[d["kind"]], meta.get("namespace", "default"), meta["name"])
        want, got = set(container_images(d)), set(container_images(live))
        if want != got:
            raise OperationFailed(f"{d['kind']}/{meta['name']} runs {', '.join(sorted(got))}, not the "
                                  f"released {', '.join(sorted(want))}")


def feasible_stages(stages: str, replicas: int) -> tuple[str, list[str]]:
    """Drop stages that would not update more groups than the one before at this replica count.

    A catalog's stages (``1,100%``) are written for its largest environment; with one replica in dev
    both resolve to one group, which the controller refuses. Keeping the strictly increasing ones
    (and always the last, 100%) is the same plan at this size. Returns (stages, dropped).
    """
    kept: list[str] = []
    dropped: list[str] = []
    last = 0
    items = [s.strip() for s in stages.split(",") if s.strip()]
    for i, item in enumerate(items):
        count = math.ceil(float(item[:-1]) * replicas / 100) if item.endswith("%") else int(item)
        count = min(count, replicas)
        if count > last or i == len(items) - 1:
            if i == len(items) - 1 and count <= last and kept:
                dropped.append(kept.pop())
            kept.append(item)
            last = count
        else:
            dropped.append(item)
    return ",".join(kept), dropped
