"""Catalog ``llmd:``: P/D models also render llm-d's InferencePool (Inference Extension v1.6.0) and
HTTPRoute (Gateway API v1.6.1), validated against the packaged upstream CRD schemas (docs/llm-d.md)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from render_helpers import LLAMA_70B, build, model

from lwsflow.components.kustomize import OverlayBuild, check_objects
from lwsflow.components.manifests import render_model
from lwsflow.controller.api import labels as L
from lwsflow.controller.api.validation import unknown_fields, validate_object
from lwsflow.controller.errors import InvalidInput

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
    objs = render_model(build(pd(mode, llmd=LLMD, port=8200)), "llama-70b")
    pool = next(o for o in objs if o["kind"] == "InferencePool")
    route = next(o for o in objs if o["kind"] == "HTTPRoute")
    for obj in (pool, route):
        assert validate_object(obj) == [] and unknown_fields(obj) == [], obj["kind"]
    assert pool["spec"]["targetPorts"] == [{"number": 8200}]
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
    from render_helpers import EXAMPLE_CATALOG

    from lwsflow.components.kustomize import build_model_overlay
    from lwsflow.pipelines.cli import main

    text, pair = EXAMPLE_CATALOG.read_text(), "    pdMode: lws-pair\n"
    assert text.count(pair) == 1
    catalog = tmp_path / "catalog.yaml"
    catalog.write_text(text.replace(pair, pair + "    llmd: {gateway: gw}\n"))
    assert main(["render", str(catalog), "--out", str(tmp_path / "tree")]) == 0
    build = build_model_overlay(tmp_path / "tree", "dev", "llama-8b-pair")
    kinds = {o["kind"]: o for o in build.objects}
    assert kinds["InferencePool"]["metadata"]["namespace"] == kinds[L.LWS_KIND]["metadata"]["namespace"]
    assert kinds["HTTPRoute"]["spec"]["rules"][0]["backendRefs"][0]["name"] == "llama-8b-pair"
