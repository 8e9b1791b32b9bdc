"""What the stand-in engine answers: OpenAI completions/chat in vLLM's shapes, and the P/D hand-off.

Shapes follow ``shared/docs/smoke-reference.md`` §2 (vLLM 0.33): ``text_completion`` /
``chat.completion`` objects, SSE chunks ending ``data: [DONE]``, ``stream_options.include_usage``
adding a final usage chunk with empty ``choices``, errors nested (vLLM) or flat (SGLang). Roles follow
§4.1: a ``prefill`` engine answering a ``do_remote_decode`` request holds the KV and returns filled
``kv_transfer_params``; a ``decode`` engine given ``do_remote_prefill`` params pulls that KV over the
side channel, and with ``kv_load_failure_policy=fail`` (vLLM's default) a failed pull is an error.
"""

from __future__ import annotations

import math
import random
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from lwsflow.controller.errors import InvalidInput
from lwsflow.sim.engine import kv, textgen
from lwsflow.sim.engine.faults import Faults, parse_faults
from lwsflow.sim.engine.metrics import EngineMetrics

ROLES = ("aggregated", "prefill", "decode")


class EngineOptions(BaseModel):
    """Tunables of one stand-in engine (all optional)."""

    model_config = ConfigDict(extra="forbid")

    modes: str = Field("", description="failure modes, e.g. 'slow-ttft=0.5,status500:chat' (see faults)")
    ttft_s: float = Field(0.0, ge=0, description="base (median) time to first token")
    itl_s: float = Field(0.0, ge=0, description="base (median) inter-token latency")
    # behaviour profile (sim/config.py ImageProfile, by image digest): latency spread, errors, decay
    ttft_p95_s: float | None = Field(None, ge=0, description="p95 TTFT: samples log-normal around ttft_s")
    itl_p95_s: float | None = Field(None, ge=0, description="p95 ITL: samples log-normal around itl_s")
    error_ratio: float = Field(0.0, ge=0, le=1, description="share of generation requests answering 500")
    kv_failure_ratio: float = Field(0.0, ge=0, le=1, description="decode: share of KV pulls that fail")
    slowdown_per_min: float = Field(0.0, ge=0, description="latency grows by this share per minute up")
    seed: int | None = Field(None, description="seed of the sampling (None: from the engine id)")
    api_key: str | None = Field(None, description="require this bearer token on /v1 (vLLM --api-key)")
    error_style: Literal["vllm", "sglang"] = Field("vllm", description="nested (vLLM) / flat (SGLang) errors")
    version: str = Field("0.33.0", description="what /version reports")
    side_channel_port: int = Field(0, ge=0, le=65535, description="prefill KV side channel port (0: any)")
    kv_lease_s: float = Field(30.0, gt=0, description="how long a prefill holds KV for the decoder")
    kv_timeout_s: float = Field(2.0, gt=0, description="decode's timeout pulling remote KV")
    kv_layout: str = Field(kv.DEFAULT_KV_LAYOUT, min_length=1, max_length=64,
                           description="KV-cache layout version: a NIXL handshake between engines of "
                           "different layouts fails (vLLM's compatibility hash)")
    max_model_len: int = Field(8192, gt=0)
    tls: bool = Field(False, description="serve HTTPS with a fresh self-signed certificate (like the "
                      "llm-d sidecar's default --secure-proxy)")

    @field_validator("modes")
    @classmethod
    def _valid_modes(cls, v: str) -> str:
        parse_faults(v, "modes")
        return v


