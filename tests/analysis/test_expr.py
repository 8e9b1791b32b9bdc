"""The condition language: a whitelist walked over ``ast``, never ``eval`` (issue 17)."""

from __future__ import annotations

import pytest

from lwsflow.controller.analysis import expr


@pytest.mark.parametrize(("text", "values", "want"), [
    ("result < 0.5", {"result": 0.4}, True),
    ("result < 0.5", {"result": 0.5}, False),
    ("result <= baseline * 1.1", {"result": 1.1, "baseline": 1.0}, True),
    ("result <= baseline * 1.1", {"result": 1.4, "baseline": 1.0}, False),
    ("result - baseline <= 0.005", {"result": 0.01, "baseline": 0.0}, False),
    ("0 < result < 10", {"result": 5}, True),
    ("0 < result < 10", {"result": 10}, False),
    ("not result > 3 and result >= 1", {"result": 2}, True),
    ("result > 3 or result == 0", {"result": 0}, True),
    ("abs(result - baseline) < 0.1", {"result": 1.05, "baseline": 1.0}, True),
    ("result <= max(baseline * 1.5, baseline + 4)", {"result": 4, "baseline": 0}, True),
    ("-result < 0", {"result": 2}, True),
    ("result / 0 > 1", {"result": 2}, True),  # +inf, not a ZeroDivisionError
    ("true", {}, True),
])
def test_evaluates(text: str, values: dict[str, float], want: bool) -> None:
    assert expr.evaluate(expr.parse(text), values) is want


@pytest.mark.parametrize(("text", "why"), [
    ("__import__('os').system('true')", "only abs"),
    ("result.__class__", "Attribute"),
    ("result[0]", "Subscript"),
    ("open('x')", "only abs"),
    ("lambda: 1", "Lambda"),
    ("'a' < 'b'", "only numbers"),
    ("latency < 1", "unknown name 'latency'"),
    ("result ** 2 < 4", "Pow"),
    ("[x for x in result]", "not allowed"),
    ("result <", "syntax error at the end"),
    ("result < 1 # a comment", "may hold only"),
    ("max(result, key=abs)", "only abs"),
])
def test_refuses(text: str, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        expr.parse(text)


@pytest.mark.parametrize("values", [{}, {"result": float("nan")}, {"result": 1.0, "baseline": None}])
def test_missing_values_are_reported(values: dict[str, float | None]) -> None:
    with pytest.raises(expr.MissingValue):
        expr.evaluate(expr.parse("result <= baseline"), values)
