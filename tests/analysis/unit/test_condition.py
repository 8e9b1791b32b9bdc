"""Analysis conditions in CEL (issue 34): evaluated by cel-python over doubles, refused when the spec is
loaded with one line saying what is wrong (issue 17's language, moved to CEL), and bounded in cost."""

from __future__ import annotations

import math
import time

import pytest

from lwsflow.controller.analysis import condition


@pytest.mark.parametrize(("text", "values", "want"), [
    ("result < 0.5", {"result": 0.4}, True),
    ("result < 0.5", {"result": 0.5}, False),
    ("result <= baseline * 1.1", {"result": 1.1, "baseline": 1.0}, True),
    ("result <= baseline * 1.1", {"result": 1.4, "baseline": 1.0}, False),
    ("result - baseline <= 0.005", {"result": 0.01, "baseline": 0.0}, False),
    ("0 < result && result < 10", {"result": 5}, True),
    ("0 < result && result < 10", {"result": 10}, False),
    ("!(result > 3) && result >= 1", {"result": 2}, True),
    ("result > 3 || result == 0", {"result": 0}, True),
    ("abs(result - baseline) < 0.1", {"result": 1.05, "baseline": 1.0}, True),
    ("result <= max(baseline * 1.5, baseline + 4)", {"result": 4, "baseline": 0}, True),
    ("min(result, baseline, 3) == 2", {"result": 2, "baseline": 5}, True),
    ("-result < 0", {"result": 2}, True),
    ("result / 0 > 1", {"result": 2}, True),  # +inf, as IEEE division has it: no error
    ("0 / result != 0 / result", {"result": 0}, True),  # NaN equals nothing
    ("2 * result < 0x10", {"result": 7.5}, True),  # ints are doubles: CEL would not mix them
    ("result > 1 ? baseline < 1 : true", {"result": 2, "baseline": 0.5}, True),
    ("result-1 < 0 // a CEL comment", {"result": 0.5}, True),
    ("true", {}, True),
])
def test_evaluates(text: str, values: dict[str, float], want: bool) -> None:
    assert condition.evaluate(condition.parse(text), values) is want


@pytest.mark.parametrize(("text", "why"), [
    # what no condition may do: call, reach into a value, hold a string
    ("__import__('os').system('true')", "only abs(), min(), max() may be called, not .system()"),
    ("open('x')", "only abs(), min(), max() may be called, not open()"),
    ("[1, 2].all(x, x > 0)", "not .all()"),  # macros: a comprehension's cost grows with its list
    ("size(result) > 1", "not size()"),
    ("result.__class__", "fields ('result.__class__') are not allowed"),
    ("result[0] < 1", "indexes ('result[0]') are not allowed"),
    ("'a' < 'b'", "only numbers, true and false are allowed as constants, not 'a'"),
    ("result in [1]", "'in' is not allowed"),
    ("latency < 1", "unknown name 'latency' in 'latency < 1' (known: result, baseline)"),
    # not a condition: a number, or operands of the wrong type, said with the part that is wrong
    ("result + 1", "'result + 1' is a number, not a condition"),
    ("result && true", "&& joins conditions, and 'result' is a number"),
    ("!result", "! negates a condition, and 'result' is a number"),
    ("(result > 1) + 1 > 0", "+ works on numbers, and '(result > 1)' is true or false"),
    ("result == true", "== compares two numbers or two conditions, and 'result' is a number"),
    ("result > 1 ? 1 : true", "the branches of ?: ('1', 'true') must both be numbers or both conditions"),
    ("abs(result, 1) < 1", "abs() takes one number"),
    ("result % 2 < 1", "% is not allowed"),
    # syntax, at the column as written
    ("result >", "'result >': syntax error at the end: invalid syntax"),
    ("result > > 1", "syntax error at column 10: invalid syntax"),
    ("result <\n  > 1", "syntax error at line 2, column 3"),
    ("result ** 2 < 4", "syntax error at column 9"),
    ("max(result, key=abs) > 1", "syntax error at column 16"),
    ("lambda: 1", "syntax error"),
    # the old (Python) spelling: one line that says what to write instead
    ("result > 3 and result < 5",
     "conditions are CEL, and 'and' is not: write && for and, || for or, ! for not"),
    ("not result > 3", "'not' is not"),
    ("0 < result < 10", "comparisons do not chain in CEL: write 0 < result && result < 10"),
    ("True", "unknown name 'True' in 'True' (known: result, baseline; CEL writes true)"),
    # what the grammar lets by and the CRD's character rule does not: a comment's characters
    ("result < 1 // é", "may hold only numbers, result, baseline"),
    # the bounds on its cost
    ("result < " + "1" * 500, "longer than 500 characters"),
    ("(" * 30 + "result" + ")" * 30 + " < 1", "nests too deeply"),
])
def test_refuses(text: str, why: str) -> None:
    with pytest.raises(ValueError) as exc:
        condition.parse(text)
    assert why in str(exc.value), exc.value
    assert "\n" not in str(exc.value)  # one line, whatever the text holds


@pytest.mark.parametrize("values", [{}, {"result": float("nan")}, {"result": 1.0, "baseline": None}])
def test_missing_values_are_reported(values: dict[str, float | None]) -> None:
    with pytest.raises(condition.MissingValue):
        condition.evaluate(condition.parse("result <= baseline"), values)


def test_a_missing_value_the_answer_does_not_need_is_no_gap() -> None:
    """CEL's || and && are commutative over errors: a side that decides the answer suffices."""
    assert condition.evaluate(condition.parse("baseline > 1 || result > 0"), {"result": 1.0}) is True
    assert condition.evaluate(condition.parse("baseline > 1 && result > 2"), {"result": 1.0}) is False


def test_names_read() -> None:
    assert condition.parse("result < 1").names == {"result"}
    assert condition.parse("abs(result - baseline) < 0.1").names == {"result", "baseline"}


def test_both_joins_two_conditions() -> None:
    joined = condition.both(condition.parse("result < 3 // a comment ends with its line"),
                            condition.parse("result <= baseline * 1.1"))
    assert condition.evaluate(joined, {"result": 1.0, "baseline": 1.0}) is True
    assert condition.evaluate(joined, {"result": 1.2, "baseline": 1.0}) is False


def test_cost_is_bounded_by_the_length() -> None:
    """A condition as long as there can be, evaluated: no list, string or macro, so each node once."""
    text = " && ".join(["result < 1e9"] * 31)
    assert len(text) <= condition.MAX_LENGTH
    cond = condition.parse(text)
    start = time.perf_counter()
    assert condition.evaluate(cond, {"result": math.pi}) is True
    assert time.perf_counter() - start < 1.0


def test_the_deepest_condition_admitted_evaluates() -> None:
    """cel-python evaluates recursively: MAX_DEPTH keeps the deepest condition it admits within
    Python's recursion limit, with room to spare for the caller's frames."""
    deepest = ""
    for n in range(1, 60):
        text = "(" * n + "result" + ")" * n + " < 1"
        try:
            condition.parse(text)
        except ValueError as exc:
            assert "nests too deeply" in str(exc)
            break
        deepest = text
    else:
        pytest.fail("no depth was refused")

    def nested(frames: int) -> bool:  # called with 300 frames on the stack already
        if frames:
            return nested(frames - 1)
        return condition.evaluate(condition.parse(deepest), {"result": 0.5})
    assert nested(300) is True
