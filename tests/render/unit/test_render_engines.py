"""Engine command lines for single-pod groups (multi-node and P/D wiring: test_render_manifests)."""

from __future__ import annotations

from typing import Any

import pytest

from lwsflow.components.engines import Launch, launch
from lwsflow.components.sizing import size_model
from tests.render.render_helpers import LLAMA_8B, LLAMA_70B, LLAMA_405B, build, model


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
    out = _launch(model(LLAMA_405B, dtype="fp8", checkpointDtype="fp8",
                        model="neuralmagic/Meta-Llama-3.1-405B-Instruct-FP8"))
    assert "--dtype" not in out.args and out.command == ["vllm", "serve"]  # fp8 405B fits one node
    assert "--quantization" not in out.args  # pre-quantized: the engine reads its quantization config


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_fp8_from_a_16_bit_checkpoint_is_quantized_on_the_fly(engine: str) -> None:
    """Issue 13.7: `dtype: fp8` sizes 1 byte per weight; a bf16 checkpoint without a flag would load
    2. vLLM (`--quantization fp8`: online dynamic quantization of a BF16/FP16 model) and SGLang
    (`--quantization fp8` on a 16-bit checkpoint) quantize at load time."""
    out = _launch(model(LLAMA_405B, dtype="fp8", engine=engine))
    assert " ".join(out.args).count("--quantization fp8") == 1
    explicit = _launch(model(LLAMA_405B, dtype="fp8", engine=engine, checkpointDtype="bf16"))
    assert explicit.args == out.args


@pytest.mark.parametrize(("changes", "field"), [
    ({"dtype": "bf16", "checkpointDtype": "fp8"}, "checkpointDtype"),
    ({"dtype": "int4", "checkpointDtype": "bf16"}, "checkpointDtype"),
])
def test_checkpoint_dtype_that_cannot_serve_the_dtype_is_refused(changes: dict[str, str], field: str) -> None:
    from lwsflow.controller.errors import InvalidInput

    with pytest.raises(InvalidInput, match=field):
        build(model(LLAMA_8B, **changes))


@pytest.mark.parametrize(("changes", "warns"), [
    ({"dtype": "fp8", "model": "org/Llama-3.1-8B-Instruct-FP8"}, "looks like a pre-quantized fp8"),
    ({"dtype": "fp8", "checkpointDtype": "fp8"}, "does not look like an fp8 checkpoint"),
    ({"dtype": "bf16", "model": "org/llama-3.1-8b-fp8-dynamic"}, "looks like a pre-quantized fp8"),
    ({"dtype": "fp8", "checkpointDtype": "fp8", "model": "org/Llama-FP8"}, None),
    ({"dtype": "fp8"}, None),
])
def test_model_id_of_the_other_kind_warns(changes: dict[str, str], warns: str | None) -> None:
    spec = build(model(LLAMA_8B, **changes)).model("llama-8b")
    found = spec.checkpoint_warnings()
    assert (warns in found[0] and len(found) == 1) if warns else found == []


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
