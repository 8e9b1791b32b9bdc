"""HTTPRoute's CEL rules (Gateway API v1.6.1 standard channel, ``x-kubernetes-validations`` of the
packaged CRD) are enforced on writes as kube-apiserver enforces them: 422 Invalid, the field path of the
rule's schema node (list items by index), ``Invalid value: "<type>": <the rule's message>``
(apiextensions CRD validation rules; controller/api/cel.py)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from lwsflow.sim.apiserver import ApiServer
from tests.apiserver.apiserver_helpers import http

ROUTES = "/apis/gateway.networking.k8s.io/v1/namespaces/default/httproutes"
POOL = {"group": "inference.networking.k8s.io", "kind": "InferencePool", "name": "m", "weight": 100}


def route(name: str = "m", **spec: Any) -> dict[str, Any]:
    base = {"parentRefs": [{"name": "gw"}],
            "rules": [{"matches": [{"path": {"type": "PathPrefix", "value": "/v1"}}],
                       "backendRefs": [dict(POOL)]}]}
    return {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
            "metadata": {"name": name}, "spec": {**base, **spec}}


def rule(**changes: Any) -> list[dict[str, Any]]:
    r = copy.deepcopy(route()["spec"]["rules"][0])
    r.update(changes)
    return [r]


def test_a_route_that_keeps_every_rule_is_created(server: ApiServer) -> None:
    ok = route(parentRefs=[{"name": "gw", "sectionName": "http"}, {"name": "gw", "sectionName": "https"}],
               rules=rule(filters=[{"type": "RequestHeaderModifier",
                                    "requestHeaderModifier": {"set": [{"name": "x-a", "value": "1"}]}}],
                          timeouts={"request": "30s", "backendRequest": "10s"}))
    status, _, body = http(server, "POST", ROUTES, ok)
    assert status == 201, body


@pytest.mark.parametrize(("spec", "field", "message"), [
    ({"rules": rule(matches=[{"path": {"type": "PathPrefix", "value": "v1"}}])},
     "spec.rules[0].matches[0].path",
     "value must be an absolute path and start with '/' when type one of ['Exact', 'PathPrefix']"),
    ({"rules": rule(matches=[{"path": {"type": "Exact", "value": "/a//b"}}])},
     "spec.rules[0].matches[0].path", "must not contain '//' when type one of ['Exact', 'PathPrefix']"),
    ({"parentRefs": [{"name": "gw"}, {"name": "gw", "sectionName": "http"}]},
     "spec.parentRefs",
     "sectionName must be specified when parentRefs includes 2 or more references to the same parent"),
    ({"parentRefs": [{"name": "gw"}, {"name": "gw"}]},
     "spec.parentRefs",
     "sectionName must be unique when parentRefs includes 2 or more references to the same parent"),
    ({"rules": rule(filters=[{"type": "RequestHeaderModifier"}])},
     "spec.rules[0].filters[0]",
     "filter.requestHeaderModifier must be specified for RequestHeaderModifier filter.type"),
    ({"rules": rule(timeouts={"request": "10s", "backendRequest": "20s"})},
     "spec.rules[0].timeouts", "backendRequest timeout cannot be longer than request timeout"),
    ({"rules": rule(backendRefs=[{"name": "svc"}])},
     "spec.rules[0].backendRefs[0]", "Must have port for Service reference"),
])
def test_a_broken_rule_is_refused_with_the_api_servers_message(
        server: ApiServer, spec: dict[str, Any], field: str, message: str) -> None:
    status, _, body = http(server, "POST", ROUTES, route("bad", **spec))
    assert status == 422, body
    # kube-apiserver v1.3x leaves an object's or a list's value out of the message
    assert f"{field}: Invalid value: {message}" in body["message"], body["message"]
    assert {"field": field, "reason": "FieldValueInvalid"}.items() <= body["details"]["causes"][0].items()
    assert http(server, "GET", f"{ROUTES}/bad")[0] == 404  # nothing was stored


def test_a_patch_that_breaks_a_rule_is_refused_and_the_route_kept(server: ApiServer) -> None:
    assert http(server, "POST", ROUTES, route())[0] == 201
    patch = {"spec": {"rules": rule(matches=[{"path": {"type": "PathPrefix", "value": "/a/../b"}}])}}
    status, _, body = http(server, "PATCH", f"{ROUTES}/m", patch,
                           headers={"Content-Type": "application/merge-patch+json"})
    assert status == 422 and "must not contain '/../'" in body["message"], body
    assert http(server, "GET", f"{ROUTES}/m")[2]["spec"]["rules"][0]["matches"][0]["path"]["value"] == "/v1"


def test_kubectl_prints_the_api_servers_message(kubectl: Any, tmp_path: Any) -> None:
    import yaml

    f = tmp_path / "route.yaml"
    f.write_text(yaml.safe_dump(route("bad", rules=rule(filters=[{"type": "URLRewrite"}]))))
    proc = kubectl("apply", "-f", str(f), check=False)
    assert proc.returncode != 0
    assert ('The HTTPRoute "bad" is invalid: spec.rules[0].filters[0]: Invalid value: '
            "filter.urlRewrite must be specified for URLRewrite filter.type") in proc.stderr, proc.stderr
