"""The http and command providers against real endpoints and processes (issue 17)."""

from __future__ import annotations

import sys

import pytest

from lwsflow.controller.analysis.providers import ProviderError, command_value, http_value, prometheus_value
from lwsflow.controller.analysis.spec import CommandProvider, HttpProvider
from lwsflow.sim.engine import start_engine


def test_http_value_reads_a_json_path() -> None:
    with start_engine(model="m", max_model_len=4096) as eng:
        p = HttpProvider(url=eng.url + "/v1/models", jsonPath="data.0.max_model_len")
        assert http_value(p, {}) == 4096.0
        with pytest.raises(ProviderError, match=r"no 'data\.5\.id'"):
            http_value(HttpProvider(url=eng.url + "/v1/models", jsonPath="data.5.id"), {})
        with pytest.raises(ProviderError, match="HTTP 404"):
            http_value(HttpProvider(url=eng.url + "/nope"), {})
        with pytest.raises(ProviderError, match="is not a number"):
            http_value(HttpProvider(url=eng.url + "/v1/models", jsonPath="data.0.id"), {})


@pytest.mark.parametrize(("code", "want"), [
    ("print('x'); print(0.25)", 0.25),
    ("pass", None),
])
def test_command_value_reads_the_last_line(code: str, want: float | None) -> None:
    assert command_value(CommandProvider(argv=[sys.executable, "-c", code]), {}) == want


@pytest.mark.parametrize(("code", "msg"), [
    ("raise SystemExit(3)", "exit 3"),
    ("print('fast')", "is not a number"),
    ("import time; time.sleep(5)", "timed out"),
])
def test_command_failures_are_provider_errors(code: str, msg: str) -> None:
    with pytest.raises(ProviderError, match=msg):
        command_value(CommandProvider(argv=[sys.executable, "-c", code], timeout=1), {})


def test_unreachable_prometheus_is_a_provider_error() -> None:
    with start_engine(model="m") as eng:
        url = eng.url
    with pytest.raises(ProviderError, match="prometheus"):
        prometheus_value(url, "up", timeout=1)
