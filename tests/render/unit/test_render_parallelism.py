"""Issue 31.6: the parallelism a catalog asks for (``tensorParallelSize``, ``pipelineParallelSize``),
checked against the pool and followed by the LWS size, the GPUs per pod and the engines' flags.

The user's catalog from the issue: a 405B fp8 model on 2 nodes x 8 GPUs of ``h100-pool`` (H100 80GB),
which the sizing alone would put on one node, and an 8B on one GPU."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from lwsflow.cli import main
from lwsflow.components.catalog import parse_catalog
from lwsflow.components.manifests import render_model
from lwsflow.components.sizing import size_model
from lwsflow.controller.errors import InvalidInput
from tests.render.render_helpers import BIG_405B, ENVS, LLAMA_70B, model, user_doc


def _lws(objs: list[dict[str, Any]]) -> dict[str, Any]:
    return next(o for o in objs if o["kind"] == "LeaderWorkerSet")


def _containers(lws: dict[str, Any], template: str) -> dict[str, Any]:
    tpl = lws["spec"]["leaderWorkerTemplate"][template]
    return tpl["spec"]["containers"][0]


def _command_line(container: dict[str, Any]) -> str:
    return " ".join([*container["command"], *container["args"]])


def test_users_catalog_405b_fp8_on_two_nodes_and_8b_on_one_gpu() -> None:
    cat = parse_catalog(user_doc())
    big = size_model(cat, "big-405b").roles["aggregated"]
    assert (big.tp, big.pp, big.size, big.gpus_per_pod, big.gpus_per_replica) == (8, 2, 2, 8, 16)
    assert (big.replicas, big.nodes_total, big.pool) == (2, 4, "h100-pool")
    small = size_model(cat, "llama-8b").roles["aggregated"]
    assert (small.tp, small.pp, small.size, small.gpus_per_pod) == (1, 1, 1, 1)

    lws = _lws(render_model(cat, "big-405b"))
    assert lws["spec"]["leaderWorkerTemplate"]["size"] == 2
    leader = _containers(lws, "leaderTemplate")
    assert leader["resources"]["limits"]["nvidia.com/gpu"] == "8"
    line = _command_line(leader)
    assert "--tensor-parallel-size 8 --pipeline-parallel-size 2" in line
    assert "--ray_cluster_size=$(LWS_GROUP_SIZE)" in line and "--distributed-executor-backend ray" in line
    worker = _containers(lws, "workerTemplate")
    assert worker["resources"]["limits"]["nvidia.com/gpu"] == "8"
    assert "worker --ray_address=$(LWS_LEADER_ADDRESS)" in _command_line(worker)

    small_lws = _lws(render_model(cat, "llama-8b"))
    assert small_lws["spec"]["leaderWorkerTemplate"]["size"] == 1
    small_leader = _containers(small_lws, "workerTemplate")
    assert small_leader["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert "--tensor-parallel-size 1 --pipeline-parallel-size 1" in _command_line(small_leader)


def test_without_the_fields_the_405b_fp8_stays_on_one_node() -> None:
    """What the user got before: the sizing alone fits the fp8 405B in one node."""
    big = {k: v for k, v in BIG_405B.items() if k not in ("tensorParallelSize", "pipelineParallelSize")}
    rs = size_model(parse_catalog(user_doc(big)), "big-405b").roles["aggregated"]
    assert (rs.tp, rs.pp, rs.size) == (8, 1, 1)


def test_sglang_gets_the_same_layout_and_its_own_flags() -> None:
    cat = parse_catalog(user_doc(model(BIG_405B, engine="sglang", image="lmsysorg/sglang:v0.5.4")))
    lws = _lws(render_model(cat, "big-405b"))
    assert lws["spec"]["leaderWorkerTemplate"]["size"] == 2
    line = _command_line(_containers(lws, "workerTemplate"))
    assert "--tp-size 8" in line and "--pp-size 2" in line
    assert "--nnodes $(LWS_GROUP_SIZE) --node-rank $(LWS_WORKER_INDEX)" in line


def test_pipeline_stages_within_one_pod() -> None:
    """TP x PP within one node is one pod with every rank's GPU; SGLang gets --pp-size there too."""
    seventy = model(LLAMA_70B, nodePool="h100-pool", engine="sglang", image="lmsysorg/sglang:v0.5.4",
                    tensorParallelSize=2, pipelineParallelSize=2)
    cat = parse_catalog(user_doc(small=seventy))
    rs = size_model(cat, "llama-70b").roles["aggregated"]
    assert (rs.tp, rs.pp, rs.size, rs.gpus_per_pod, rs.nodes_total) == (2, 2, 1, 4, 1)
    container = _containers(_lws(render_model(cat, "llama-70b")), "workerTemplate")
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "4"
    line = _command_line(container)
    assert "--tp-size 2" in line and "--pp-size 2" in line and "--nnodes" not in line


def test_one_field_set_the_sizing_chooses_the_other() -> None:
    only_tp = {k: v for k, v in BIG_405B.items() if k != "pipelineParallelSize"}
    rs = size_model(parse_catalog(user_doc(model(only_tp, tensorParallelSize=2))), "big-405b").roles[
        "aggregated"]
    assert (rs.tp, rs.pp, rs.size, rs.gpus_per_pod) == (2, 3, 1, 6)  # the fewest stages that fit
    only_pp = {k: v for k, v in BIG_405B.items() if k != "tensorParallelSize"}
    rs = size_model(parse_catalog(user_doc(only_pp)), "big-405b").roles["aggregated"]
    assert (rs.tp, rs.pp, rs.size, rs.gpus_per_pod) == (4, 2, 1, 8)  # the smallest TP that fits


