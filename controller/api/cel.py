"""``x-kubernetes-validations`` (CEL) rules evaluated the way kube-apiserver does, with cel-python.

The API server compiles each rule of a CRD's structural schema and evaluates it with ``self`` bound to
the value at the rule's schema node, for every such node the object has (every list item, every map
value). Property names that are CEL keywords or hold characters CEL identifiers cannot are escaped as
Kubernetes documents ("Escaping" under CRD validation rules): ``namespace`` is ``__namespace__``,
``__`` is ``__underscores__``, ``.`` ``__dot__``, ``-`` ``__dash__``, ``/`` ``__slash__``. A false
rule is reported as the API server (v1.3x) reports it: ``<path>: Invalid value: <message>`` for an object
or a list, ``<path>: Invalid value: "<the string>": <message>`` for a scalar (or ``failed rule: <rule>``
when the rule has no message), at ``fieldPath`` when the rule names one.
Regular expressions are RE2 (``google-re2``), as in Go. A rule that cannot be evaluated (a field it
reads is missing or of the wrong type) is not reported: the OpenAPI schema check names that field.
A ``messageExpression`` is evaluated the same way when its rule fails; as in kube-apiserver, a result
that is not a non-empty single-line string, or an error, falls back to ``message``.
Not modelled: transition rules (``oldSelf``); no packaged CRD uses them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from typing import Any

import celpy

from lwsflow.controller.api.common import field_path
from lwsflow.controller.api.wire import Obj

# CEL's reserved words: a property of that name is reached as __<word>__
_KEYWORDS = frozenset({"true", "false", "null", "in", "as", "break", "const", "continue", "else", "for",
                       "function", "if", "import", "let", "loop", "package", "namespace", "return",
                       "var", "void", "while"})
_ESCAPES = (("__", "__underscores__"), (".", "__dot__"), ("-", "__dash__"), ("/", "__slash__"))
_FIELD_PATH_PART = re.compile(r"\.([A-Za-z_][A-Za-z0-9_]*)|\['([^']*)'\]|\[(\d+)\]")


def escape(name: str) -> str:
    """A property name as a CEL rule spells it."""
    if name in _KEYWORDS:
        return f"__{name}__"
    for plain, escaped in _ESCAPES:
        name = name.replace(plain, escaped)
    return name


def _escaped(value: Any) -> Any:
    if isinstance(value, dict):
        return {escape(str(k)): _escaped(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_escaped(v) for v in value]
    return value


@cache
def _program(rule: str) -> Any:
    env = celpy.Environment()
    return env.program(env.compile(rule))


def holds(rule: str, value: Any) -> bool | str:
    """True when ``rule`` holds for ``self = value``; False when it does not; the error's text when it
    cannot be evaluated (the API server refuses the object then too)."""
    try:
        result = _program(rule).evaluate({"self": celpy.json_to_cel(_escaped(value))})
    except Exception as exc:  # compile or evaluation error (celpy raises several kinds)
        return f"{type(exc).__name__}: {exc}"
    if isinstance(result, celpy.celtypes.BoolType):
        return bool(result)
    return f"rule did not evaluate to a bool: {result!r}"


def message_of(expression: str, value: Any) -> str | None:
    """A ``messageExpression``'s text for ``self = value``; None where kube-apiserver would fall back to
    ``message`` (an error, not a string, empty, or more than one line)."""
    try:
        result = _program(expression).evaluate({"self": celpy.json_to_cel(_escaped(value))})
    except Exception:  # compile or evaluation error (celpy raises several kinds)
        return None
    if not isinstance(result, str) or not result.strip() or "\n" in result:
        return None
    return str(result)


@dataclass(frozen=True)
class Violation:
    path: str
    message: str


def _invalid_value(value: Any) -> str:
    """``Invalid value`` as kube-apiserver v1.3x words a failed rule: an object's or a list's value is
    left out, a scalar's shown as Go's ``%q`` / ``%v`` prints it (apimachinery's ``ErrorBody``)."""
    if isinstance(value, dict | list):
        return "Invalid value"
    if isinstance(value, bool):
        return f"Invalid value: {'true' if value else 'false'}"
    if isinstance(value, str):
        return f"Invalid value: {json.dumps(value, ensure_ascii=False)}"
    return f"Invalid value: {value}"


def _at_field_path(parts: list[str | int], field: str) -> list[str | int]:
    out = list(parts)
    for m in _FIELD_PATH_PART.finditer(field):
        name, key, index = m.groups()
        out.append(int(index) if index is not None else (name if name is not None else key))
    return out


NO_OLD = object()


def violations(value: Any, schema: Obj, parts: list[str | int] | None = None,
               skip: tuple[str, ...] = (), old: Any = NO_OLD) -> Iterator[Violation]:
    """Every rule of ``schema`` (and the schemas below it) that ``value`` breaks, in document order;
    ``skip``: property names not descended into (embedded core types: no rules, a large schema).
    ``old``: the stored object of an update. A value equal to its old one is not checked again, as
    kube-apiserver's validation ratcheting (on by default since v1.30) lets an unchanged value pass:
    a status write does not re-run the spec's rules."""
    if old is not NO_OLD and value == old:
        return
    here: list[str | int] = parts or []
    for rule in schema.get("x-kubernetes-validations") or []:
        text = str(rule.get("rule", ""))
        if holds(text, value) is not False:
            continue  # holds, or cannot be evaluated: malformed data the schema check reports itself
        message = (rule.get("messageExpression") and message_of(str(rule["messageExpression"]), value)) \
            or rule.get("message") or f"failed rule: {text}"
        where = _at_field_path(here, str(rule["fieldPath"])) if rule.get("fieldPath") else here
        yield Violation(field_path(where), f"{_invalid_value(value)}: {message}")
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        for key, child in value.items():
            if key in skip:
                continue
            sub = props.get(key) if key in props else (extra if isinstance(extra, dict) else None)
            if isinstance(sub, dict):
                before = old.get(key, NO_OLD) if isinstance(old, dict) else NO_OLD
                yield from violations(child, sub, [*here, key], skip, before)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, child in enumerate(value):  # items of a changed list are checked afresh (not correlated)
            yield from violations(child, schema["items"], [*here, i], skip)


def has_rules(schema: Obj, skip: tuple[str, ...] = ()) -> bool:
    """Whether any rule sits in ``schema`` (outside ``skip``): most objects need no CEL at all."""
    if schema.get("x-kubernetes-validations"):
        return True
    subs = [s for k, s in (schema.get("properties") or {}).items() if k not in skip]
    subs += [s for s in (schema.get("items"), schema.get("additionalProperties")) if isinstance(s, dict)]
    return any(has_rules(s, skip) for s in subs if isinstance(s, dict))
