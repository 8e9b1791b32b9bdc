"""Every check passes against a healthy stub in each role; each failure mode fails only its check."""

from __future__ import annotations

import time

import pytest

from lwsflow.components.smoke import run_smoke
from lwsflow.components.smoke.checks import GENERATION
from tests.smoke.smoke_helpers import MODEL, by_name, failed_names, fast_config

ENDPOINT_CHECKS = {"health", "models", *GENERATION, "error-shape", "metrics", "ttft", "itl"}


@pytest.mark.parametrize("role", ["aggregated", "prefill", "decode"])
def test_healthy_stub_passes_every_check(engine, role):
    h = engine(role)
    report = run_smoke(fast_config(urls=[h.url], max_ttft_s=0.5, max_itl_s=0.5, expected_version="0.33.0"))
    assert report.passed, report.failed()
    assert {c.name for c in report.checks} == ENDPOINT_CHECKS | {"version"}
    assert all(c.passed and not c.skipped and c.duration_s >= 0 for c in report.checks)
    stream = by_name(report)["chat-stream"][0]
    assert stream.data["ttft_s"] < 0.5


def test_model_discovered_when_not_given(engine):
    h = engine()
    report = run_smoke(fast_config(urls=[h.url], model=None))
    assert report.passed, report.failed()
    assert by_name(report)["models"][0].data["models"] == [MODEL]


def test_sglang_flat_error_body_is_recognised(engine):
    h = engine(error_style="sglang")
    report = run_smoke(fast_config(urls=[h.url]))
    assert report.passed
    assert by_name(report)["error-shape"][0].data["form"] == "sglang"


# (engine modes, config overrides, the checks that must fail — and no others)
FAULTS = [
    pytest.param("status503:health", {}, {"health"}, id="health-503"),
    pytest.param("hang:health", {}, {"health"}, id="health-hang"),
    pytest.param("wrong-model", {}, {"models"}, id="wrong-model"),
    pytest.param("status500:models", {}, {"models"}, id="models-500"),
    pytest.param("status500:completions", {}, {"completions"}, id="completions-500"),
    pytest.param("status500:chat", {}, {"chat"}, id="chat-500"),
    pytest.param("garbage:completions", {}, {"completions"}, id="completions-garbage"),
    pytest.param("reset:chat", {}, {"chat"}, id="chat-reset"),
    pytest.param("hang:completions", {}, {"completions"}, id="completions-hang"),
    pytest.param("usage-mismatch:completions", {}, {"completions"}, id="completions-usage"),
    pytest.param("usage-mismatch:chat-stream", {}, {"chat-stream"}, id="chat-stream-usage"),
    pytest.param("half-stream:completions-stream", {}, {"completions-stream"}, id="half-stream"),
    pytest.param("half-stream:chat-stream", {}, {"chat-stream"}, id="chat-half-stream"),
    pytest.param("stream-error:chat-stream", {}, {"chat-stream"}, id="stream-error-event"),
    pytest.param("hang:chat-stream", {}, {"chat-stream"}, id="stream-hang"),
    pytest.param("garbage:completions-stream", {}, {"completions-stream"}, id="stream-garbage"),
    pytest.param("reset:completions-stream", {}, {"completions-stream"}, id="stream-reset"),
    pytest.param("bad-error-body", {}, {"error-shape"}, id="bad-error-body"),
    pytest.param("bad-metrics", {}, {"metrics"}, id="bad-metrics"),
    pytest.param("status500:metrics", {}, {"metrics"}, id="metrics-500"),
    pytest.param("slow-ttft=0.4", {"max_ttft_s": 0.25}, {"ttft"}, id="slow-ttft"),
    pytest.param("slow-itl=0.12", {"max_itl_s": 0.08}, {"itl"}, id="slow-itl"),
]


@pytest.mark.parametrize(("modes", "overrides", "expected"), FAULTS)
def test_each_failure_mode_is_caught_by_its_check_only(engine, modes, overrides, expected):
    h = engine(modes=modes)
    t0 = time.monotonic()
    report = run_smoke(fast_config(urls=[h.url], **overrides))
    elapsed = time.monotonic() - t0
    assert not report.passed
    assert failed_names(report) == expected, [(c.name, c.detail) for c in report.failed()]
    # The rest either passed or was skipped because a prerequisite failed — never silently dropped.
    assert {c.name for c in report.checks} == ENDPOINT_CHECKS
    for c in report.failed():  # each failure ends within its own bound: request timeout or warm-up
        assert c.detail and c.duration_s < 1.5, (c.name, c.duration_s)
    assert elapsed < 6, f"the run took {elapsed:.1f}s"


def test_skipped_checks_name_their_reason(engine):
    report = run_smoke(fast_config(urls=[engine(modes="wrong-model").url]))
    chat = by_name(report)["chat"][0]
    assert chat.skipped and "models failed" in chat.detail
    assert by_name(report)["models"][0].expected == MODEL


def test_same_model_twice_on_two_endpoints(engine):
    a, b = engine(), engine(modes="status500:chat")
    report = run_smoke(fast_config(urls=[a.url, b.url]))
    assert [(c.name, c.target) for c in report.failed()] == [("chat", b.url)]
