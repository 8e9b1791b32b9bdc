"""The embedded cluster honours the rendered llm-d shape (catalog ``llmd:``, docs/llm-d.md): a decode
leader pod rendered with llm-d's routing sidecar (``routing-proxy`` on 8000, vLLM on 8200) gets the
stand-in sidecar where the rendered one listens, the pool's targetPort reaches it, and the request path
proxy -> EPP -> that sidecar -> prefill -> KV -> decode engine runs through it."""

from __future__ import annotations

import time
from pathlib import Path

import httpx

from lwsflow.components import deploy
from lwsflow.components.catalog import load_catalog
from lwsflow.components.manifests import render_model
from lwsflow.controller.api.paths import repo_root
from lwsflow.controller.kube.client import Kube
from lwsflow.controller.yamlio import dump_yaml, load_yaml_documents
from lwsflow.rehearsal.catalog_cluster import cluster_config_for, secret_refs
from lwsflow.sim.router import Router
from lwsflow.sim.testing import EmbeddedCluster

MODEL = "llama-70b-pd"


def _catalog(tmp_path: Path) -> Path:
    doc = load_yaml_documents(repo_root() / "examples" / "catalog.yaml")[0]
    for m in doc["models"]:
        if m["name"] == MODEL:
            m["llmd"] = {"gateway": "inference-gateway"}
    path = tmp_path / "catalog.yaml"
    path.write_text(dump_yaml(doc))
    return path


def test_request_path_runs_through_the_pods_own_sidecar(tmp_path: Path) -> None:
    cat = load_catalog(_catalog(tmp_path))
    docs = render_model(cat, MODEL, "dev")
    assert {d["kind"] for d in docs} >= {"DisaggregatedSet", "InferencePool", "HTTPRoute"}
    with EmbeddedCluster(tmp_path, cluster_config_for(cat), speed=600, engines=True,
                         engine_options={"side_channel_port": 0}) as sim:
        for ns in ("llm", "llm-dev", "llm-staging", "llm-prod"):
            sim.cluster.store.create("namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                    "metadata": {"name": ns}, "status": {"phase": "Active"}})
        for ns, name, key in secret_refs(cat):  # the Secrets the pods read (placeholder values)
            sim.cluster.store.create("secrets", {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                                                 "metadata": {"name": name, "namespace": ns},
                                                 "data": {key: "cGxhY2Vob2xkZXI="}})
        kube = Kube.connect(str(sim.kubeconfig))
        deploy.apply_supporting(kube, [d for d in docs if d["kind"] != "Service"])
        deploy.install(kube, docs, 3600)
        pods = {p["metadata"]["labels"]["leaderworkerset.sigs.k8s.io/worker-index"] == "0" and
                p["metadata"]["labels"].get("lwsflow.io/role"): p
                for p in sim.store.list("pods", "llm-dev")[0]}
        decode, prefill = pods["decode"], pods["prefill"]
        d_ip, p_ip = decode["status"]["podIP"], prefill["status"]["podIP"]
        deadline = time.monotonic() + 20
        while (("llm-dev", decode["metadata"]["name"]) not in sim.engines.sidecars
               and time.monotonic() < deadline):
            time.sleep(0.1)
        sidecar = sim.engines.sidecars[("llm-dev", decode["metadata"]["name"])]
        assert (sidecar.port, sidecar.engine) == (8000, (d_ip, 8200))  # where the rendered one listens
        assert sim.engines.engines[("llm-dev", decode["metadata"]["name"])].port == 8200
        assert sim.engines.engines[("llm-dev", prefill["metadata"]["name"])].port == 8000
        with Router(sim.store) as router:
            body = {"model": "meta-llama/Llama-3.1-70B-Instruct", "max_tokens": 4,
                    "prompt": "Explain the prefill and decode split of LLM serving. " * 8}
            resp = httpx.post(f"{router.url}/v1/completions", json=body, timeout=30)
            assert resp.status_code == 200, resp.text
            assert resp.headers["x-lwsflow-served-by"] == (f"decode=llm-dev/{decode['metadata']['name']}; "
                                                          f"prefill=llm-dev/{prefill['metadata']['name']}")
            assert resp.headers["x-lwsflow-decode-endpoint"] == f"{d_ip}:8000"  # the pool's targetPort
            assert resp.headers["x-lwsflow-prefill-endpoint"] == f"{p_ip}:8000"
            assert resp.headers["x-lwsflow-kv-source"].startswith(f"{p_ip}:")  # KV from the chosen prefill
            assert not router._sidecars  # the router started none of its own: the pod's sidecar served
