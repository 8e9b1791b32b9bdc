"""InferencePool (Gateway API Inference Extension v1.6.0) and HTTPRoute (Gateway API v1.6.1) are
served from their packaged upstream CRDs: discovery names, defaults, schema validation (422 with the
field), unknown-field handling, and the InferencePool CEL rule (``endpointPickerRef.port`` required
for kind Service)."""

from __future__ import annotations

from typing import Any

from lwsflow.controller.api.crd import crd_info
from lwsflow.sim import kinds
from lwsflow.sim.apiserver import ApiServer
from tests.apiserver.apiserver_helpers import http

POOLS = "/apis/inference.networking.k8s.io/v1/namespaces/default/inferencepools"
ROUTES = "/apis/gateway.networking.k8s.io/v1/namespaces/default/httproutes"


def pool(**spec: Any) -> dict[str, Any]:
    base = {"selector": {"matchLabels": {"app": "m"}}, "targetPorts": [{"number": 8000}],
            "endpointPickerRef": {"name": "m-epp", "port": {"number": 9002}}}
    return {"apiVersion": "inference.networking.k8s.io/v1", "kind": "InferencePool",
            "metadata": {"name": "m"}, "spec": {**base, **spec}}


def route() -> dict[str, Any]:
    return {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute", "metadata": {"name": "m"},
            "spec": {"parentRefs": [{"name": "gw"}],
                     "rules": [{"backendRefs": [{"group": "inference.networking.k8s.io",
                                                 "kind": "InferencePool", "name": "m", "weight": 100}]}]}}


def test_discovery_names_come_from_the_upstream_crds(server: ApiServer) -> None:
    for plural, group in (("inferencepools", "inference.networking.k8s.io"),
                          ("httproutes", "gateway.networking.k8s.io")):
        info = crd_info(plural)
        assert kinds.BY_KEY[f"{plural}.{group}"].short_names == info.short_names
        body = http(server, "GET", f"/apis/{group}/v1")[2]
        assert plural in {r["name"] for r in body["resources"]}
    assert crd_info("inferencepools").short_names == ("infpool",)


def test_inference_pool_is_defaulted_and_stored(server: ApiServer) -> None:
    status, _, body = http(server, "POST", POOLS, pool())
    assert status == 201, body
    assert body["spec"]["appProtocol"] == "http"  # CRD structural defaults
    assert body["spec"]["endpointPickerRef"]["kind"] == "Service"
    assert body["spec"]["endpointPickerRef"]["failureMode"] == "FailClose"


def test_inference_pool_schema_errors_are_422_with_the_field(server: ApiServer) -> None:
    bad = pool()
    del bad["spec"]["targetPorts"]
    status, _, body = http(server, "POST", POOLS, bad)
    assert status == 422 and body["details"]["causes"][0]["field"] == "spec.targetPorts"
    status, _, body = http(server, "POST", POOLS, pool(targetPorts=[{"number": 70000}]))
    assert status == 422 and "spec.targetPorts[0].number" in body["message"]


def test_inference_pool_cel_rule_port_required_for_a_service_picker(server: ApiServer) -> None:
    status, _, body = http(server, "POST", POOLS, pool(endpointPickerRef={"name": "epp"}))
    assert status == 422 and "port is required when kind is 'Service'" in body["message"]
    ok = pool(endpointPickerRef={"name": "epp", "kind": "Pod", "group": "core"})
    ok["metadata"]["name"] = "other"
    assert http(server, "POST", POOLS, ok)[0] == 201


def test_http_route_with_weighted_pool_backend(server: ApiServer) -> None:
    status, _, body = http(server, "POST", ROUTES, route())
    assert status == 201, body
    bad = route()
    bad["metadata"]["name"] = "bad"
    bad["spec"]["rules"][0]["backendRefs"][0]["weight"] = -1
    status, _, body = http(server, "POST", ROUTES, bad)
    assert status == 422 and "weight" in body["message"]


def test_unknown_field_strict_is_400(server: ApiServer) -> None:
    obj = pool(bogus=1)
    status, _, body = http(server, "POST", POOLS + "?fieldValidation=Strict", obj)
    assert status == 400 and 'unknown field "spec.bogus"' in body["message"]


def test_kubectl_applies_and_lists_them(kubectl: Any, tmp_path: Any) -> None:
    """kubectl apply (server-side strict field validation, OpenAPI from the packaged schemas) and get
    with the CRDs' printer columns (HTTPRoute: Hostnames, Age)."""
    import yaml

    r = route()
    r["spec"]["hostnames"] = ["chat.example.com"]
    f = tmp_path / "objs.yaml"
    f.write_text(yaml.safe_dump_all([pool(), r]))
    out = kubectl("apply", "-f", str(f)).stdout
    assert "inferencepool.inference.networking.k8s.io/m created" in out
    assert "httproute.gateway.networking.k8s.io/m created" in out
    lines = kubectl("get", "infpool").stdout.splitlines()
    assert lines[0].split() == ["NAME", "AGE"] and lines[1].split()[0] == "m"
    lines = kubectl("get", "httproutes").stdout.splitlines()
    assert lines[0].split() == ["NAME", "HOSTNAMES", "AGE"]
    assert "chat.example.com" in lines[1]
    bad = pool(bogus=1)
    f.write_text(yaml.safe_dump(bad))
    proc = kubectl("apply", "-f", str(f), check=False)
    assert proc.returncode != 0 and 'unknown field "spec.bogus"' in proc.stderr