class EngineError(Exception):
    """An OpenAI-style error answer (status, type, message, param)."""

    def __init__(self, status: int, etype: str, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.status, self.type, self.message, self.param = status, etype, message, param


def error_body(style: str, status: int, etype: str, message: str, param: str | None = None) -> dict:
    """vLLM nests the error under ``error``; SGLang's OpenAI server answers a flat object."""
    if style == "sglang":
        return {"object": "error", "message": message, "type": etype, "param": param, "code": status}
    return {"error": {"message": message, "type": etype, "param": param, "code": status}}


@dataclass
class Generation:
    """One accepted request, before it is written out."""

    kind: str  # completions | chat
    scope: str
    rid: str
    model: str
    prompt: str
    prompt_tokens: int
    tokens: list[str]
    finish_reason: str
    stream: bool
    include_usage: bool
    external_tokens: int = 0
    kv_params: dict | None = None
    created: int = field(default_factory=lambda: int(time.time()))


class Engine:
    """State of one stand-in engine: role, model, faults, metrics, and (prefill) the KV side channel."""

    def __init__(self, host: str, role: str, model: str, options: EngineOptions,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if role not in ROLES:
            raise InvalidInput(f"must be one of {', '.join(ROLES)}, got {role!r}", field="role")
        self.role, self.options = role, options
        self.faults: Faults = parse_faults(options.modes, "modes")
        # wrong-model: the engine was started with another --served-model-name than the release expects
        self.model = f"{model}-wrong" if self.faults.has("wrong-model") else model
        self.api_key, self.error_style, self.version = options.api_key, options.error_style, options.version
        self.metrics = EngineMetrics(self.model)
        self.stopped = threading.Event()
        self.engine_id = str(uuid.uuid4())
        self.clock = clock  # uptime for slowdown_per_min: the cluster's clock when a pod hook runs it
        self.started = clock()
        self.rng = random.Random(options.seed if options.seed is not None else self.engine_id)
        self._rng_lock = threading.Lock()
        self.side_channel: kv.SideChannel | None = None
        self.compat_hash = kv.compatibility_hash(options.version, options.kv_layout)
        self.handshakes = kv.Handshakes(self.compat_hash)
        if role == "prefill":
            store = kv.KVStore(self.engine_id, options.kv_lease_s,
                               lambda: self.metrics.nixl_expired.labels(**self.metrics.lv()).inc())
            self.side_channel = kv.SideChannel(store, host, options.side_channel_port,
                                               lambda: bool(self.faults.get("broken-handoff", "kv")),
                                               self.compat_hash)

    def set_modes(self, spec: str) -> None:
        """Switch failure modes at run time (a release going bad under a running pod)."""
        self.faults = parse_faults(spec, "modes")

    def close(self) -> None:
        if self.side_channel is not None:
            self.side_channel.stop()

    def models(self) -> dict:
        return {"object": "list", "data": [{
            "id": self.model, "object": "model", "created": int(time.time()), "owned_by": "vllm",
            "root": self.model, "parent": None, "max_model_len": self.options.max_model_len,
            "permission": []}]}

    # -- request handling ----------------------------------------------------------------------------
    def generate(self, path: str, body: dict, scope: str) -> Generation:
        """Validate a request and decide its output (raises EngineError like vLLM would)."""
        model = body.get("model")
        if model != self.model:
            raise EngineError(404, "NotFoundError", f"The model `{model}` does not exist.", "model")
        stream = bool(body.get("stream"))
        if body.get("stream_options") is not None and not stream:
            raise EngineError(400, "BadRequestError",
                              "Stream options can only be defined when `stream=True`.", "stream_options")
        if scope == "chat":
            msgs = body.get("messages")
            if not isinstance(msgs, list) or not msgs:
                raise EngineError(400, "BadRequestError", "messages: field required", "messages")
            prompt = textgen.chat_prompt(msgs)
        else:
            raw = body.get("prompt")
            if isinstance(raw, list) and raw and all(isinstance(p, str) for p in raw):
                raw = raw[0]
            if not isinstance(raw, str):
                raise EngineError(400, "BadRequestError", "prompt: must be a string", "prompt")
            prompt = raw
        max_tokens = body.get("max_completion_tokens", body.get("max_tokens", 16))
        if not isinstance(max_tokens, int) or max_tokens < 1:
            raise EngineError(400, "BadRequestError", "max_tokens must be at least 1", "max_tokens")
        kvp = body.get("kv_transfer_params")
        if kvp is not None and not isinstance(kvp, dict):
            raise EngineError(400, "BadRequestError", "kv_transfer_params must be an object",
                              "kv_transfer_params")
        n_prompt = textgen.count_tokens(prompt)
        tokens, finish = textgen.generate(prompt, max_tokens)
        gen = Generation(kind=scope, scope=f"{scope}-stream" if stream else scope,
                         rid=("chatcmpl-" if scope == "chat" else "cmpl-") + uuid.uuid4().hex,
                         model=self.model, prompt=prompt, prompt_tokens=n_prompt, tokens=tokens,
                         finish_reason=finish, stream=stream,
                         include_usage=bool((body.get("stream_options") or {}).get("include_usage")))
        if self._draw() < self.options.error_ratio:  # profile: a flaky release fails some requests
            self.metrics.success.labels(**self.metrics.lv(finished_reason="error")).inc()
            raise EngineError(500, "InternalServerError", "EngineCore encountered an issue. See stack "
                              "trace (above) for the root cause.")
        if kvp and self.role == "decode" and kvp.get("do_remote_prefill"):
            gen.external_tokens = self._load_remote_kv(kvp, prompt)
        if kvp and self.role == "prefill" and kvp.get("do_remote_decode"):
            gen.kv_params = self._hold_kv(prompt, n_prompt, scope)
        return gen

    def _load_remote_kv(self, kvp: dict, prompt: str) -> int:
        t0 = time.monotonic()
        try:
            if self._draw() < self.options.kv_failure_ratio:
                raise kv.KVTransferError("NIXL transfer failed (profile kv_failure_ratio)")
            loaded = kv.pull_remote_kv(kvp, prompt, self.options.kv_timeout_s, self.handshakes)
        except kv.KVTransferError as exc:
            self.metrics.nixl_failed.labels(**self.metrics.lv()).inc()
            if self.faults.get("kv-recompute", "kv"):
                return 0  # kv_load_failure_policy=recompute: silently prefill locally
            self.metrics.success.labels(**self.metrics.lv(finished_reason="error")).inc()
            raise EngineError(500, "InternalServerError",
                              f"KV load failed (kv_load_failure_policy=fail): {exc}") from exc
        self.metrics.nixl_xfer.labels(**self.metrics.lv()).observe(time.monotonic() - t0)
        return loaded

    def _hold_kv(self, prompt: str, n_prompt: int, scope: str) -> dict | None:
        assert self.side_channel is not None
        rid, blocks, expiry = self.side_channel.store.hold(prompt, n_prompt)
        if self.faults.get("no-kv-params", scope):
            return None
        # Field set of vLLM's NIXL pull scheduler (reference §4.1 step 2).
        return {"do_remote_prefill": True, "do_remote_decode": False, "remote_block_ids": blocks,
                "remote_engine_id": self.engine_id, "remote_request_id": rid,
                "remote_host": self.side_channel.host, "remote_port": self.side_channel.port,
                "tp_size": 1, "dcp_size": 1, "pp_size": 1, "remote_num_tokens": n_prompt,
                "remote_blocks_expiry_time": expiry, "remote_registration_generation": 0,
                "transfer_mode": "pull"}

    # -- answers ---------------------------------------------------------------------------------------
    def _draw(self) -> float:
        with self._rng_lock:
            return self.rng.random()

    def _sample(self, median: float, p95: float | None) -> float:
        """Log-normal with the given median and p95 (p95 <= median: fixed), slowed down over uptime."""
        v = median
        if p95 is not None and p95 > median > 0:
            sigma = math.log(p95 / median) / 1.6449  # z of the 95th percentile
            with self._rng_lock:
                v = self.rng.lognormvariate(math.log(median), sigma)
        if self.options.slowdown_per_min:
            v *= 1 + self.options.slowdown_per_min * (self.clock() - self.started) / 60
        return v

    def _latency(self, scope: str) -> tuple[float, float]:
        o = self.options
        ttft, itl = self._sample(o.ttft_s, o.ttft_p95_s), self._sample(o.itl_s, o.itl_p95_s)
        if f := self.faults.get("slow-ttft", scope):
            ttft += f.value
        if f := self.faults.get("slow-itl", scope):
            itl += f.value
        return ttft, itl

    def pace_nonstream(self, gen: Generation, scope: str) -> None:
        """A non-streaming answer takes TTFT plus the inter-token gaps, like the real engine."""
        ttft, itl = self._latency(scope)
        self.stopped.wait(ttft + itl * max(len(gen.tokens) - 1, 0))
        self.metrics.ttft.labels(**self.metrics.lv()).observe(ttft)

    def _usage(self, gen: Generation, completion_tokens: int) -> dict:
        # usage-mismatch: a broken usage aggregation (total disagrees with its parts)
        skew = 3 if self.faults.get("usage-mismatch", gen.scope) else 0
        return {"prompt_tokens": gen.prompt_tokens, "completion_tokens": completion_tokens,
                "total_tokens": gen.prompt_tokens + completion_tokens + skew,
                "prompt_tokens_details": None}

    def response_body(self, gen: Generation) -> dict:
        text = "".join(gen.tokens)
        self.metrics.finished(gen.finish_reason, gen.prompt_tokens, len(gen.tokens), gen.external_tokens)
        if gen.kind == "chat":
            choice = {"index": 0, "message": {"role": "assistant", "content": text, "refusal": None,
                                              "tool_calls": [], "reasoning": None},
                      "logprobs": None, "finish_reason": gen.finish_reason, "stop_reason": None}
            obj = "chat.completion"
        else:
            choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": gen.finish_reason,
                      "stop_reason": None}
            obj = "text_completion"
        return {"id": gen.rid, "object": obj, "created": gen.created, "model": gen.model,
                "choices": [choice], "usage": self._usage(gen, len(gen.tokens)),
                "system_fingerprint": None, "kv_transfer_params": gen.kv_params}

    def stream_events(self, gen: Generation) -> Iterator[dict | str | None]:
        """SSE payloads in order; ``None`` tells the writer to cut the connection (half-stream)."""
        m = self.metrics
        ttft, itl = self._latency(gen.scope)
        chat = gen.kind == "chat"
        obj = "chat.completion.chunk" if chat else "text_completion"

        def chunk(piece: str | None, finish: str | None, first: bool = False) -> dict:
            if chat:
                delta: dict = {"role": "assistant", "content": ""} if first else {}
                if piece is not None:
                    delta["content"] = piece
                c = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish,
                     "stop_reason": None}
            else:
                c = {"index": 0, "text": piece or "", "logprobs": None, "finish_reason": finish,
                     "stop_reason": None}
            return {"id": gen.rid, "object": obj, "created": gen.created, "model": gen.model,
                    "choices": [c], "usage": None}

        t0 = time.monotonic()
        if chat:
            yield chunk(None, None, first=True)
        half = len(gen.tokens) // 2 if self.faults.get("half-stream", gen.scope) else None
        for i, tok in enumerate(gen.tokens):
            if self.stopped.wait(ttft if i == 0 else itl):
                return
            if i == 0:
                m.ttft.labels(**m.lv()).observe(time.monotonic() - t0)
            else:
                m.itl.labels(**m.lv()).observe(itl)
            if half is not None and i == max(half, 1):
                m.success.labels(**m.lv(finished_reason="abort")).inc()
                yield None
                return
            if i == 1 and self.faults.get("stream-error", gen.scope):
                m.success.labels(**m.lv(finished_reason="error")).inc()
                yield error_body("vllm", 500, "InternalServerError", "engine step failed mid-stream")
                yield "[DONE]"
                return
            yield chunk(tok, None)
        yield chunk("" if not chat else None, gen.finish_reason)
        m.e2e.labels(**m.lv()).observe(time.monotonic() - t0)
        m.finished(gen.finish_reason, gen.prompt_tokens, len(gen.tokens), gen.external_tokens)
        if gen.include_usage:
            yield {"id": gen.rid, "object": obj, "created": gen.created, "model": gen.model, "choices": [],
                   "usage": self._usage(gen, len(gen.tokens))}
        yield "[DONE]"
