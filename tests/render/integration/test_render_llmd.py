"""Catalog ``llmd:``: P/D models also render llm-d's InferencePool (Inference Extension v1.6.0) and
HTTPRoute (Gateway API v1.6.1), validated against the packaged upstream CRD schemas (docs/llm-d.md)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from lwsflow.components.kustomize import OverlayBuild, check_objects
from lwsflow.components.manifests import render_model
from lwsflow.controller.api import labels as L
from lwsflow.controller.api.validation import unknown_fields, validate_object
from lwsflow.controller.errors import InvalidInput
from tests.render.render_helpers import LLAMA_70B, build, model

LLMD = {"gateway": "inference-gateway"}


def pd(mode: str, **changes: Any) -> dict[str, Any]:
    doc = model(LLAMA_70B, prefill={"replicas": 1}, decode={"replicas": 2}, pdMode=mode, **changes)
    doc.pop("replicas")
    return doc


def _pod_templates(obj: dict[str, Any]) -> list[dict[str, Any]]:
    specs = [r["spec"] for r in obj["spec"]["roles"]] if obj["kind"] == L.DS_KIND else [obj["spec"]]
    return [s["leaderWorkerTemplate"]["workerTemplate"] for s in specs]


def test_off_by_default() -> None:
    objs = render_model(build(pd("disaggregatedset")), "llama-70b")
    assert not [o for o in objs if o["kind"] in ("InferencePool", "HTTPRoute")]


@pytest.mark.parametrize("mode", ["disaggregatedset", "lws-pair"])
def test_pool_and_route_validate_and_select_both_roles_leaders(mode: str) -> None:
    objs = render_model(build(pd(mode, llmd=LLMD, port=8080)), "llama-70b")
    pool = next(o for o in objs if o["kind"] == "InferencePool")
    route = next(o for o in objs if o["kind"] == "HTTPRoute")
    for obj in (pool, route):
        assert validate_object(obj) == [] and unknown_fields(obj) == [], obj["kind"]
    assert pool["spec"]["targetPorts"] == [{"number": 8080}]  # the sidecar's port
    assert pool["spec"]["endpointPickerRef"] == {"name": "llama-70b-epp", "port": {"number": 9002}}
    match = pool["spec"]["selector"]["matchLabels"]
    assert match == {L.MODEL: "llama-70b", L.WORKER_INDEX: "0"}  # leaders only: workers serve no HTTP
    roles = set()
    for w in (o for o in objs if o["kind"] in (L.LWS_KIND, L.DS_KIND)):
        for tpl in _pod_templates(w):
            pod_labels = {**tpl["metadata"]["labels"], L.WORKER_INDEX: "0"}  # the LWS controller adds it
            assert match.items() <= pod_labels.items()
            roles.add(pod_labels[L.ROLE])
    assert roles == {"prefill", "decode"}
    (backend,) = route["spec"]["rules"][0]["backendRefs"]
    assert backend == {"group": "inference.networking.k8s.io", "kind": "InferencePool", "name": "llama-70b",
                       "weight": 100}
    assert route["spec"]["parentRefs"][0]["name"] == "inference-gateway"


def test_aggregated_model_refuses_llmd() -> None:
    with pytest.raises(Exception, match="P/D models only"):
        build(model(LLAMA_70B, llmd=LLMD))


def test_bad_gateway_name_is_refused() -> None:
    with pytest.raises(Exception, match="gateway"):
        build(pd("lws-pair", llmd={"gateway": "Not_A_Name"}))


def test_overlay_check_catches_an_invalid_route() -> None:
    objs = render_model(build(pd("lws-pair", llmd=LLMD)), "llama-70b")
    check_objects(OverlayBuild("dev", "llama-70b", "dev/llama-70b", objects=objs))  # valid: no error
    bad = copy.deepcopy(objs)
    route = next(o for o in bad if o["kind"] == "HTTPRoute")
    route["spec"]["rules"][0]["backendRefs"][0]["weight"] = 1_000_001  # the CRD caps weights at 1e6
    with pytest.raises(InvalidInput, match="HTTPRoute/llama-70b"):
        check_objects(OverlayBuild("dev", "llama-70b", "dev/llama-70b", objects=bad))


def test_example_catalog_with_llmd_builds_valid_overlays(tmp_path: Any) -> None:
    """Switched on for the example catalog's lws-pair model: the env overlay carries both objects,
    namespaced by kustomize, and the overlay check validates them."""
    from lwsflow.cli import main
    from lwsflow.components.kustomize import build_model_overlay
    from tests.render.render_helpers import EXAMPLE_CATALOG

    text, pair = EXAMPLE_CATALOG.read_text(), "    pdMode: lws-pair\n"
    assert text.count(pair) == 1
    catalog = tmp_path / "catalog.yaml"
    catalog.write_text(text.replace(pair, pair + "    llmd: {gateway: gw}\n"))
    assert main(["render", str(catalog), "--out", str(tmp_path / "tree")]) == 0
    build = build_model_overlay(tmp_path / "tree", "dev", "llama-8b-pair")
    kinds = {o["kind"]: o for o in build.objects}
    assert kinds["InferencePool"]["metadata"]["namespace"] == kinds[L.LWS_KIND]["metadata"]["namespace"]
    assert kinds["HTTPRoute"]["spec"]["rules"][0]["backendRefs"][0]["name"] == "llama-8b-pair"


def _leader_spec(objs: list[dict[str, Any]], role: str) -> dict[str, Any]:
    for w in (o for o in objs if o["kind"] in (L.LWS_KIND, L.DS_KIND)):
        specs = ([r["spec"] for r in w["spec"]["roles"] if r["name"] == role] if w["kind"] == L.DS_KIND
                 else [w["spec"]] if w["metadata"]["labels"][L.ROLE] == role else [])
        for s in specs:
            tpl = s["leaderWorkerTemplate"]
            return dict((tpl.get("leaderTemplate") or tpl["workerTemplate"])["spec"])
    raise AssertionError(role)


@pytest.mark.parametrize("mode", ["disaggregatedset", "lws-pair"])
def test_decode_leaders_get_llm_ds_routing_sidecar_on_the_pool_port(mode: str) -> None:
    """llm-d's guides (llm-d-modelservice ``routingProxy``, routing sidecar v0.4.0): a native sidecar
    ``routing-proxy`` on 8000 (the pool's targetPort) in front of vLLM moved to 8200; prefill pods have
    none (the sidecar calls their engine directly)."""
    from lwsflow.controller.api.serving import routing_sidecar_ports, serving_port

    objs = render_model(build(pd(mode, llmd=LLMD)), "llama-70b")
    pool = next(o for o in objs if o["kind"] == "InferencePool")
    assert pool["spec"]["targetPorts"] == [{"number": 8000}]
    decode = _leader_spec(objs, "decode")
    (sidecar,) = decode["initContainers"]
    assert sidecar["name"] == "routing-proxy" and sidecar["restartPolicy"] == "Always"
    assert sidecar["image"] == "ghcr.io/llm-d/llm-d-routing-sidecar:v0.4.0"
    assert sidecar["args"] == ["--port=8000", "--vllm-port=8200", "--connector=nixlv2",
                               "--secure-proxy=false"]
    assert sidecar["ports"] == [{"name": "sidecar", "containerPort": 8000, "protocol": "TCP"}]
    assert routing_sidecar_ports(decode) == (8000, 8200)
    assert serving_port(decode) == 8200  # vLLM's --port, where its probes (port "http") go
    engine = decode["containers"][0]
    assert {"name": "http", "containerPort": 8200, "protocol": "TCP"} in engine["ports"]
    prefill = _leader_spec(objs, "prefill")
    assert "initContainers" not in prefill and serving_port(prefill) == 8000
    assert routing_sidecar_ports(prefill) is None
    for obj in objs:
        if obj["kind"] in (L.LWS_KIND, L.DS_KIND):
            assert validate_object(obj) == [] and unknown_fields(obj) == [], obj["kind"]


def test_sidecar_can_be_turned_off_and_its_image_and_engine_port_set() -> None:
    objs = render_model(build(pd("disaggregatedset", llmd={**LLMD, "routingSidecar": "none"})), "llama-70b")
    assert "initContainers" not in _leader_spec(objs, "decode")
    custom = {**LLMD, "sidecarImage": "registry.example/sidecar:v1@sha256:" + "a" * 64, "enginePort": 8300}
    decode = _leader_spec(render_model(build(pd("disaggregatedset", llmd=custom)), "llama-70b"), "decode")
    assert decode["initContainers"][0]["image"].startswith("registry.example/sidecar:v1@sha256:")
    assert "--vllm-port=8300" in decode["initContainers"][0]["args"]
    with pytest.raises(Exception, match="enginePort"):
        build(pd("disaggregatedset", llmd={**LLMD, "enginePort": 8000}))
