"""The renderer: valid LWS/DS objects, engine wiring, placement, secrets by reference only, determinism."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from lwsflow.components.catalog import Catalog, load_catalog
from lwsflow.components.manifests import render_catalog, render_model
from lwsflow.components.manifests_pod import assert_no_secret_literals
from lwsflow.controller.api import labels as L
from lwsflow.controller.api.validation import unknown_fields, validate_object
from lwsflow.controller.errors import InvalidInput
from lwsflow.controller.yamlio import dump_yaml_documents
from tests.render.render_helpers import EXAMPLE_CATALOG, LLAMA_8B, LLAMA_405B, REPO, build, model

ENVS = [None, "dev", "staging", "prod"]
RENDER_SCRIPT = """
import sys
from lwsflow.components.catalog import load_catalog
from lwsflow.components.manifests import render_catalog
from lwsflow.controller.yamlio import dump_yaml_documents
rendered = render_catalog(load_catalog(sys.argv[1]))
sys.stdout.write(dump_yaml_documents([o for objs in rendered.values() for o in objs]))
"""


def walk(node: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    """Every (path, value) in a JSON-like tree."""
    yield path, node
    if isinstance(node, dict):
        for k, v in node.items():
            yield from walk(v, f"{path}.{k}")
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from walk(v, f"{path}[{i}]")


def templates(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Pod templates of an LWS (or of every DS role), keyed like ``prefill/leaderTemplate``."""
    if obj["kind"] == L.LWS_KIND:
        lwt = obj["spec"]["leaderWorkerTemplate"]
        return {k: lwt[k] for k in ("leaderTemplate", "workerTemplate") if k in lwt}
    return {f"{r['name']}/{k}": r["spec"]["leaderWorkerTemplate"][k] for r in obj["spec"]["roles"]
            for k in ("leaderTemplate", "workerTemplate") if k in r["spec"]["leaderWorkerTemplate"]}


def container(template: dict[str, Any]) -> dict[str, Any]:
    return template["spec"]["containers"][0]


def command_line(template: dict[str, Any]) -> str:
    c = container(template)
    return " ".join(c["command"] + c["args"])


@pytest.mark.parametrize("env", ENVS, ids=[str(e) for e in ENVS])
def test_every_example_object_validates(example_catalog: Catalog, env: str | None) -> None:
    checked = 0
    for name, objs in render_catalog(example_catalog, env).items():
        for obj in objs:
            if obj["kind"] in (L.LWS_KIND, L.DS_KIND):
                assert validate_object(obj) == [], f"{name}: {obj['kind']}/{obj['metadata']['name']}"
                assert unknown_fields(obj) == [], f"{name}: {obj['kind']}/{obj['metadata']['name']}"
                checked += 1
            assert obj["metadata"]["namespace"] == (example_catalog.environment(env).namespace
                                                    if env else example_catalog.namespace)
    assert checked == 7  # 4 aggregated LWS + 1 DS + 1 LWS pair (2)


def test_object_shapes_per_serving_mode(example_catalog: Catalog) -> None:
    def shape(m: str) -> list[tuple[str, str]]:
        return [(o["kind"], o["metadata"]["name"]) for o in render_model(example_catalog, m)]

    assert shape("llama-405b") == [("LeaderWorkerSet", "llama-405b"), ("Service", "llama-405b-leader")]
    assert shape("qwen-7b") == [("LeaderWorkerSet", "qwen-7b"), ("Service", "qwen-7b-leader"),
                                ("HorizontalPodAutoscaler", "qwen-7b")]
    assert shape("llama-70b-pd") == [("DisaggregatedSet", "llama-70b-pd"),
                                     ("Service", "llama-70b-pd-prefill-leader"),
                                     ("Service", "llama-70b-pd-decode-leader")]
    assert shape("llama-8b-pair") == [("LeaderWorkerSet", "llama-8b-pair-prefill"),
                                      ("LeaderWorkerSet", "llama-8b-pair-decode"),
                                      ("Service", "llama-8b-pair-prefill-leader"),
                                      ("Service", "llama-8b-pair-decode-leader")]


