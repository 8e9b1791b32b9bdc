"""llm-d's routing objects for a P/D model: an InferencePool and an HTTPRoute (catalog ``llmd:``).

Shapes follow the upstream CRDs lwsflow packages (controller/api/crds/): Gateway API Inference
Extension **v1.6.0** ``inference.networking.k8s.io/v1`` InferencePool and Gateway API **v1.6.1**
(standard channel) ``gateway.networking.k8s.io/v1`` HTTPRoute; rendered objects are validated against
those schemas. The pool selects the model's leader pods of both roles (workers hold shards and serve
no HTTP); the EPP tells prefill from decode by the role label. The endpoint picker Deployment/Service
named in ``endpointPickerRef`` is the user's llm-d installation's, not rendered here.

The decode leader pods also get llm-d's routing sidecar (``routingSidecar``, on by default), shaped as
the llm-d-modelservice chart's ``routingProxy`` (llm-d-routing-sidecar **v0.4.0**): a native sidecar
(init container, ``restartPolicy: Always``) named ``routing-proxy`` listening on the model's port, the
pool's targetPort, with ``--vllm-port`` pointing at the engine, which moves to ``enginePort`` (8200).
"""

from __future__ import annotations

from typing import Any

from lwsflow.components.catalog import ModelSpec
from lwsflow.controller.api import labels as L
from lwsflow.controller.errors import InvalidInput

POOL_API_VERSION = "inference.networking.k8s.io/v1"
ROUTE_API_VERSION = "gateway.networking.k8s.io/v1"
ROUTE_WEIGHT = 100  # one backend today; blue-green shifts weights between two pools (docs/llm-d.md)


def pool_selector(spec: ModelSpec) -> dict[str, str]:
    """Leader pods of both roles of the model (LWS pair or DisaggregatedSet alike)."""
    return {L.MODEL: spec.name, L.WORKER_INDEX: "0"}


def inference_pool(spec: ModelSpec, namespace: str, labels: dict[str, str]) -> dict[str, Any]:
    assert spec.llmd is not None
    epp = spec.llmd.endpointPicker or f"{spec.name}-epp"
    return {"apiVersion": POOL_API_VERSION, "kind": "InferencePool",
            "metadata": {"name": spec.name, "namespace": namespace, "labels": dict(sorted(labels.items()))},
            "spec": {"selector": {"matchLabels": dict(sorted(pool_selector(spec).items()))},
                     "targetPorts": [{"number": spec.port}],
                     "endpointPickerRef": {"name": epp, "port": {"number": spec.llmd.endpointPickerPort}}}}


def http_route(spec: ModelSpec, namespace: str, labels: dict[str, str]) -> dict[str, Any]:
    assert spec.llmd is not None
    backend = {"group": "inference.networking.k8s.io", "kind": "InferencePool", "name": spec.name,
               "weight": ROUTE_WEIGHT}
    return {"apiVersion": ROUTE_API_VERSION, "kind": "HTTPRoute",
            "metadata": {"name": spec.name, "namespace": namespace, "labels": dict(sorted(labels.items()))},
            "spec": {"parentRefs": [{"group": "gateway.networking.k8s.io", "kind": "Gateway",
                                     "name": spec.llmd.gateway}],
                     "rules": [{"matches": [{"path": {"type": "PathPrefix", "value": "/"}}],
                                "backendRefs": [backend]}]}}


def routing_objects(spec: ModelSpec, namespace: str, labels: dict[str, str],
                    where: str) -> list[dict[str, Any]]:
    """The pool and route of a P/D model with ``llmd`` set, checked against the upstream schemas."""
    from lwsflow.controller.api.validation import validate_object

    objs = [inference_pool(spec, namespace, labels), http_route(spec, namespace, labels)]
    for obj in objs:
        errors = validate_object(obj)
        if errors:
            raise InvalidInput(f"{obj['kind']}/{spec.name}: {errors[0]}", field=f"{where}.llmd")
    return objs


SIDECAR_NAME = "routing-proxy"
SIDECAR_PORT_NAME = "sidecar"
# the sidecar's P/D protocol: vLLM's NIXL connector (v2 wire), or SGLang's bootstrap hand-off
CONNECTOR = {"vllm": "nixlv2", "sglang": "sglang"}


def routing_sidecar(spec: ModelSpec) -> dict[str, Any]:
    """llm-d's routing sidecar for a decode leader pod (llm-d-modelservice ``routingProxy`` shape)."""
    assert spec.llmd is not None
    return {"name": SIDECAR_NAME, "image": spec.llmd.sidecarImage, "imagePullPolicy": "IfNotPresent",
            "args": [f"--port={spec.port}", f"--vllm-port={spec.llmd.enginePort}",
                     f"--connector={CONNECTOR[spec.engine]}", "--secure-proxy=false"],
            "ports": [{"name": SIDECAR_PORT_NAME, "containerPort": spec.port, "protocol": "TCP"}],
            "restartPolicy": "Always",
            "securityContext": {"allowPrivilegeEscalation": False, "runAsNonRoot": True}}
