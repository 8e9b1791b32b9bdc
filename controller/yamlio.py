"""Safe YAML in and deterministic YAML out, for everything a user hands lwsflow.

Hostile input (non-UTF-8 bytes, YAML bombs built from aliases, absurd nesting, huge files) becomes
``InvalidInput`` with one line, never a traceback or an exhausted machine.
"""

from __future__ import annotations

import re
from collections.abc import Callable
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
        docs = _event_load(text)
    except (yaml.YAMLError, _Unalike):
        return parse_yaml_documents(text, source)
    return [d for d in docs if d is not None]


# -- the event loader: libyaml's events, built into objects without PyYAML's composer and constructor ---
# SafeLoader composes a node per value and resolves every plain scalar with regular expressions, all in
# Python. Machine-written YAML is plain mappings, sequences and untagged scalars: built here straight
# from libyaml's events, each distinct plain scalar resolved once (cached) by SafeLoader's own resolver
# and constructor. Anchors, aliases, tags, merge keys, timestamps, a collection as a key, nesting past
# MAX_DEPTH or more than MAX_NODES values raise _Unalike: the reference loader decides those.

_STR, _INT, _FLOAT, _BOOL, _NULL = (f"tag:yaml.org,2002:{t}" for t in ("str", "int", "float", "bool", "null"))
_NOKEY: Any = object()
_resolve: Callable[[type[yaml.Node], str, tuple[bool, bool]], str] = yaml.resolver.Resolver().resolve
_constructor = yaml.constructor.SafeConstructor()
_plain: dict[str, Any] = {}


def _plain_value(text: str) -> Any:
    """An untagged plain scalar as SafeLoader constructs it (cached by its text)."""
    try:
        return _plain[text]
    except KeyError:
        pass
    tag = _resolve(yaml.ScalarNode, text, (True, False))
    node = yaml.ScalarNode(tag, text)
    if tag == _STR:
        value: Any = text
    elif tag == _INT:
        value = _constructor.construct_yaml_int(node)
    elif tag == _FLOAT:
        value = _constructor.construct_yaml_float(node)
    elif tag == _BOOL:
        value = _constructor.construct_yaml_bool(node)
    elif tag == _NULL:
        value = None
    else:  # timestamps, merge keys, "=": rare in tool output, left to the reference loader
        raise _Unalike
    if len(_plain) >= _CACHE_MAX:
        _plain.clear()
    _plain[text] = value
    return value


def _event_load(text: str) -> list[Any]:
    loader = _CLoader(text)
    try:
        return _build(loader.get_event)
    finally:
        loader.dispose()


def _build(next_event: Callable[[], Any]) -> list[Any]:
    docs: list[Any] = []
    stack: list[Any] = []  # open collections, innermost last
    keys: list[Any] = []  # per open collection: the key awaiting its value (_NOKEY: none; lists: unused)
    nodes = 0
    while True:
        event = next_event()
        kind = type(event)
        if kind is yaml.ScalarEvent:
            if event.anchor is not None or event.tag not in (None, "!"):
                raise _Unalike
            value: Any = _plain_value(event.value) if event.implicit[0] else event.value
            opened = False
        elif kind is yaml.MappingStartEvent or kind is yaml.SequenceStartEvent:
            if event.anchor is not None or event.tag not in (None, "!"):
                raise _Unalike
            value = {} if kind is yaml.MappingStartEvent else []
            opened = True
        elif kind is yaml.MappingEndEvent or kind is yaml.SequenceEndEvent:
            closed = stack.pop()
            keys.pop()
            if not stack:
                docs.append(closed)  # the collection just closed is the document
            continue
        elif kind in (yaml.DocumentStartEvent, yaml.DocumentEndEvent, yaml.StreamStartEvent):
            continue
        elif kind is yaml.StreamEndEvent or event is None:
            return docs
        else:  # aliases
            raise _Unalike
        nodes += 1
        if nodes > MAX_NODES or len(stack) > MAX_DEPTH:
            raise _Unalike
        if stack:
            top = stack[-1]
            if type(top) is list:
                top.append(value)
            elif keys[-1] is _NOKEY:
                if opened:
                    raise _Unalike  # a collection as a mapping key
                keys[-1] = value
            else:
                top[keys[-1]] = value
                keys[-1] = _NOKEY
        elif not opened:
            docs.append(value)  # a scalar document
        if opened:
            stack.append(value)
            keys.append(_NOKEY)


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
# which ``_emits_alike`` recognises; tests/gitops/integration/test_overlays_speed.py compares both on
# generated documents and on every rendered tree.
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


# -- the block emitter: PyYAML's bytes without its representer ------------------------------------------
# PyYAML's representer (pure Python even in front of libyaml) costs most of a render. Within the subset
# above, a block-style document is a fixed layout of scalar tokens, and a scalar's token depends only on
# its text (plain, quoted or a literal block whose lines follow the indentation). So the layout is
# written here and each distinct scalar's token is asked once of libyaml (cached). Anything else raises
# _Unalike and takes the reference path; tests/gitops/integration/test_overlays_speed.py compares the two.


class _Unalike(Exception):
    """The document leaves the subset the block emitter writes like PyYAML."""