def test_labels_and_annotations_for_controllers_and_smoke_tests(example_catalog: Catalog) -> None:
    lws, svc = render_model(example_catalog, "llama-405b")
    for meta in [lws["metadata"], *(t["metadata"] for t in templates(lws).values())]:
        assert {meta["labels"][k] for k in (L.MODEL, L.ROLE, L.ENGINE, L.NODE_POOL)} == {
            "llama-405b", "aggregated", "vllm", "h100x8"}
    for t in templates(lws).values():
        assert t["metadata"]["annotations"] == {L.SERVED_MODEL: "meta-llama/Llama-3.1-405B-Instruct",
                                                L.SERVING_PORT: "8000"}
    ann = lws["metadata"]["annotations"]
    assert (ann[L.ROLLOUT_STAGES], ann[L.ROLLOUT_BAKE], ann[L.ROLLOUT_DEADLINE]) == ("1,100%", "1m", "45m")
    assert svc["spec"]["selector"] == {L.NAME: "llama-405b", L.WORKER_INDEX: "0"}
    assert svc["spec"]["ports"][0]["port"] == 8000 and svc["spec"]["ports"][0]["targetPort"] == "http"
    prefill, decode = render_model(example_catalog, "llama-8b-pair")[:2]
    pairs = {o["metadata"]["labels"][L.PD_PAIR] for o in (prefill, decode)}
    assert pairs == {"llama-8b-pair"}
    assert decode["metadata"]["labels"][L.NODE_POOL] == "l40sx4"  # each role on its own pool
    ds = render_model(example_catalog, "llama-70b-pd")[0]
    assert ds["metadata"]["annotations"][L.ROLLOUT_STAGES] == "50%,100%"
    assert [r["metadata"]["labels"][L.ROLE] for r in ds["spec"]["roles"]] == ["prefill", "decode"]


def test_vllm_multi_node_wiring(example_catalog: Catalog) -> None:
    lws = render_model(example_catalog, "llama-405b")[0]
    assert lws["spec"]["leaderWorkerTemplate"]["size"] == 2
    leader = command_line(templates(lws)["leaderTemplate"])
    worker = command_line(templates(lws)["workerTemplate"])
    assert "leader --ray_cluster_size=$(LWS_GROUP_SIZE) && exec vllm serve" in leader
    for flag in ("--tensor-parallel-size 8", "--pipeline-parallel-size 2", "--port 8000",
                 "--distributed-executor-backend ray",
                 "--served-model-name meta-llama/Llama-3.1-405B-Instruct"):
        assert flag in leader
    assert "worker --ray_address=$(LWS_LEADER_ADDRESS)" in worker and "vllm serve" not in worker
    assert "ports" not in container(templates(lws)["workerTemplate"])  # workers do not serve HTTP


def test_sglang_multi_node_wiring() -> None:
    cat = build(model(LLAMA_405B, engine="sglang", image="lmsysorg/sglang:v0.5.4"))
    lws = render_model(cat, "llama-405b")[0]
    for key in ("leaderTemplate", "workerTemplate"):
        line = command_line(templates(lws)[key])
        assert line.startswith("python3 -m sglang.launch_server --model-path meta-llama/Llama-3.1-405B")
        for flag in ("--tp-size 8", "--pp-size 2", "--dist-init-addr $(LWS_LEADER_ADDRESS):20000",
                     "--nnodes $(LWS_GROUP_SIZE)", "--node-rank $(LWS_WORKER_INDEX)"):
            assert flag in line


