"""A small, safe condition language for analysis: ``result < 0.5``, ``result <= baseline * 1.1``.

Conditions are parsed with ``ast`` and evaluated by walking a whitelist of node types: numbers,
``true``/``false``, the names ``result`` and ``baseline``, arithmetic (+ - * / and unary -), comparisons
(chained too), ``and``/``or``/``not``, and ``abs``/``min``/``max`` calls. Anything else (attributes,
subscripts, other names or calls, lambdas, strings) is refused when the spec is loaded. Nothing is ever
passed to ``eval``.
"""

from __future__ import annotations

import ast
import math
import operator
import re
from collections.abc import Callable, Mapping

from lwsflow.controller.errors import InvalidInput

NAMES = ("result", "baseline")
_FUNCS: dict[str, Callable[..., float]] = {"abs": abs, "min": min, "max": max}
_BIN: dict[type[ast.operator], Callable[[float, float], float]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}
_CMP: dict[type[ast.cmpop], Callable[[float, float], bool]] = {
    ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge,
    ast.Eq: operator.eq, ast.NotEq: operator.ne}
_CONSTS = {"true": True, "false": False, "True": True, "False": False}
MAX_LENGTH = 500
# every character a condition may hold: the RolloutPolicy CRD's CEL rule checks the same (RE2 and Python
# read it alike), so a policy the API server admits fails here only on grammar
CONDITION_CHARS = r"^[-+*/<>=!(),._0-9A-Za-z \t\n\r]*$"
_CHARS = re.compile(CONDITION_CHARS.removesuffix("$") + r"\Z")


class MissingValue(Exception):
    """A name the condition uses has no value (NaN, or no baseline): the measurement is inconclusive."""


def _check(node: ast.AST, text: str) -> None:
    """Refuse every node outside the whitelist (called once, when a spec is loaded)."""
    ok = (ast.Expression, ast.BoolOp, ast.And, ast.Or, ast.UnaryOp, ast.Not, ast.USub, ast.UAdd,
          ast.BinOp, ast.Compare, ast.Load, *_BIN, *_CMP)
    for sub in ast.walk(node):
        if isinstance(sub, ast.Constant):
            if isinstance(sub.value, bool) or not isinstance(sub.value, (int, float)):
                raise ValueError(f"only numbers are allowed as constants in {text!r}")
        elif isinstance(sub, ast.Name):
            if sub.id not in NAMES and sub.id not in _FUNCS and sub.id not in _CONSTS:
                raise ValueError(f"unknown name {sub.id!r} in {text!r} (known: {', '.join(NAMES)})")
        elif isinstance(sub, ast.Call):
            if not isinstance(sub.func, ast.Name) or sub.func.id not in _FUNCS or sub.keywords:
                raise ValueError(f"only abs(), min(), max() may be called in {text!r}")
        elif not isinstance(sub, ok):
            raise ValueError(f"{type(sub).__name__} is not allowed in {text!r}")


def parse(text: str) -> ast.Expression:
    """Parse and validate a condition; ValueError with the reason when it is not in the language."""
    if len(text) > MAX_LENGTH:
        raise ValueError(f"condition is longer than {MAX_LENGTH} characters")
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as exc:
        # the column in the text as written (ast counts from 1 in the stripped text; 0: it ended early)
        where = f"column {exc.offset + len(text) - len(text.lstrip())}" if exc.offset else "the end"
        raise ValueError(f"{text!r}: syntax error at {where}: {exc.msg}") from None
    _check(tree, text)
    if not _CHARS.match(text):  # what the grammar lets by: a comment, a line continuation
        raise ValueError(f"{text!r} may hold only numbers, result, baseline, + - * /, comparisons, and, or, "
                         "not, abs(), min(), max() and parentheses")
    return tree


def evaluate(tree: ast.Expression, values: Mapping[str, float | None]) -> bool:
    """Evaluate a parsed condition; MissingValue when it reads a name without a (finite) value."""
    return bool(_eval(tree.body, values))


def _eval(node: ast.AST, values: Mapping[str, float | None]) -> float | bool:
    if isinstance(node, ast.Constant):
        assert isinstance(node.value, (int, float))  # _check admits numbers only
        return float(node.value)
    if isinstance(node, ast.Name):
        if node.id in _CONSTS:
            return _CONSTS[node.id]
        v = values.get(node.id)
        if v is None or math.isnan(v):
            raise MissingValue(node.id)
        return v
    if isinstance(node, ast.BoolOp):
        if isinstance(node.op, ast.And):
            return all(_eval(v, values) for v in node.values)
        return any(_eval(v, values) for v in node.values)
    if isinstance(node, ast.UnaryOp):
        x = _eval(node.operand, values)
        if isinstance(node.op, ast.Not):
            return not x
        return -x if isinstance(node.op, ast.USub) else +x
    if isinstance(node, ast.BinOp):
        a, b = _eval(node.left, values), _eval(node.right, values)
        if isinstance(node.op, ast.Div) and b == 0:
            return math.inf if a > 0 else (-math.inf if a < 0 else math.nan)
        return _BIN[type(node.op)](a, b)
    if isinstance(node, ast.Compare):
        left = _eval(node.left, values)
        for op, comp in zip(node.ops, node.comparators, strict=True):
            right = _eval(comp, values)
            if not _CMP[type(op)](left, right):
                return False
            left = right
        return True
    if isinstance(node, ast.Call):
        assert isinstance(node.func, ast.Name)  # _check allows only named whitelist calls
        return _FUNCS[node.func.id](*(_eval(a, values) for a in node.args))
    raise InvalidInput(f"{type(node).__name__} is not allowed")  # unreachable after _check
