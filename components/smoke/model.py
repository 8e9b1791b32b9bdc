"""Typed inputs and outputs of the smoke test: SmokeConfig in, SmokeReport (a list of checks) out."""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator

Role = Literal["aggregated", "prefill", "decode", "gateway"]


class Endpoint(BaseModel):
    """One HTTP endpoint to check: a leader pod, a Service, or a gateway."""

    model_config = ConfigDict(extra="forbid")

    target: str = Field(description="what the report calls it, e.g. 'lws/llama pod llama-0' or a URL")
    url: str
    role: Role = "aggregated"
    model: str | None = Field(None, description="served model id expected in /v1/models")
    pod: str | None = None
    group: str | None = Field(None, description="target group for P/D pairing (pair or DS name)")


class SmokeConfig(BaseModel):
    """Everything one smoke run needs; built by the CLI or by the rollout controller's stage hook."""

    model_config = ConfigDict(extra="forbid")

    urls: list[str] = Field(default_factory=list, description="aggregated endpoints (--url)")
    prefill_url: str | None = None
    decode_url: str | None = None
    gateway_url: str | None = None
    targets: list[str] = Field(default_factory=list, description="cluster targets: lws/N, pair/N, ds/N")
    namespace: str = "default"
    kubeconfig: str | None = None
    context: str | None = None
    revision_only: bool = Field(False, description="only the pods of the newest template revision")
    model: str | None = Field(None, description="expected served model (default: from the cluster)")
    token: SecretStr | None = Field(None, description="bearer token for the endpoints (never from argv)")
    verify_tls: bool = True
    ca_file: str | None = None
    request_timeout_s: float = Field(10.0, gt=0, description="one HTTP request, connect to last byte")
    warmup_s: float = Field(30.0, ge=0, description="how long /health may keep failing (pod warming)")
    retries: int = Field(3, ge=1, le=20, description="attempts for connection errors and 503s")
    backoff_s: float = Field(0.5, ge=0, description="first retry delay; doubles each time")
    deadline_s: float = Field(300.0, gt=0, description="the whole run")
    max_tokens: int = Field(8, ge=1, le=4096)
    max_ttft_s: float | None = Field(None, gt=0)
    max_itl_s: float | None = Field(None, gt=0)
    expected_version: str | None = None
    gpu_product: str | None = Field(None, description="expected nvidia.com/gpu.product of every node")
    node_pool: str | None = Field(None, description="expected lwsflow.io/node-pool of every node")
    gpus_per_pod: int | None = Field(None, ge=0, description="expected nvidia.com/gpu per pod")
    placement: bool = Field(True, description="check placement of cluster targets")

    @field_validator("targets")
    @classmethod
    def _targets(cls, v: list[str]) -> list[str]:
        for t in v:
            kind, _, name = t.partition("/")
            if kind not in ("lws", "pair", "ds") or not name:
                raise ValueError(f"target {t!r} must be lws/NAME, pair/NAME or ds/NAME")
        return v

    @field_validator("urls", "prefill_url", "decode_url", "gateway_url")
    @classmethod
    def _url(cls, v: Any) -> Any:
        for u in v if isinstance(v, list) else [v]:
            if u is not None and not (u.startswith("http://") or u.startswith("https://")):
                raise ValueError(f"{u!r} is not an http(s) URL")
        return v


class CheckResult(BaseModel):
    """One check on one target. ``skipped`` checks did not run because a check they need failed."""

    name: str
    target: str
    passed: bool
    detail: str = ""
    duration_s: float = 0.0
    skipped: bool = False
    expected: str | None = None
    got: str | None = None
    data: dict[str, Any] = Field(default_factory=dict, description="measurements, e.g. ttft_s")


class SmokeReport(BaseModel):
    """The result of a run: ``passed`` only if every check that ran passed and at least one ran."""

    passed: bool
    checks: list[CheckResult]
    duration_s: float = 0.0

    @classmethod
    def build(cls, checks: list[CheckResult], duration_s: float) -> SmokeReport:
        ran = [c for c in checks if not c.skipped]
        ok = bool(ran) and all(c.passed for c in ran) and all(c.passed or c.skipped for c in checks)
        return cls(passed=ok, checks=checks, duration_s=round(duration_s, 3))

    def failed(self) -> list[CheckResult]:
        return [c for c in self.checks if not c.passed and not c.skipped]

    def to_json(self) -> str:
        return json.dumps(self.model_dump(mode="json"), indent=2)
