"""The one duration grammar (controller/api/duration.py): every form a user writes today still reads."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from lwsflow.controller.analysis.spec import validate_spec
from lwsflow.controller.api.duration import PATTERN, duration_seconds, parse_duration
from lwsflow.controller.errors import InvalidInput
from lwsflow.controller.policy.model import RolloutPolicySpec
from lwsflow.pipelines.cli.sim_token import token_seconds


@pytest.mark.parametrize(("text", "seconds"), [
    ("90s", 90), ("5m", 300), ("1h", 3600), ("1h30m", 5400), ("500ms", 0.5), ("250ms", 0.25),
    ("1.5m", 90), ("1.5h", 5400), ("2d", 172800), ("8760h", 8760 * 3600), ("0s", 0), ("1m30s500ms", 90.5),
    ("30m1h", 5400),  # Go sums terms in any order
])
def test_go_style_durations(text: str, seconds: float) -> None:
    assert duration_seconds(text) == seconds
    assert parse_duration(text, "bake") == seconds


@pytest.mark.parametrize(("value", "seconds"), [("12", 12), ("0.5", 0.5), (30, 30), (2.5, 2.5), (0, 0)])
def test_plain_seconds_only_where_a_field_takes_them(value: object, seconds: float) -> None:
    assert duration_seconds(value, bare_seconds=True) == seconds
    with pytest.raises(ValueError, match="not a duration"):
        duration_seconds(value)


@pytest.mark.parametrize("bad", ["", "5 minutes", "30 s", "m", "5", "-1s", "+1s", "1e3s", "1.s", ".5s",
                                 "5m\nx", "5m\n", " 5m ", "5m ", "5mx", "m5", "1w", "1us", "1H", "1h 30m",
                                 True, None, [],
                                 float("inf"), float("nan"), -1])
def test_everything_else_is_refused_naming_the_field(bad: object) -> None:
    with pytest.raises(InvalidInput, match="not a duration like 90s, 5m, 1h30m or 500ms") as exc:
        parse_duration(bad, "--bake", bare_seconds=not isinstance(bad, str))
    assert exc.value.field == "--bake"


def test_the_schema_pattern_is_the_same_grammar() -> None:
    """The RolloutPolicy CRD carries PATTERN; the API server must accept exactly what the parser reads."""
    import re

    pattern = re.compile(PATTERN.removesuffix("$") + r"\Z")
    for text in ("90s", "1h30m", "500ms", "1.5h", "2d", "30m1h"):
        assert pattern.match(text)
    for text in ("", "5", "5 m", "-1s", "1w"):
        assert not pattern.match(text)
        with pytest.raises(ValueError):
            duration_seconds(text)


def test_each_user_reads_it() -> None:
    """RolloutPolicy (Go-style strings), analysis specs (numbers too), sim token (whole seconds, >= 10m)."""
    stage = {"groups": "100%", "bake": "1h30m"}
    spec = RolloutPolicySpec.model_validate({"targetRef": {"kind": "LeaderWorkerSet", "name": "a"},
                                             "stages": [stage], "progressDeadline": "1.5h"})
    assert spec.stages[0].bake == "1h30m"
    with pytest.raises(ValidationError, match=r"stages\.0\.bake"):
        RolloutPolicySpec.model_validate({"targetRef": {"kind": "LeaderWorkerSet", "name": "a"},
                                          "stages": [{**stage, "bake": "90"}]})
    metric = {"name": "m", "provider": {"prometheus": {"query": "up"}}, "successCondition": "result > 0"}
    analysis = validate_spec({"metrics": [{**metric, "interval": "1m30s", "initialDelay": 5}],
                              "window": "2m"})
    assert (analysis.metrics[0].interval, analysis.metrics[0].initial_delay, analysis.window) == (90, 5, 120)
    assert token_seconds("2d") == 172800 and token_seconds("90m") == 5400
    for bad, message in (("5m", "at least 10m"), ("600.5s", "whole seconds"), ("10 m", "not a duration")):
        with pytest.raises(InvalidInput, match=message):
            token_seconds(bad)
