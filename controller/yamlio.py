"""Safe YAML in and deterministic YAML out, for everything a user hands lwsflow.

Hostile input (non-UTF-8 bytes, YAML bombs built from aliases, absurd nesting, huge files) becomes
``InvalidInput`` with one line, never a traceback or an exhausted machine.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from lwsflow.controller.errors import InvalidInput

MAX_BYTES = 16 * 1024 * 1024
MAX_DEPTH = 64
MAX_NODES = 2_000_000  # counted with aliases expanded: a "billion laughs" document trips this


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


def _str_presenter(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
    style = "|" if "\n" in data else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


_Dumper.add_representer(str, _str_presenter)


def dump_yaml(doc: Any) -> str:
    """Deterministic YAML for one document (keys in the given order, no flow style)."""
    return yaml.dump(doc, Dumper=_Dumper, sort_keys=False, default_flow_style=False, width=1_000_000,
                     allow_unicode=True)


def dump_yaml_documents(docs: list[Any]) -> str:
    return "---\n".join(dump_yaml(d) for d in docs)
