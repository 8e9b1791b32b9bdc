"""Smoke test for served LLM endpoints: the gate that says a new revision really serves.

``run_smoke(SmokeConfig) -> SmokeReport`` checks each endpoint (health, models, completions and chat
plain and streaming, error bodies, metrics, TTFT/ITL gates), the P/D hand-off per prefill/decode
pair, and placement on the GPU pool, against cluster targets or explicit URLs. Reference:
``shared/docs/smoke-reference.md``.
"""

from __future__ import annotations

from lwsflow.components.smoke.model import CheckResult, Endpoint, SmokeConfig, SmokeReport
from lwsflow.components.smoke.report import render_table, write_report
from lwsflow.components.smoke.runner import run_smoke

__all__ = ["CheckResult", "Endpoint", "SmokeConfig", "SmokeReport", "render_table", "run_smoke",
           "write_report"]
