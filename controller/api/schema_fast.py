"""A compiled yes/no check of a CRD schema: True only where ``jsonschema`` would find nothing.

``jsonschema`` walks a schema generically (an evolved validator per node, its errors as generators)
and costs a few milliseconds per LeaderWorkerSet; almost every object it sees is valid. ``compile_check``
turns the subset of Draft 4 the packaged CRDs use (type, properties, required, additionalProperties,
items, enum, pattern, lengths, bounds, counts, anyOf, the int32/int64 formats) into nested closures
that answer "certainly valid?" about ten times faster. Anything it is unsure of - a keyword outside that
subset, another format, a float where an integer is due, a subclass of dict or list - answers False, and
the caller asks ``jsonschema`` for the errors, so messages and paths never depend on this module.
tests/api/unit/test_schema_fast.py checks it never says True where ``jsonschema`` reports an error.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

Check = Callable[[Any], bool]

# keywords jsonschema ignores (annotations, Kubernetes extensions) or that this module implements
_IGNORED = frozenset({"description", "default", "title", "example", "nullable", "$schema"})
_HANDLED = frozenset({
    "type", "properties", "required", "additionalProperties", "items", "enum", "pattern", "format",
    "maxLength", "minLength", "maxItems", "minItems", "maxProperties", "minProperties", "minimum",
    "maximum", "anyOf",
})
_RANGES = {"int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1)}


def _never(_value: Any) -> bool:
    return False


def _always(_value: Any) -> bool:
    return True


def _is_int(v: Any) -> bool:
    return type(v) is int  # bool is a subclass, so not an int here; a float goes to jsonschema


_TYPES: dict[str, Check] = {
    "string": lambda v: type(v) is str,
    "integer": _is_int,
    "number": lambda v: type(v) is int or type(v) is float,
    "boolean": lambda v: type(v) is bool,
    "object": lambda v: type(v) is dict,
    "array": lambda v: type(v) is list,
    "null": lambda v: v is None,
}


def compile_check(schema: Any, pattern: Callable[[str], re.Pattern[str]]) -> Check:
    """The check of ``schema``; ``pattern`` compiles a schema pattern as the validator does."""
    return _Compiler(pattern).node(schema)


class _Compiler:
    def __init__(self, pattern: Callable[[str], re.Pattern[str]]) -> None:
        self._pattern = pattern
        self._done: dict[int, Check] = {}

    def node(self, schema: Any) -> Check:
        if schema is True or schema == {}:
            return _always
        if not isinstance(schema, dict):
            return _never
        key = id(schema)
        if key not in self._done:
            self._done[key] = self._compile(schema)
        return self._done[key]

    def _compile(self, s: dict[str, Any]) -> Check:
        if any(k not in _HANDLED and k not in _IGNORED and not k.startswith("x-") for k in s):
            return _never
        kind = s.get("type")
        if kind is not None and not (isinstance(kind, str) and kind in _TYPES):
            return _never
        type_ok = _TYPES[kind] if kind is not None else None
        props = {k: self.node(v) for k, v in (s.get("properties") or {}).items()}
        extra_schema = s.get("additionalProperties", True)
        extra: Check | None = None if extra_schema is True else self.node(extra_schema)
        required = tuple(s.get("required") or ())
        items_schema = s.get("items")
        if items_schema is not None and not isinstance(items_schema, dict):
            return _never  # tuple validation
        items = self.node(items_schema) if items_schema is not None else None
        enum = s.get("enum")
        enum_strs = frozenset(e for e in enum if type(e) is str) if enum is not None else None
        regex = self._pattern(s["pattern"]) if "pattern" in s else None
        fmt = s.get("format")
        bounds = _RANGES.get(fmt) if fmt is not None else None
        other_format = fmt is not None and bounds is None
        min_len, max_len = s.get("minLength"), s.get("maxLength")
        min_items, max_items = s.get("minItems"), s.get("maxItems")
        min_props, max_props = s.get("minProperties"), s.get("maxProperties")
        minimum, maximum = s.get("minimum"), s.get("maximum")
        any_of = [self.node(x) for x in s.get("anyOf") or ()]
        if "anyOf" in s and not any_of:
            return _never
        check_dict = bool(props) or extra is not None or bool(required) or min_props is not None \
            or max_props is not None

        def check(v: Any) -> bool:
            if type_ok is not None and not type_ok(v):
                return False
            t = type(v)
            if t is dict:
                if enum is not None:
                    return False
                if check_dict:
                    for r in required:
                        if r not in v:
                            return False
                    for k, x in v.items():
                        c = props.get(k)
                        if c is None:
                            if extra is None:
                                continue
                            c = extra
                        if not c(x):
                            return False
                    if min_props is not None and len(v) < min_props:
                        return False
                    if max_props is not None and len(v) > max_props:
                        return False
            elif t is list:
                if enum is not None:
                    return False
                if items is not None:
                    for x in v:
                        if not items(x):
                            return False
                if min_items is not None and len(v) < min_items:
                    return False
                if max_items is not None and len(v) > max_items:
                    return False
            elif t is str:
                if enum_strs is not None and v not in enum_strs:
                    return False
                if regex is not None and not regex.search(v):
                    return False
                if min_len is not None and len(v) < min_len:
                    return False
                if max_len is not None and len(v) > max_len:
                    return False
                if other_format:
                    return False  # e.g. date-time: left to jsonschema's format checker
            elif t is int:
                if enum is not None and not any(type(e) is int and e == v for e in enum):
                    return False
                if bounds is not None and not bounds[0] <= v <= bounds[1]:
                    return False
                if minimum is not None and v < minimum:
                    return False
                if maximum is not None and v > maximum:
                    return False
            elif t is bool or v is None:
                if enum is not None and not any(type(e) is t and e == v for e in enum):
                    return False
            else:
                return False  # floats, subclasses, anything else: jsonschema decides
            if any_of:
                for c in any_of:
                    if c(v):
                        break
                else:
                    return False
            return True

        return check
