"""``x-kubernetes-validations`` (CEL) rules evaluated the way kube-apiserver does, with cel-python.

The API server compiles each rule of a CRD's structural schema and evaluates it with ``self`` bound to
the value at the rule's schema node, for every such node the object has (every list item, every map
value). Property names that are CEL keywords or hold characters CEL identifiers cannot are escaped as
Kubernetes documents ("Escaping" under CRD validation rules): ``namespace`` is ``__namespace__``,
``__`` is ``__underscores__``, ``.`` ``__dot__``, ``-`` ``__dash__``, ``/`` ``__slash__``. A false
rule is reported as the API server reports it: ``<path>: Invalid value: "<type>": <message>`` (or
``failed rule: <rule>`` when the rule has no message), at ``fieldPath`` when the rule names one.
Regular expressions are RE2 (``google-re2``), as in Go. A rule that cannot be evaluated (a field it
reads is missing or of the wrong type) is not reported: the OpenAPI schema check names that field.
Not modelled: transition rules (``oldSelf``) and ``messageExpression``; no packaged CRD uses them.
"""

from __future__ import annotations

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


@dataclass(frozen=True)
class Violation:
    path: str
    message: str


def _type_word(schema: Obj, value: Any) -> str:
    kind = schema.get("type")
    if isinstance(kind, str):
        return kind
    return "array" if isinstance(value, list) else "object" if isinstance(value, dict) else "string"


def _at_field_path(parts: list[str | int], field: str) -> list[str | int]:
    out = list(parts)
    for m in _FIELD_PATH_PART.finditer(field):
        name, key, index = m.groups()
        out.append(int(index) if index is not None else (name if name is not None else key))
    return out


def violations(value: Any, schema: Obj, parts: list[str | int] | None = None,
               skip: tuple[str, ...] = ()) -> Iterator[Violation]:
    """Every rule of ``schema`` (and the schemas below it) that ``value`` breaks, in document order;
    ``skip``: property names not descended into (embedded core types: no rules, a large schema)."""
    here: list[str | int] = parts or []
    for rule in schema.get("x-kubernetes-validations") or []:
        text = str(rule.get("rule", ""))
        if holds(text, value) is not False:
            continue  # holds, or cannot be evaluated: malformed data the schema check reports itself
        message = rule.get("message") or f"failed rule: {text}"
        where = _at_field_path(here, str(rule["fieldPath"])) if rule.get("fieldPath") else here
        yield Violation(field_path(where), f'Invalid value: "{_type_word(schema, value)}": {message}')
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        for key, child in value.items():
            if key in skip:
                continue
            sub = props.get(key) if key in props else (extra if isinstance(extra, dict) else None)
            if isinstance(sub, dict):
                yield from violations(child, sub, [*here, key], skip)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, child in enumerate(value):
            yield from violations(child, schema["items"], [*here, i], skip)


def has_rules(schema: Obj, skip: tuple[str, ...] = ()) -> bool:
    """Whether any rule sits in ``schema`` (outside ``skip``): most objects need no CEL at all."""
    if schema.get("x-kubernetes-validations"):
        return True
    subs = [s for k, s in (schema.get("properties") or {}).items() if k not in skip]
    subs += [s for s in (schema.get("items"), schema.get("additionalProperties")) if isinstance(s, dict)]
    return any(has_rules(s, skip) for s in subs if isinstance(s, dict))
