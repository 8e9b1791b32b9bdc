"""Engine command lines for single-pod groups (multi-node and P/D wiring: test_render_manifests)."""

from __future__ import annotations

from typing import Any

from render_helpers import LLAMA_8B, LLAMA_70B, LLAMA_405B, build, model

from lwsflow.components.engines import Launch, launch
from lwsflow.components.sizing import size_model


def _launch(spec_doc: dict[str, Any], leader: bool = True) -> Launch:
    cat = build(spec_doc)
    name = spec_doc["name"]
    rs = next(iter(size_model(cat, name).roles.values()))
    return launch(cat.model(name), rs, leader=leader)


def test_vllm_single_pod_runs_vllm_serve_directly() -> None:
    out = _launch(model(LLAMA_8B, extraArgs=["--enable-prefix-caching"], maxModelLen=4096))
    assert out.command == ["vllm", "serve"]
    assert out.args[0] == "meta-llama/Llama-3.1-8B-Instruct"
    joined = " ".join(out.args)
    for flag in ("--tensor-parallel-size 1", "--pipeline-parallel-size 1", "--max-model-len 4096",
                 "--gpu-memory-utilization 0.9", "--dtype bfloat16", "--port 8000"):
        assert flag in joined
    assert out.args[-1] == "--enable-prefix-caching"  # extra args come last, so they win
    assert "--kv-transfer-config" not in joined and "LWS_" not in joined
    assert out.ports == [{"name": "http", "containerPort": 8000, "protocol": "TCP"}] and out.serves_http


def test_quantized_weights_take_the_dtype_from_the_checkpoint() -> None:
    out = _launch(model(LLAMA_405B, dtype="fp8"))
    assert "--dtype" not in out.args and out.command == ["vllm", "serve"]  # fp8 405B fits one node


def test_sglang_single_pod_has_no_multi_node_flags() -> None:
    out = _launch(model(LLAMA_70B, engine="sglang", port=30000))
    joined = " ".join(out.args)
    assert out.command == ["python3", "-m", "sglang.launch_server"]
    assert "--tp-size 4" in joined and "--port 30000" in joined and "--context-length 8192" in joined
    assert "--dist-init-addr" not in joined and "--nnodes" not in joined


def test_multi_node_workers_do_not_serve_http() -> None:
    worker = _launch(LLAMA_405B, leader=False)
    assert not worker.serves_http and worker.ports == []
    sglang_worker = _launch(model(LLAMA_405B, engine="sglang"), leader=False)
    assert not sglang_worker.serves_http and "--node-rank" in sglang_worker.args
