"""Render one catalog model into Kubernetes objects: LWS | DS | LWS pair, leader Services, HPA.

* Aggregated -> one LeaderWorkerSet ``<name>`` + Service ``<name>-leader`` selecting only leaders
  (worker-index "0"): the LWS's own headless Service ``<name>`` selects every pod and publishes
  not-ready addresses, so clients must not use it.
* Disaggregated, ``pdMode: disaggregatedset`` -> one DisaggregatedSet with roles ``prefill`` and
  ``decode`` (each sized on its own) + a leader Service per role.
* Disaggregated, ``pdMode: lws-pair`` -> LeaderWorkerSets ``<name>-prefill`` and ``<name>-decode``
  labelled ``lwsflow.io/pd-pair: <name>`` (the rollout controller moves them together) + a leader
  Service each.
* ``llmd`` (P/D models) -> llm-d's InferencePool and HTTPRoute (``llmd_routing``, docs/llm-d.md).
* ``queue`` (Kueue) -> the label ``kueue.x-k8s.io/queue-name`` on each LWS and on each DS role (the
  DS copies role labels onto its child LWS), and ``maxSurge`` resolved to an integer (Kueue takes a
  percentage as 0).
* ``autoscaling`` -> an autoscaling/v2 HorizontalPodAutoscaler on the LWS scale subresource. It
  scales *groups* (``spec.replicas``), and its selector (``status.hpaPodSelector``) matches leader
  pods only, so utilization is averaged over leaders; workers' load is invisible to it.

The rollout settings travel as annotations (``lwsflow.io/rollout-*``) on the LWS/DS, where the
rollout controller reads them in GitOps mode. Every LeaderWorkerSet is rendered **frozen**:
``rollingUpdateConfiguration.partition = replicas`` (each environment overlay patches it to its own
replicas), so a new template synced by Argo CD (which ignores partition differences) updates no
group until the rollout controller lowers the partition stage by stage; the controller puts it back
to ``replicas`` when a rollout ends. A DisaggregatedSet forbids a partition (lws-semantics §f), so
its roles carry none. Output is deterministic: no timestamps, fixed key order.
"""

from __future__ import annotations

from typing import Any

from lwsflow.components.catalog import Catalog, ModelSpec
from lwsflow.components.engines import SGLANG_BOOTSTRAP_PORT, launch
from lwsflow.components.llmd_routing import routing_sidecar
from lwsflow.components.manifests_pod import (
    assert_no_secret_literals,
    pod_labels,
    pod_template,
    volume_claim_templates,
)
from lwsflow.components.sizing import ModelSizing, RoleSizing, size_model
from lwsflow.controller.api import intstr
from lwsflow.controller.api import labels as L
from lwsflow.controller.errors import InvalidInput

PART_OF = "lwsflow"


def _namespace(catalog: Catalog, env: str | None) -> str:
    if env is not None:
        return catalog.environment(env).namespace or catalog.namespace
    return catalog.namespace


def _rollout_annotations(spec: ModelSpec) -> dict[str, str]:
    r = spec.rollout
    return {L.ROLLOUT_BAKE: r.bake, L.ROLLOUT_DEADLINE: r.deadline,
            L.ROLLOUT_STAGES: ",".join(str(s) for s in r.stages)}


def _queue_label(spec: ModelSpec) -> dict[str, str]:
    """Kueue's queue label (on the LWS itself, not its pods: Kueue's LWS integration reads it there)."""
    return {L.KUEUE_QUEUE: spec.queue} if spec.queue is not None else {}


def _workload_annotations(catalog: Catalog, spec: ModelSpec, rs: RoleSizing) -> dict[str, str]:
    """Placement and scheduling annotations of one role's LWS."""
    ann: dict[str, str] = {}
    topology = catalog.pool(rs.pool).topologyKey
    # 1:1 group-to-domain placement only pays off when a group spans nodes (fast interconnect within
    # a domain); for single-pod groups it would reserve a whole domain per replica.
    if topology and rs.size > 1:
        ann[L.EXCLUSIVE_TOPOLOGY] = topology
    if spec.gangScheduling is not None and spec.gangScheduling.queue:
        ann[L.VOLCANO_QUEUE] = spec.gangScheduling.queue
    return ann


