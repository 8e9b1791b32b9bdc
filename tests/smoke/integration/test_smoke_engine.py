"""The stand-in engine speaks vLLM's shapes: deterministic output, usage, SSE, errors, metrics, P/D."""

from __future__ import annotations

import json
import time

import httpx
import pytest

from lwsflow.components.smoke import scrape
from lwsflow.controller.errors import InvalidInput
from lwsflow.sim.engine import parse_faults, start_engine
from lwsflow.sim.engine.podhook import engine_modes
from tests.smoke.smoke_helpers import MODEL


def _post(url: str, path: str, body: dict, timeout: float = 5) -> httpx.Response:
    return httpx.post(url + path, json=body, timeout=timeout)


def test_binds_loopback_and_port_zero(engine):
    h = engine()
    assert h.host == "127.0.0.1" and h.port > 0
    assert httpx.get(h.url + "/health", timeout=2).status_code == 200
    assert httpx.get(h.url + "/version", timeout=2).json() == {"version": "0.33.0"}


def test_completion_is_deterministic_and_usage_counts_whitespace_words(engine):
    h = engine()
    body = {"model": MODEL, "prompt": "one two three four", "max_tokens": 50}
    a, b = _post(h.url, "/v1/completions", body).json(), _post(h.url, "/v1/completions", body).json()
    assert a["choices"][0]["text"] == b["choices"][0]["text"] and a["id"] != b["id"]
    text = a["choices"][0]["text"]
    assert a["object"] == "text_completion" and a["id"].startswith("cmpl-")
    assert a["usage"] == {"prompt_tokens": 4, "completion_tokens": len(text.split()),
                          "total_tokens": 4 + len(text.split()), "prompt_tokens_details": None}
    assert a["choices"][0]["finish_reason"] == "stop"  # natural length (4..15) < 50
    short = _post(h.url, "/v1/completions", {**body, "max_tokens": 2}).json()
    assert short["choices"][0]["finish_reason"] == "length" and short["usage"]["completion_tokens"] == 2


def test_chat_stream_ends_with_done_and_usage_chunk(engine):
    h = engine()
    body = {"model": MODEL, "messages": [{"role": "user", "content": "hi there"}], "stream": True,
            "stream_options": {"include_usage": True}, "max_tokens": 3}
    with httpx.stream("POST", h.url + "/v1/chat/completions", json=body, timeout=5) as r:
        assert r.headers["content-type"] == "text/event-stream"
        data = [line[6:] for line in r.iter_lines() if line.startswith("data: ")]
    assert data[-1] == "[DONE]"
    events = [json.loads(d) for d in data[:-1]]
    assert events[0]["choices"][0]["delta"]["role"] == "assistant"
    assert all(e["object"] == "chat.completion.chunk" for e in events)
    assert events[-1]["choices"] == [] and events[-1]["usage"]["completion_tokens"] == 3
    assert [e["choices"][0]["finish_reason"] for e in events[:-1]][-1] == "length"


def test_errors_nested_for_vllm_flat_for_sglang(engine):
    body = {"model": "nope", "prompt": "x"}
    r = _post(engine().url, "/v1/completions", body)
    assert r.status_code == 404 and r.json()["error"]["type"] == "NotFoundError"
    assert r.json()["error"]["param"] == "model"
    flat = _post(engine(error_style="sglang").url, "/v1/completions", body).json()
    assert flat["object"] == "error" and flat["code"] == 404 and "error" not in flat
    r = _post(engine().url, "/v1/completions", {"model": MODEL, "prompt": "x", "stream_options": {}})
    assert r.status_code == 400  # stream_options without stream, as vLLM


def test_api_key_guards_only_v1(engine):
    h = engine(api_key="s3cret")
    assert httpx.get(h.url + "/v1/models", timeout=2).status_code == 401
    ok = httpx.get(h.url + "/v1/models", headers={"Authorization": "Bearer s3cret"}, timeout=2)
    assert ok.json()["data"][0]["id"] == MODEL
    assert httpx.get(h.url + "/metrics", timeout=2).status_code == 200


def _prefill(p_url: str, prompt: str) -> dict:
    r = _post(p_url, "/v1/completions", {"model": MODEL, "prompt": prompt, "max_tokens": 1,
                                         "kv_transfer_params": {"do_remote_decode": True}})
    assert r.status_code == 200
    return r.json()["kv_transfer_params"]