def test_prefill_decode_kv_transfer_settings(example_catalog: Catalog) -> None:
    ds = render_model(example_catalog, "llama-70b-pd")[0]
    for role, kv_role in (("prefill", "kv_producer"), ("decode", "kv_consumer")):
        c = container(templates(ds)[f"{role}/workerTemplate"])
        cfg = json.loads(c["args"][c["args"].index("--kv-transfer-config") + 1])
        assert cfg == {"kv_connector": "NixlConnector", "kv_role": kv_role}
        env = {e["name"]: e for e in c["env"]}
        assert env["VLLM_NIXL_SIDE_CHANNEL_HOST"]["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"
        assert env["VLLM_NIXL_SIDE_CHANNEL_PORT"]["value"] == "5600"
        assert {"name": "nixl", "containerPort": 5600, "protocol": "TCP"} in c["ports"]
    prefill, decode = render_model(example_catalog, "llama-8b-pair")[:2]
    p_line, d_line = (command_line(templates(o)["workerTemplate"]) for o in (prefill, decode))
    assert "--disaggregation-mode prefill --disaggregation-bootstrap-port 8998" in p_line
    assert "--disaggregation-mode decode" in d_line and "bootstrap-port" not in d_line


def test_placement_resources_and_scheduling(example_catalog: Catalog) -> None:
    lws = render_model(example_catalog, "llama-405b")[0]
    pool = example_catalog.pool("h100x8")
    assert lws["metadata"]["annotations"][L.EXCLUSIVE_TOPOLOGY] == pool.topologyKey
    assert lws["metadata"]["annotations"][L.VOLCANO_QUEUE] == "llm-serving"
    for t in templates(lws).values():
        spec = t["spec"]
        assert spec["schedulerName"] == "volcano"
        assert spec["nodeSelector"] == {**pool.nodeSelector, L.GPU_PRODUCT: "nvidia-h100-80gb"}
        assert spec["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists",
                                        "effect": "NoSchedule"}]
        res = container(t)["resources"]
        assert res["requests"]["nvidia.com/gpu"] == res["limits"]["nvidia.com/gpu"] == "8"
        assert {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "16Gi"}} in spec["volumes"]
        assert all(v["name"] != "model-cache" for v in spec["volumes"])  # a PVC per pod instead
    claim = lws["spec"]["leaderWorkerTemplate"]["volumeClaimTemplates"][0]
    assert claim["metadata"]["name"] == "model-cache"
    assert claim["spec"]["resources"]["requests"]["storage"] == "1Ti"
    small = render_model(example_catalog, "llama-8b")[0]
    assert L.EXCLUSIVE_TOPOLOGY not in small["metadata"]["annotations"]  # single-pod groups share domains
    t = templates(small)["workerTemplate"]
    assert "leaderTemplate" not in small["spec"]["leaderWorkerTemplate"]
    assert container(t)["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert any(v["name"] == "model-cache" and "emptyDir" in v for v in t["spec"]["volumes"])
    spread = t["spec"]["topologySpreadConstraints"][0]  # 3 one-GPU groups: prefer separate nodes
    assert spread["topologyKey"] == "kubernetes.io/hostname"
    assert spread["whenUnsatisfiable"] == "ScheduleAnyway"
    assert spread["labelSelector"]["matchLabels"] == {L.MODEL: "llama-8b", L.ROLE: "aggregated"}
    assert "topologySpreadConstraints" not in templates(lws)["leaderTemplate"]["spec"]


def test_probes_on_leaders_only_and_startup_sized_for_loading(example_catalog: Catalog) -> None:
    lws = render_model(example_catalog, "llama-405b")[0]
    leader = container(templates(lws)["leaderTemplate"])
    assert leader["readinessProbe"]["httpGet"] == {"path": "/health", "port": "http"}
    # 300 s engine start + 754.4 GiB at 0.5 GiB/s, probed every 10 s
    assert leader["startupProbe"]["failureThreshold"] == math.ceil((300 + 754.4 / 0.5) / 10)
    worker = container(templates(lws)["workerTemplate"])
    assert not {"readinessProbe", "startupProbe", "livenessProbe"} & worker.keys()
    small = container(templates(render_model(example_catalog, "llama-8b")[0])["workerTemplate"])
    assert small["startupProbe"]["failureThreshold"] < leader["startupProbe"]["failureThreshold"]


def test_no_privileged_host_network_or_host_path(example_catalog: Catalog) -> None:
    for objs in render_catalog(example_catalog).values():
        for path, value in walk(objs):
            assert not path.endswith((".hostNetwork", ".hostPID", ".hostIPC", ".hostPath")), path
            if path.endswith(".privileged") or path.endswith(".allowPrivilegeEscalation"):
                assert value is False, path


def test_secrets_appear_only_as_secret_key_refs() -> None:
    canary = {"name": "canary-secret-7f3a", "key": "canary-key-7f3a"}
    cat = build(model(LLAMA_8B, hfTokenSecret=canary,
                      env=[{"name": "WANDB_API_KEY", "secretKeyRef": canary},
                           {"name": "VLLM_LOGGING_LEVEL", "value": "DEBUG"},
                           {"name": "TOKENIZERS_PARALLELISM", "value": "false"}]))
    objs = render_model(cat, "llama-8b")
    hits = [p for p, v in walk(objs) if isinstance(v, str) and "canary" in v]
    assert hits and all(p.rsplit(".", 2)[-2] == "secretKeyRef" for p in hits), hits
    env = {e["name"]: e for e in container(templates(objs[0])["workerTemplate"])["env"]}
    assert env["HF_TOKEN"] == {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": canary}}
    assert "value" not in env["WANDB_API_KEY"] and env["VLLM_LOGGING_LEVEL"]["value"] == "DEBUG"
    planted = {"kind": "LeaderWorkerSet", "metadata": {"name": "x"},
               "spec": {"containers": [{"env": [{"name": "HF_TOKEN", "value": "hf_live"}]}]}}
    with pytest.raises(InvalidInput, match="HF_TOKEN"):
        assert_no_secret_literals([planted])


def test_lws_options_come_from_the_catalog() -> None:
    cat = build(model(LLAMA_8B, startupPolicy="LeaderReady", restartPolicy="None",
                      subdomainPolicy="UniquePerReplica"))
    spec = render_model(cat, "llama-8b")[0]["spec"]
    assert spec["startupPolicy"] == "LeaderReady"
    assert spec["leaderWorkerTemplate"]["restartPolicy"] == "None"
    assert spec["networkConfig"] == {"subdomainPolicy": "UniquePerReplica"}
    # rendered frozen (partition = replicas): a synced template waits for the rollout controller
    assert spec["rolloutStrategy"]["rollingUpdateConfiguration"]["partition"] == spec["replicas"]
    with pytest.raises(InvalidInput) as info:
        render_model(build(model(LLAMA_405B, startupPolicy="LeaderReady")), "llama-405b")
    assert info.value.field == "models[llama-405b].startupPolicy"


def test_autoscaler_targets_the_lws_scale_subresource(example_catalog: Catalog) -> None:
    hpa = render_model(example_catalog, "qwen-7b")[-1]
    assert hpa["apiVersion"] == "autoscaling/v2"
    assert hpa["spec"]["scaleTargetRef"] == {"apiVersion": L.LWS_API_VERSION, "kind": L.LWS_KIND,
                                             "name": "qwen-7b"}
    assert (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == (2, 4)


def test_environment_overrides(example_catalog: Catalog) -> None:
    base = render_model(example_catalog, "llama-8b")[0]
    prod = render_model(example_catalog, "llama-8b", "prod")[0]
    assert (base["spec"]["replicas"], prod["spec"]["replicas"]) == (3, 4)
    assert (base["metadata"]["namespace"], prod["metadata"]["namespace"]) == ("llm", "llm-prod")
    assert prod["metadata"]["annotations"][L.ROLLOUT_STAGES] == "1,50%,100%"
    dev_ds = render_model(example_catalog, "llama-70b-pd", "dev")[0]
    assert [r["spec"]["replicas"] for r in dev_ds["spec"]["roles"]] == [1, 1]
    # a role override sets replicas only: prefill keeps its own maxModelLen (and so its sizing)
    args = container(templates(dev_ds)["prefill/workerTemplate"])["args"]
    assert args[args.index("--max-model-len") + 1] == "16384"
    # a rollout override that sets stages, bake and deadline keeps the model's budgets
    dev = render_model(example_catalog, "llama-8b", "dev")[0]
    assert dev["metadata"]["annotations"][L.ROLLOUT_STAGES] == "100%"
    ruc = {k: v for k, v in base["spec"]["rolloutStrategy"]["rollingUpdateConfiguration"].items()
           if k != "partition"}
    assert dev["spec"]["rolloutStrategy"]["rollingUpdateConfiguration"] == {
        **ruc, "partition": dev["spec"]["replicas"]}  # each environment frozen at its own replicas
    assert "partition" not in str(dev_ds["spec"]["roles"])  # a DS forbids a partition (§f)
    # everything but replicas, rollout settings and namespace is identical across environments
    base["spec"].pop("replicas"), prod["spec"].pop("replicas")
    assert base["spec"]["leaderWorkerTemplate"] == prod["spec"]["leaderWorkerTemplate"]


def test_render_is_deterministic() -> None:
    first = dump_yaml_documents([o for objs in render_catalog(load_catalog(EXAMPLE_CATALOG)).values()
                                 for o in objs])
    second = dump_yaml_documents([o for objs in render_catalog(load_catalog(EXAMPLE_CATALOG)).values()
                                  for o in objs])
    assert first == second
    # a fresh interpreter with another hash seed: no set/dict iteration order may leak into the output
    out = subprocess.run([sys.executable, "-c", RENDER_SCRIPT, str(EXAMPLE_CATALOG)], cwd=REPO,
                         capture_output=True, text=True, check=True, timeout=60,
                         env={**os.environ, "PYTHONHASHSEED": "12345"})
    assert out.stdout == first


@pytest.mark.parametrize("path", sorted((REPO / "examples").glob("catalog*.yaml")), ids=lambda p: p.name)
def test_every_example_catalog_renders_valid_objects(path: Any) -> None:
    catalog = load_catalog(path)
    for env in [None, *(e.name for e in catalog.environments)]:
        for objs in render_catalog(catalog, env).values():
            for obj in objs:
                if obj["kind"] in (L.LWS_KIND, L.DS_KIND):
                    assert validate_object(obj) == [] and unknown_fields(obj) == []


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
@pytest.mark.parametrize("mode", ["aggregated", "disaggregatedset", "lws-pair"])
@pytest.mark.parametrize("base", [LLAMA_8B, LLAMA_405B], ids=["8b", "405b"])
def test_option_matrix_validates(engine: str, mode: str, base: dict[str, Any]) -> None:
    doc = model(base, engine=engine, subdomainPolicy="UniquePerReplica",
                restartPolicy="RecreateGroupAfterStart", gangScheduling={"queue": "q"},
                modelCache={"size": "2Ti"}, hfTokenSecret={"name": "hf", "key": "token"},
                rollout={"maxSurge": "50%", "maxUnavailable": 0})
    if mode != "aggregated":
        doc.pop("replicas")
        doc.update(prefill={"replicas": 1}, decode={"replicas": 2}, pdMode=mode)
    objs = render_model(build(doc), doc["name"])
    workloads = [o for o in objs if o["kind"] in (L.LWS_KIND, L.DS_KIND)]
    assert len(workloads) == (2 if mode == "lws-pair" else 1)
    for obj in workloads:
        assert validate_object(obj) == [] and unknown_fields(obj) == [], obj["metadata"]["name"]
        for t in templates(obj).values():
            assert t["spec"]["schedulerName"] == "volcano"
    services = [o for o in objs if o["kind"] == "Service"]
    assert len(services) == (1 if mode == "aggregated" else 2)
    assert all(s["spec"]["selector"][L.WORKER_INDEX] == "0" for s in services)