# plain in PyYAML for sure: a letter first (no indicator, no number, no timestamp), no flow or comment
# characters, and not one of YAML 1.1's booleans or nulls
_PLAIN = re.compile(r"[A-Za-z][A-Za-z0-9._/-]*\Z")
_RESERVED = frozenset({"yes", "Yes", "YES", "no", "No", "NO", "true", "True", "TRUE", "false", "False",
                       "FALSE", "on", "On", "ON", "off", "Off", "OFF", "null", "Null", "NULL"})
_Form = str | tuple[str, tuple[str, ...]]  # a one-line token, or a block header and its lines
_forms: dict[Any, _Form] = {}
_keys: dict[str, str] = {}
_CACHE_MAX = 200_000


def _libyaml_form(value: Any) -> _Form:
    """How PyYAML writes ``value`` as a block-sequence item, read off libyaml's output for ``[value]``."""
    lines = _dump([value], _CDumper).split("\n")  # "- token", or "- |-" and its lines, then ""
    head = lines[0]
    if not head.startswith("- ") or lines[-1] != "":
        raise _Unalike
    if len(lines) == 2:
        return head[2:]
    body = lines[1:-1]
    if head[2:3] != "|" or any(ln and not ln.startswith("  ") for ln in body):
        raise _Unalike  # a quoted scalar over several lines: its breaks depend on the column
    return head[2:], tuple(ln[2:] for ln in body)


def _form(value: Any) -> _Form:
    kind = type(value)
    if kind is str:
        form = _forms.get(value)
        if form is not None:
            return form
        if _PLAIN.match(value) and value not in _RESERVED:
            form = value
        elif _ASCII_TEXT.match(value) and not value.endswith("\n\n") and value != "\n":
            form = _libyaml_form(value)
        else:
            raise _Unalike
        if len(_forms) >= _CACHE_MAX:
            _forms.clear()
        _forms[value] = form
        return form
    if kind is bool:
        return "true" if value else "false"
    if kind is int:
        return str(value)
    if value is None:
        return "null"
    if kind is float:
        return _libyaml_form(value)
    raise _Unalike


def _key(key: Any) -> str:
    token = _keys.get(key) if type(key) is str else None
    if token is None:
        if type(key) is not str or not _ASCII_KEY.match(key):
            raise _Unalike
        form = _form(key)
        if not isinstance(form, str):
            raise _Unalike
        if len(_keys) >= _CACHE_MAX:
            _keys.clear()
        token = _keys[key] = form
    return token


def _scalar(value: Any, indent: int, out: list[str]) -> None:
    """`` token`` to the end of the line; a block scalar's lines at ``indent``."""
    form = _form(value)
    if isinstance(form, str):
        out.append(f" {form}\n")
        return
    head, body = form
    pad = " " * indent
    out.append(f" {head}\n")
    out.extend(f"{pad}{ln}\n" if ln else "\n" for ln in body)


def _mapping(doc: dict[Any, Any], indent: int, out: list[str], inline: bool) -> None:
    """A non-empty mapping whose keys sit at ``indent`` (the first one on the current line if ``inline``)."""
    pad = " " * indent
    for key, value in doc.items():
        out.append(f"{_key(key)}:" if inline else f"{pad}{_key(key)}:")
        inline = False
        kind = type(value)
        if kind is dict:
            if value:
                out.append("\n")
                _mapping(value, indent + 2, out, False)
            else:
                out.append(" {}\n")
        elif kind is list:
            if value:
                out.append("\n")
                _sequence(value, indent, out, False)  # PyYAML does not indent a sequence in a mapping
            else:
                out.append(" []\n")
        else:
            _scalar(value, indent + 2, out)


def _sequence(doc: list[Any], indent: int, out: list[str], inline: bool) -> None:
    """A non-empty sequence with its dashes at ``indent`` (the first on the current line if ``inline``)."""
    pad = " " * indent
    for item in doc:
        out.append("-" if inline else f"{pad}-")
        inline = False
        kind = type(item)
        if kind is dict:
            if item:
                out.append(" ")
                _mapping(item, indent + 2, out, True)
            else:
                out.append(" {}\n")
        elif kind is list:
            if item:
                out.append(" ")
                _sequence(item, indent + 2, out, True)
            else:
                out.append(" []\n")
        else:
            _scalar(item, indent + 2, out)


def _block_dump(doc: Any) -> str:
    """``doc`` as PyYAML's block emitter writes it; _Unalike outside the subset it is sure of."""
    if _CDumper is None:
        raise _Unalike
    out: list[str] = []
    try:
        if type(doc) is dict:
            if not doc:
                return "{}\n"
            _mapping(doc, 0, out, False)
        elif type(doc) is list:
            if not doc:
                return "[]\n"
            _sequence(doc, 0, out, False)
        else:
            raise _Unalike
    except RecursionError:  # a cyclic or absurdly deep document: the reference path decides
        raise _Unalike from None
    return "".join(out)


def dump_yaml(doc: Any) -> str:
    """Deterministic YAML for one document (keys in the given order, no flow style)."""
    try:
        return _block_dump(doc)
    except _Unalike:
        return _dump(doc, _CDumper if _CDumper is not None and _emits_alike(doc) else _Dumper)


def dump_yaml_documents(docs: list[Any]) -> str:
    return "---\n".join(dump_yaml(d) for d in docs)
