"""Analysis conditions in CEL: ``result < 0.5``, ``result <= baseline * 1.1 && result < 2``.

A condition is a CEL expression, compiled and evaluated by cel-python as the CRD's rules are
(``controller/api/cel.py``), in CEL's numeric and boolean part: numbers, ``true``/``false``, the
doubles ``result`` and ``baseline``, ``+ - * /`` and unary ``-``, comparisons, ``&& || !``, ``?:``, and
the functions ``abs``, ``min``, ``max``. Every number is a double (``1`` reads as ``1.0``, and ``x / 0``
is infinite, as in IEEE arithmetic). ``parse`` checks each operand's type when a spec is loaded, so a
condition that is not CEL, reads another name, calls anything else or is not true/false is refused
then, in one line. With no lists, strings or macros, evaluation visits each node once: ``MAX_LENGTH``
and ``MAX_DEPTH`` bound its cost (cel-python has no cost limit of its own).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import celpy
from celpy.celtypes import DoubleType
from celpy.evaluation import CELFunction

NAMES = ("result", "baseline")
MAX_LENGTH = 500
# syntax-tree levels (about 18 nested parentheses, or 90 terms in a row): cel-python evaluates
# recursively, and this keeps it far from Python's recursion limit
MAX_DEPTH = 200
# every character a condition may hold: the RolloutPolicy CRD's CEL rule checks the same (RE2 and Python
# read it alike), so a policy the API server admits fails here only on grammar or types
CONDITION_CHARS = r"^[-+*/<>=!&|?:(),._0-9A-Za-z \t\n\r]*$"
CHARS_SAYS = ("may hold only numbers, result, baseline, true, false, + - * /, comparisons, && || !, ?:, "
              "abs(), min(), max() and parentheses")
# the old (Python) spelling: no name or string of a condition holds these words, so the CRD refuses them too
PYTHON_WORDS = r"\b(and|or|not)\b"
MIGRATE_SAYS = "write && for and, || for or, ! for not"
_CHARS = re.compile(CONDITION_CHARS.removesuffix("$") + r"\Z")
_PYTHON = re.compile(PYTHON_WORDS)

_NUMBER, _BOOL = "a number", "true or false"
_OPS = {"relation_lt": "<", "relation_le": "<=", "relation_gt": ">", "relation_ge": ">=",
        "relation_eq": "==", "relation_ne": "!=", "relation_in": "in", "addition_add": "+",
        "addition_sub": "-", "multiplication_mul": "*", "multiplication_div": "/",
        "multiplication_mod": "%"}
_ARITY = {"abs": (1, 1), "min": (2, None), "max": (2, None)}
_REFUSED = {"member_dot": "fields", "member_index": "indexes", "member_object": "messages",
            "list_lit": "lists", "map_lit": "maps", "dot_ident": "qualified names"}
_ONE_CHILD = ("expr", "conditionalor", "conditionaland", "relation", "addition", "multiplication", "unary",
              "member", "primary", "paren_expr")


class MissingValue(Exception):
    """A name the condition uses has no value (NaN, or no baseline): the measurement is inconclusive."""


def _divide(a: DoubleType, b: DoubleType) -> DoubleType:
    """IEEE division: ``x / 0`` is infinite (NaN for ``0 / 0``), not an error (cel-python's)."""
    x, y = float(a), float(b)  # a DoubleType compares with doubles only
    if y == 0:
        return DoubleType(math.inf if x > 0 else (-math.inf if x < 0 else math.nan))
    return DoubleType(x / y)


_FUNCTIONS: dict[str, CELFunction] = {
    "abs": lambda x: DoubleType(abs(x)), "min": lambda *xs: DoubleType(min(xs)),
    "max": lambda *xs: DoubleType(max(xs)), "_/_": _divide}


@dataclass(frozen=True, eq=False)
class Condition:
    """A checked condition: its text, the names it reads, and its cel-python program."""

    text: str
    names: frozenset[str]
    program: Any


def _double(literal: str) -> str:
    """A CEL int literal (``-12``, ``0x1F``) as a double literal."""
    digits = literal.removeprefix("-")
    try:
        value = float(int(digits, 16)) if digits[:2].lower() == "0x" else float(digits)
    except OverflowError:
        value = math.inf
    return repr(-value if literal.startswith("-") else value)


class _Check:
    """The type of each node of a compiled condition (``_NUMBER`` or ``_BOOL``), refusing what lies
    outside the numeric and boolean part; int literals are rewritten as doubles on the way."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.names: set[str] = set()

    def fail(self, why: str) -> ValueError:
        return ValueError(f"{self.text!r}: {why}")

    def src(self, node: Any) -> str:
        """The text of ``node``, quoted. cel-python makes ``true``/``false`` tokens anew, without a
        position, and a node of those alone gets a wrong one: its tokens' text then."""
        tokens, stack = [], [node]
        while stack:
            item = stack.pop()
            if hasattr(item, "children"):
                stack.extend(reversed(item.children))
            else:
                tokens.append(item)
        meta = node.meta
        if getattr(meta, "empty", True) or all(getattr(t, "start_pos", None) is None for t in tokens):
            return repr(" ".join(str(t) for t in tokens))
        return repr(self.text[meta.start_pos:meta.end_pos])

    def need(self, node: Any, want: str, says: str) -> None:
        got = self.of(node)
        if got != want:
            raise self.fail(f"{says}, and {self.src(node)} is {got}")

    def of(self, node: Any) -> str:
        kind, kids = node.data, node.children
        if kind in _REFUSED:
            raise self.fail(f"{_REFUSED[kind]} ({self.src(node)}) are not allowed: result and baseline "
                            "are numbers")
        if kind in ("member_dot_arg", "dot_ident_arg"):
            name = kids[1] if kind == "member_dot_arg" else kids[0]
            raise self.fail(f"only abs(), min(), max() may be called, not .{name}()")
        if kind in _ONE_CHILD and len(kids) == 1:
            return self.of(kids[0])
        handler: Callable[[Any, list[Any]], str] | None = getattr(self, f"_{kind}", None)
        if handler is None:
            raise self.fail(f"{kind} is not allowed")
        return handler(node, kids)

    def _literal(self, node: Any, kids: list[Any]) -> str:
        token = kids[0]
        if token.type == "BOOL_LIT":
            return _BOOL
        if token.type not in ("INT_LIT", "FLOAT_LIT"):
            raise self.fail(f"only numbers, true and false are allowed as constants, not {token}")
        if token.type == "INT_LIT":  # CEL does not mix ints and doubles: 2 * result must work
            node.children[0] = type(token).new_borrow_pos("FLOAT_LIT", _double(str(token)), token)
        return _NUMBER

    def _ident(self, node: Any, kids: list[Any]) -> str:
        name = str(kids[0])
        if name not in NAMES:
            hint = f"; CEL writes {name.lower()}" if name in ("True", "False") else ""
            raise ValueError(f"unknown name {name!r} in {self.text!r} (known: {', '.join(NAMES)}{hint})")
        self.names.add(name)
        return _NUMBER

    def _ident_arg(self, node: Any, kids: list[Any]) -> str:
        name = str(kids[0])
        if name not in _ARITY:
            raise self.fail(f"only abs(), min(), max() may be called, not {name}()")
        args = kids[1].children if len(kids) > 1 else []
        least, most = _ARITY[name]
        if len(args) < least or (most is not None and len(args) > most):
            raise self.fail(f"{name}() takes {'one number' if most == 1 else 'two or more numbers'}")
        for arg in args:
            self.need(arg, _NUMBER, f"{name}() takes numbers")
        return _NUMBER

    def _expr(self, node: Any, kids: list[Any]) -> str:
        cond, yes, no = kids
        self.need(cond, _BOOL, "?: needs a condition before ?")
        kind = self.of(yes)
        if self.of(no) != kind:
            raise self.fail(f"the branches of ?: ({self.src(yes)}, {self.src(no)}) must both be numbers "
                            "or both conditions")
        return kind

    def _conditionalor(self, node: Any, kids: list[Any]) -> str:
        for side in kids:
            self.need(side, _BOOL, f"{'||' if node.data == 'conditionalor' else '&&'} joins conditions")
        return _BOOL

    _conditionaland = _conditionalor

    def _unary(self, node: Any, kids: list[Any]) -> str:
        negate = kids[0].data == "unary_not"
        want = _BOOL if negate else _NUMBER
        self.need(kids[1], want, "! negates a condition" if negate else "- negates a number")
        return want

    def _addition(self, node: Any, kids: list[Any]) -> str:
        op_node, right = kids
        op = _OPS[op_node.data]
        if op == "%":
            raise self.fail("% is not allowed: conditions compute with doubles")
        for side in (op_node.children[0], right):
            self.need(side, _NUMBER, f"{op} works on numbers")
        return _NUMBER

    _multiplication = _addition

    def _relation(self, node: Any, kids: list[Any]) -> str:
        op_node, right = kids
        op, left = _OPS[op_node.data], op_node.children[0]
        if op == "in":
            raise self.fail("'in' is not allowed: result and baseline are numbers")
        if left.data == "relation" and len(left.children) == 2:  # 0 < result < 10, unparenthesized
            inner, middle = left.children
            lo, mid, hi = (self.src(n)[1:-1] for n in (inner.children[0], middle, right))
            raise self.fail(f"comparisons do not chain in CEL: write {lo} {_OPS[inner.data]} {mid} && "
                            f"{mid} {op} {hi}")
        if op in ("==", "!="):
            types = self.of(left), self.of(right)
            if types[0] != types[1]:
                raise self.fail(f"{op} compares two numbers or two conditions, and {self.src(left)} is "
                                f"{types[0]}, {self.src(right)} is {types[1]}")
            return _BOOL
        for side in (left, right):
            self.need(side, _NUMBER, f"{op} compares numbers")
        return _BOOL


def _depth(tree: Any) -> int:
    deepest, stack = 0, [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in getattr(node, "children", ()))
    return deepest


def _where(exc: Any) -> str:
    """Where a syntax error is, as the text is written: ``column 9``, ``line 2, column 3``, ``the end``."""
    token = getattr(exc.__context__, "token", None)  # lark's UnexpectedToken, which celpy re-raises
    if getattr(token, "type", None) == "$END" or exc.column is None:
        return "the end"
    return f"line {exc.line}, column {exc.column}" if exc.line and exc.line > 1 else f"column {exc.column}"


@lru_cache(maxsize=1024)
def _compile(text: str) -> Condition:
    """Compile and check ``text`` (no bound on its size: ``parse`` has those)."""
    env = celpy.Environment()
    try:
        tree = env.compile(text)
    except celpy.CELParseError as exc:
        raise ValueError(f"{text!r}: syntax error at {_where(exc)}: invalid syntax") from None
    if _depth(tree) > MAX_DEPTH:
        raise ValueError(f"{text!r} nests too deeply (more than {MAX_DEPTH} levels of its syntax tree): "
                         "use fewer parentheses or terms")
    check = _Check(text)
    if check.of(tree) != _BOOL:
        raise ValueError(f"{text!r} is a number, not a condition: compare it, e.g. result < 0.5")
    if not _CHARS.match(text):  # what the grammar lets by: a comment
        raise ValueError(f"{text!r} {CHARS_SAYS}")
    return Condition(text, frozenset(check.names), env.program(tree, functions=_FUNCTIONS))


def parse(text: str) -> Condition:
    """Check a condition a user wrote; ValueError with the reason, in one line, when it is not one."""
    if len(text) > MAX_LENGTH:
        raise ValueError(f"condition is longer than {MAX_LENGTH} characters")
    if word := _PYTHON.search(text):
        raise ValueError(f"{text!r}: conditions are CEL, and {word.group(1)!r} is not: {MIGRATE_SAYS}")
    return _compile(text)


def both(first: Condition, second: Condition) -> Condition:
    """``first && second``: each already within ``parse``'s bounds, so the two together are too (a
    newline ends a ``//`` comment of the first)."""
    return _compile(f"({first.text}\n) && ({second.text}\n)")


def evaluate(condition: Condition, values: Mapping[str, float | None]) -> bool:
    """Evaluate a checked condition; MissingValue when it needs a name without a value (None, NaN)."""
    bound = {name: DoubleType(v) for name, v in values.items()
             if name in condition.names and v is not None and not math.isnan(v)}
    try:
        return bool(condition.program.evaluate(bound))
    except celpy.CELEvalError:
        missing = [name for name in NAMES if name in condition.names and name not in bound]
        if missing:
            raise MissingValue(missing[0]) from None
        raise