def _lws_spec(catalog: Catalog, spec: ModelSpec, rs: RoleSizing, extra_labels: dict[str, str],
              where: str) -> dict[str, Any]:
    """The LeaderWorkerSetSpec of one role (also the DS role's embedded spec)."""
    if spec.startupPolicy == "LeaderReady" and rs.size > 1:
        # The engines' leader becomes Ready only once its workers joined, and LeaderReady creates the
        # workers only after the leader is Ready: the group would never start.
        raise InvalidInput("LeaderReady deadlocks a multi-node engine group (its leader waits for its "
                           "workers); use LeaderCreated", field=f"{where}.startupPolicy")
    pool = catalog.pool(rs.pool)
    template: dict[str, Any] = {"size": rs.size, "restartPolicy": spec.restartPolicy}
    # llm-d's routing sidecar fronts a decode leader's engine on the model's port (docs/llm-d.md)
    sidecar = rs.role == "decode" and spec.llmd is not None and spec.llmd.routingSidecar == "decode"
    port = spec.llmd.enginePort if sidecar and spec.llmd is not None else None
    leader = pod_template(spec, rs, pool, launch(spec, rs, leader=True, port=port), extra_labels, port=port,
                          sidecars=[routing_sidecar(spec)] if sidecar else None)
    if rs.size > 1:
        template["leaderTemplate"] = leader
        worker = launch(spec, rs, leader=False)
        template["workerTemplate"] = pod_template(spec, rs, pool, worker, extra_labels)
    else:  # the leader falls back to workerTemplate
        template["workerTemplate"] = leader
    claims = volume_claim_templates(spec)
    if claims:
        template["volumeClaimTemplates"] = claims
    surge = spec.rollout.maxSurge
    if spec.queue is not None:  # Kueue reads maxSurge with IntValue(): a percentage would count as 0
        surge = intstr.max_surge(surge, rs.replicas)
    return {
        "replicas": rs.replicas,
        "startupPolicy": spec.startupPolicy,
        "rolloutStrategy": {"type": "RollingUpdate",
                            "rollingUpdateConfiguration": {"maxUnavailable": spec.rollout.maxUnavailable,
                                                           "maxSurge": surge}},
        "networkConfig": {"subdomainPolicy": spec.subdomainPolicy},
        "leaderWorkerTemplate": template,
    }


def _meta(name: str, namespace: str, labels: dict[str, str],
          annotations: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "labels": dict(sorted(labels.items()))}
    if annotations:
        meta["annotations"] = dict(sorted(annotations.items()))
    return meta


def _lws(catalog: Catalog, spec: ModelSpec, rs: RoleSizing, name: str, namespace: str,
         pair: str | None, where: str) -> dict[str, Any]:
    extra = {L.PD_PAIR: pair} if pair else {}
    labels = {**pod_labels(spec, rs.role, rs.pool), **extra, **_queue_label(spec)}
    annotations = {**_rollout_annotations(spec), **_workload_annotations(catalog, spec, rs)}
    lws_spec = _lws_spec(catalog, spec, rs, extra, where)
    # Frozen at rest (partition >= replicas updates no existing group, lws-semantics §d): a template
    # change synced from Git waits for the rollout controller to stage it.
    lws_spec["rolloutStrategy"]["rollingUpdateConfiguration"]["partition"] = rs.replicas
    return {"apiVersion": L.LWS_API_VERSION, "kind": L.LWS_KIND,
            "metadata": _meta(name, namespace, labels, annotations), "spec": lws_spec}


def _service(spec: ModelSpec, name: str, namespace: str, role: str, pool: str,
             selector: dict[str, str], extra_ports: list[dict[str, Any]]) -> dict[str, Any]:
    ports = [{"name": "http", "port": spec.port, "targetPort": "http", "protocol": "TCP"}, *extra_ports]
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": _meta(name, namespace, pod_labels(spec, role, pool)),
            "spec": {"type": "ClusterIP", "selector": dict(sorted(selector.items())), "ports": ports}}


def _extra_service_ports(spec: ModelSpec, role: str) -> list[dict[str, Any]]:
    """The SGLang prefill bootstrap port: the router hands it to decode servers."""
    if spec.engine == "sglang" and role == "prefill":
        return [{"name": "bootstrap", "port": SGLANG_BOOTSTRAP_PORT, "targetPort": "bootstrap",
                 "protocol": "TCP"}]
    return []


