"""Safe YAML in and deterministic YAML out, for everything a user hands lwsflow.

Hostile input (non-UTF-8 bytes, YAML bombs built from aliases, absurd nesting, huge files) becomes
``InvalidInput`` with one line, never a traceback or an exhausted machine.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from lwsflow.controller.errors import InvalidInput

MAX_BYTES = 16 * 1024 * 1024
MAX_DEPTH = 64
MAX_NODES = 2_000_000  # counted with aliases expanded: a "billion laughs" document trips this
_CLoader: Any = getattr(yaml, "CSafeLoader", None)  # libyaml, when PyYAML was built with it


def _too_large(source: str) -> InvalidInput:
    return InvalidInput(f"file larger than {MAX_BYTES // (1024 * 1024)} MiB", source=source)


def _check(doc: Any, source: str) -> None:
    budget = [MAX_NODES]

    def walk(node: Any, depth: int) -> None:
        if depth > MAX_DEPTH:
            raise InvalidInput(f"document nested deeper than {MAX_DEPTH} levels", source=source)
        budget[0] -= 1
        if budget[0] < 0:
            raise InvalidInput("document expands to too many nodes (YAML alias bomb?)", source=source)
        if isinstance(node, dict):
            for k, v in node.items():
                walk(k, depth + 1)
                walk(v, depth + 1)
        elif isinstance(node, list):
            for v in node:
                walk(v, depth + 1)

    walk(doc, 0)


def parse_yaml_documents(text: str | bytes, source: str = "<input>") -> list[Any]:
    """All documents of a YAML stream (empty documents dropped)."""
    if isinstance(text, bytes):
        if len(text) > MAX_BYTES:
            raise _too_large(source)
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidInput(f"not UTF-8 text (byte {exc.start})", source=source) from None
    try:
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise InvalidInput(f"invalid YAML{where}: {problem}", source=source) from None
    except RecursionError:
        raise InvalidInput(f"document nested deeper than {MAX_DEPTH} levels", source=source) from None
    for d in docs:
        _check(d, source)
    return docs


def parse_tool_output(text: str, source: str = "<input>") -> list[Any]:
    """``parse_yaml_documents`` for YAML another tool wrote (``kubectl kustomize``), parsed by libyaml.

    The pure-Python parser costs about 2 s per 100-model environment; libyaml about a tenth. Only
    machine-written YAML takes this path, so what users write keeps the pure-Python parser's exact
    acceptance and messages; a stream libyaml refuses is handed to that parser for the same one-line
    error. The size, depth and alias-expansion limits apply alike.
    """
    if _CLoader is None or len(text) > MAX_BYTES:
        return parse_yaml_documents(text, source)
    try:
        docs = [d for d in yaml.load_all(text, Loader=_CLoader) if d is not None]
    except (yaml.YAMLError, RecursionError):
        return parse_yaml_documents(text, source)
    for d in docs:
        _check(d, source)
    return docs


def load_yaml_documents(path: Path) -> list[Any]:
    """Read a YAML file; a missing or unreadable file is InvalidInput naming it."""
    try:
        if path.stat().st_size > MAX_BYTES:  # refuse before reading it into memory
            raise _too_large(str(path))
        data = path.read_bytes()
    except FileNotFoundError:
        raise InvalidInput("no such file", source=str(path)) from None
    except IsADirectoryError:
        raise InvalidInput("is a directory, expected a file", source=str(path)) from None
    except OSError as exc:
        raise InvalidInput(f"cannot read: {exc.strerror}", source=str(path)) from None
    return parse_yaml_documents(data, source=str(path))


class _Dumper(yaml.SafeDumper):
    """Block style, no aliases, long strings unwrapped: stable output for GitOps diffs."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _str_presenter(dumper: yaml.representer.SafeRepresenter, data: str) -> yaml.ScalarNode:
    style = "|" if "\n" in data else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


_Dumper.add_representer(str, _str_presenter)

# libyaml's emitter (about ten times faster) writes the same bytes as the pure-Python one only on a
# subset of documents; outside it they differ (non-ASCII text, keys of 120+ characters or empty ones,
# keep-chomped block scalars, a bare scalar document). ``dump_yaml`` uses it on that subset alone,
# which ``_emits_alike`` recognises; tests/gitops/test_overlays_speed.py compares both on generated
# documents and on every rendered tree.
_CDumper: Any = None
if yaml.__with_libyaml__:

    class _CDumperType(yaml.CSafeDumper):
        def ignore_aliases(self, data: Any) -> bool:
            return True

    _CDumperType.add_representer(str, _str_presenter)
    _CDumper = _CDumperType

_ASCII_TEXT = re.compile(r"[\x20-\x7e\n]*\Z")  # printable ASCII and line breaks, nothing else
_ASCII_KEY = re.compile(r"[\x20-\x7e]{1,100}\Z")
_SCALARS = (int, float, bool, type(None))


def _emits_alike(doc: Any) -> bool:
    """True when both emitters write ``doc`` byte for byte alike (see the comment above)."""
    if type(doc) not in (dict, list):
        return False
    stack: list[Any] = [doc]
    budget = MAX_NODES  # a cyclic document never ends the walk: it goes to the pure-Python emitter
    while stack:
        budget -= 1
        if budget < 0:
            return False
        node = stack.pop()
        kind = type(node)
        if kind is dict:
            for k, v in node.items():
                if type(k) is not str or not _ASCII_KEY.match(k):
                    return False
                stack.append(v)
        elif kind is list:
            stack.extend(node)
        elif kind is str:
            if not _ASCII_TEXT.match(node) or node.endswith("\n\n") or node == "\n":
                return False
        elif kind not in _SCALARS:
            return False
    return True


def _dump(doc: Any, dumper: Any) -> str:
    return str(yaml.dump(doc, Dumper=dumper, sort_keys=False, default_flow_style=False, width=1_000_000,
                         allow_unicode=True))


def dump_yaml(doc: Any) -> str:
    """Deterministic YAML for one document (keys in the given order, no flow style)."""
    return _dump(doc, _CDumper if _CDumper is not None and _emits_alike(doc) else _Dumper)


def dump_yaml_documents(docs: list[Any]) -> str:
    return "---\n".join(dump_yaml(d) for d in docs)