def test_each_role_of_a_pd_model_takes_its_own_or_the_models_parallelism() -> None:
    pd = {k: v for k, v in LLAMA_70B.items() if k != "replicas"}
    pd.update(nodePool="h100-pool", tensorParallelSize=4, prefill={"replicas": 1, "tensorParallelSize": 8},
              decode={"replicas": 1})
    cat = parse_catalog(user_doc(small=pd))
    roles = size_model(cat, "llama-70b").roles
    assert (roles["prefill"].tp, roles["decode"].tp) == (8, 4)


def _set(doc: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    out = copy.deepcopy(doc)
    node = out
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return out


BIG = ("models", 0)
PD_70B = model({k: v for k, v in LLAMA_70B.items() if k != "replicas"}, nodePool="h100-pool",
               prefill={"replicas": 1}, decode={"replicas": 1})

def _big(**changes: Any) -> dict[str, Any]:
    """The user's catalog with the 405B's keys changed (None removes one)."""
    big = {k: v for k, v in model(BIG_405B, **changes).items() if v is not None}
    return user_doc(big)


INFEASIBLE = [
    ("tp-over-node", _big(tensorParallelSize=16),
     "models[big-405b].tensorParallelSize", "16 exceeds the 8 GPUs per node of pool h100-pool"),
    ("tp-not-dividing-heads", _big(tensorParallelSize=3),
     "models[big-405b].tensorParallelSize", "3 does not divide attentionHeads=128"),
    ("tp-vs-kv-heads",
     _big(tensorParallelSize=6, architecture={**BIG_405B["architecture"], "attentionHeads": 48}),
     "models[big-405b].tensorParallelSize", "6 and kvHeads=8: one must divide the other"),
    ("pp-over-layers", _big(pipelineParallelSize=200),
     "models[big-405b].pipelineParallelSize", "200 pipeline stages but the model has only 126 layers"),
    ("partial-node", _big(tensorParallelSize=4, pipelineParallelSize=3),
     "models[big-405b].pipelineParallelSize",
     "tensorParallelSize 4 x pipelineParallelSize 3 = 12 GPUs: a group larger than one node fills whole "
     "nodes of pool h100-pool (a multiple of its 8 GPUs per node)"),
    ("memory", _big(tensorParallelSize=2, pipelineParallelSize=1),
     "models[big-405b].pipelineParallelSize", "= 2 GPUs on pool h100-pool offer 144.0 GiB (2 x 80 GiB x 0.9) "
     "but 405B fp8 needs 377.2 GiB weights + 31.5 GiB KV = 408.7 GiB; short by 264.7 GiB"),
    ("memory-tp-only", _set(_set(_big(tensorParallelSize=1, pipelineParallelSize=None),
                                 ("nodePools", 0, "nodes"), 1), ("nodePools", 0, "gpuMemoryGiB"), 40),
     "models[big-405b].tensorParallelSize",
     "at most tensorParallelSize 1 x pipelineParallelSize 8 = 8 GPUs on pool h100-pool offer 288.0 GiB"),
    ("group-over-pool", _big(pipelineParallelSize=16),
     "models[big-405b].pipelineParallelSize", "= 128 GPUs need 16 nodes per group but pool h100-pool has 8"),
    ("role-tp", user_doc(small=_set(PD_70B, ("prefill", "tensorParallelSize"), 16)),
     "models[llama-70b].prefill.tensorParallelSize", "16 exceeds the 8 GPUs per node"),
    ("env-override-role-tp",
     user_doc(small=PD_70B, environments=[ENVS[0], {**ENVS[1], "overrides": {
         "llama-70b": {"decode": {"replicas": 1, "tensorParallelSize": 1, "pipelineParallelSize": 1}}}}]),
     "environments[prod].overrides.llama-70b.decode.pipelineParallelSize", "= 1 GPUs on pool h100-pool offer "
     "72.0 GiB"),
    ("extra-args", _big(extraArgs=["--tensor-parallel-size=4"]),
     "models[big-405b].extraArgs",
     "--tensor-parallel-size is rendered from the sizing: set tensorParallelSize"),
    ("extra-args-sglang", _big(extraArgs=["--pp-size", "2"]),
     "models[big-405b].extraArgs", "--pp-size is rendered from the sizing: set pipelineParallelSize"),
    ("boolean", _big(tensorParallelSize=True),
     "models[big-405b].tensorParallelSize", "true is a boolean here"),
]


@pytest.mark.parametrize(("doc", "field", "fragment"), [c[1:] for c in INFEASIBLE],
                         ids=[c[0] for c in INFEASIBLE])
def test_infeasible_parallelism_is_one_line_naming_the_model_and_field(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], doc: dict[str, Any], field: str,
        fragment: str) -> None:
    path = tmp_path / "catalog.yaml"
    path.write_text(yaml.safe_dump(doc))
    env = ["--env", "prod"] if field.startswith("environments[prod]") else []  # plain `plan`: base values
    assert main(["plan", str(path), *env]) == 2
    plan = capsys.readouterr()
    assert plan.out == ""
    lines = plan.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {path}: {field}: "), lines
    assert fragment in lines[0]
    out = tmp_path / "out"
    assert main(["render", str(path), "--out", str(out)]) == 2
    assert capsys.readouterr().err == plan.err
    assert not out.exists()


def test_sizing_error_carries_the_field() -> None:
    with pytest.raises(InvalidInput) as info:
        size_model(parse_catalog(_set(user_doc(), (*BIG, "tensorParallelSize"), 16)), "big-405b")
    assert info.value.field == "models[big-405b].tensorParallelSize"