def _hpa(spec: ModelSpec, name: str, namespace: str, pool: str) -> dict[str, Any]:
    a = spec.autoscaling
    assert a is not None
    return {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": _meta(name, namespace, pod_labels(spec, "aggregated", pool)),
            "spec": {"scaleTargetRef": {"apiVersion": L.LWS_API_VERSION, "kind": L.LWS_KIND, "name": name},
                     "minReplicas": a.minReplicas, "maxReplicas": a.maxReplicas,
                     "metrics": [{"type": "Resource", "resource": {
                         "name": "cpu",
                         "target": {"type": "Utilization",
                                    "averageUtilization": a.targetCPUUtilizationPercentage}}}]}}


def _disaggregatedset(catalog: Catalog, spec: ModelSpec, sizing: ModelSizing, namespace: str,
                      where: str) -> dict[str, Any]:
    roles = []
    for role in ("prefill", "decode"):
        rs = sizing.roles[role]
        role_spec = _lws_spec(catalog, spec, rs, {}, where)
        # the DS copies a role's labels onto its child LWS, where Kueue reads the queue
        labels = {**pod_labels(spec, role, rs.pool), **_queue_label(spec)}
        meta: dict[str, Any] = {"labels": dict(sorted(labels.items()))}
        ann = _workload_annotations(catalog, spec, rs)
        if ann:
            meta["annotations"] = dict(sorted(ann.items()))
        roles.append({"name": role, "metadata": meta, "spec": role_spec})
    labels = {L.APP_NAME: spec.name, L.APP_PART_OF: PART_OF, L.ENGINE: spec.engine, L.MODEL: spec.name}
    return {"apiVersion": L.DS_API_VERSION, "kind": L.DS_KIND,
            "metadata": _meta(spec.name, namespace, labels, _rollout_annotations(spec)),
            "spec": {"roles": roles}}


def render_model(catalog: Catalog, model: str, env: str | None = None) -> list[dict[str, Any]]:
    """The objects of one model: workloads first, then Services, then the HPA (fixed order)."""
    spec = catalog.for_environment(model, env) if env is not None else catalog.model(model)
    sizing = size_model(catalog, model, env)
    namespace = _namespace(catalog, env)
    where = f"models[{model}]"
    objs: list[dict[str, Any]] = []
    services: list[dict[str, Any]] = []
    if not spec.disaggregated:
        rs = sizing.roles["aggregated"]
        objs.append(_lws(catalog, spec, rs, spec.name, namespace, None, where))
        services.append(_service(spec, f"{spec.name}-leader", namespace, rs.role, rs.pool,
                                 {L.NAME: spec.name, L.WORKER_INDEX: "0"}, []))
        if spec.autoscaling is not None:
            services.append(_hpa(spec, spec.name, namespace, rs.pool))
    elif spec.pdMode == "lws-pair":
        for role in ("prefill", "decode"):
            rs = sizing.roles[role]
            name = f"{spec.name}-{role}"
            objs.append(_lws(catalog, spec, rs, name, namespace, spec.name, where))
            services.append(_service(spec, f"{name}-leader", namespace, role, rs.pool,
                                     {L.NAME: name, L.WORKER_INDEX: "0"}, _extra_service_ports(spec, role)))
    else:
        objs.append(_disaggregatedset(catalog, spec, sizing, namespace, where))
        for role in ("prefill", "decode"):
            rs = sizing.roles[role]
            services.append(_service(spec, f"{spec.name}-{role}-leader", namespace, role, rs.pool,
                                     {L.DS_NAME: spec.name, L.DS_ROLE: role, L.WORKER_INDEX: "0"},
                                     _extra_service_ports(spec, role)))
    if spec.llmd is not None:
        from lwsflow.components.llmd_routing import routing_objects

        labels = {L.APP_NAME: spec.name, L.APP_PART_OF: PART_OF, L.ENGINE: spec.engine, L.MODEL: spec.name}
        services += routing_objects(spec, namespace, labels, where)
    out = objs + services
    assert_no_secret_literals(out)
    return out


def render_catalog(catalog: Catalog, env: str | None = None) -> dict[str, list[dict[str, Any]]]:
    """``render_model`` for every model, keyed by model name in catalog order."""
    return {m.name: render_model(catalog, m.name, env) for m in catalog.models}