def test_pd_handoff_pulls_kv_from_prefill_and_counts_external_tokens(engine):
    p, d = engine("prefill"), engine("decode")
    prompt = "a b c d e f g h i j"
    params = _prefill(p.url, prompt)
    assert params["do_remote_prefill"] is True and params["remote_block_ids"]
    assert params["remote_port"] != p.port  # the side channel is its own server
    r = _post(d.url, "/v1/completions", {"model": MODEL, "prompt": prompt, "kv_transfer_params": params})
    assert r.status_code == 200
    m = scrape.parse(httpx.get(d.url + "/metrics", timeout=2).text)
    assert m.total(scrape.EXTERNAL_KV, source="external_kv_transfer") == 10
    assert m.total("vllm:nixl_num_failed_transfers_total") == 0
    # The blocks were handed over once: a replay finds nothing, fails like vLLM (policy fail) and counts it.
    again = _post(d.url, "/v1/completions", {"model": MODEL, "prompt": prompt, "kv_transfer_params": params})
    assert again.status_code == 500 and "KV load failed" in again.json()["error"]["message"]
    m = scrape.parse(httpx.get(d.url + "/metrics", timeout=2).text)
    assert m.total("vllm:nixl_num_failed_transfers_total") == 1


@pytest.mark.parametrize("params", [
    {"do_remote_prefill": True},  # no remote engine at all
    {"do_remote_prefill": True, "remote_engine_id": "x", "remote_block_ids": [1], "remote_host": "127.0.0.1",
     "remote_port": 1, "remote_request_id": "r"},  # nothing listens there
], ids=["missing-fields", "dead-prefiller"])
def test_decode_without_valid_params_fails(engine, params):
    d = engine("decode")
    r = _post(d.url, "/v1/completions", {"model": MODEL, "prompt": "x y", "kv_transfer_params": params})
    assert r.status_code == 500 and r.json()["error"]["type"] == "InternalServerError"


def test_decode_for_another_prompt_is_rejected(engine):
    p, d = engine("prefill"), engine("decode")
    params = _prefill(p.url, "the real prompt")
    r = _post(d.url, "/v1/completions", {"model": MODEL, "prompt": "another", "kv_transfer_params": params})
    assert r.status_code == 500 and "different prompt" in r.json()["error"]["message"]


def test_kv_lease_expires(engine):
    p, d = engine("prefill", kv_lease_s=0.1), engine("decode")
    params = _prefill(p.url, "x y z")
    time.sleep(0.2)
    r = _post(d.url, "/v1/completions", {"model": MODEL, "prompt": "x y z", "kv_transfer_params": params})
    assert r.status_code == 500
    m = scrape.parse(httpx.get(p.url + "/metrics", timeout=2).text)
    assert m.total("vllm:nixl_num_kv_expired_reqs_total") == 1


def test_hang_is_released_on_stop():
    h = start_engine(model=MODEL, modes="hang:completions")
    t0 = time.monotonic()
    with pytest.raises(httpx.ReadTimeout):
        _post(h.url, "/v1/completions", {"model": MODEL, "prompt": "x"}, timeout=0.3)
    h.stop()
    assert time.monotonic() - t0 < 3


@pytest.mark.parametrize("spec", ["nope", "slow-ttft=abc", "hang:nowhere", "slow-itl=-1"])
def test_bad_mode_spec_is_invalid_input(spec):
    with pytest.raises(InvalidInput):
        parse_faults(spec)


def test_mode_scopes():
    f = parse_faults("slow-ttft=0.3,status500:chat+completions")
    assert f.get("slow-ttft", "chat-stream").value == 0.3 and f.get("slow-ttft", "chat") is None
    assert f.get("status500", "completions") and not f.get("status500", "chat-stream")


@pytest.mark.parametrize(("image", "annotation", "modes"), [
    ("registry.local/vllm-openai:v0.33.0", None, ""),
    ("registry.local/vllm-openai:v0.34-bad", None, "status500"),
    ("registry.local/vllm-openai:v0.34-bad@sha256:" + "0" * 64, None, "status500"),
    ("bad-registry.local:5000/vllm-openai:v1", None, ""),  # "bad" in the host, not the tag
    ("vllm:v1", "slow-ttft=2", "slow-ttft=2"),
])
def test_pod_engine_modes_from_image_tag_and_annotation(image, annotation, modes):
    pod = {"metadata": {"annotations": {"sim.lwsflow.io/engine-mode": annotation} if annotation else {}},
           "spec": {"containers": [{"name": "e", "image": image}]}}
    assert engine_modes(pod) == modes
