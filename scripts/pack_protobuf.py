"""Derive the embedded cluster's protobuf decoding table from k8s.io/api's ``generated.proto`` files.

Usage: ``.venv/bin/python scripts/pack_protobuf.py [--check]``. Reads the pinned k8s.io/api and
k8s.io/apimachinery modules from the upstream cache (``lwsflow.controller.api.paths``; fetched on
first use) and writes ``sim/apiserver/k8s_protobuf.json.gz``: for every message of every API package,
its fields (number, JSON name, type, flags), and which proto package serves each
``apiVersion``. ``--check`` exits 1 when the packaged table differs from a fresh derivation.

The field numbers and types come from ``generated.proto``; the JSON name and whether a zero value is
kept (a pointer, or a field without ``omitempty``) from the Go struct tags of the same package, as the
protobuf encoder writes every non-pointer field, zero or not, and JSON would leave most of them out.
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lwsflow.components.atomic import write_file_atomic
from lwsflow.controller.api import paths
from lwsflow.controller.api.paths import UpstreamMissing

DEST = paths.repo_root() / "sim" / "apiserver" / "k8s_protobuf.json.gz"
SCALARS = {"string", "bytes", "bool", "int32", "int64", "uint32", "uint64", "double", "float"}
_FIELD = re.compile(r"^\s*(optional|repeated)\s+(\S+)\s+(\w+)\s*=\s*(\d+)\s*;")
_MAP = re.compile(r"^\s*map<\s*(\S+)\s*,\s*(\S+)\s*>\s+(\w+)\s*=\s*(\d+)\s*;")
_GO_FIELD = re.compile(r'^\t(?:(\w+)\s+)?([^\s`]+)\s+`([^`]*)`')  # an embedded field has no name


def _qualify(type_name: str, package: str) -> str:
    """A scalar stays as it is; a message becomes ``.package.Name``."""
    if type_name in SCALARS:
        return type_name
    return type_name if type_name.startswith(".") else f".{package}.{type_name}"


def go_fields(folder: Path) -> dict[str, dict[int, tuple[str, str]]]:
    """struct name -> protobuf field number -> (JSON name, flags) from the Go struct tags: ``z`` keeps a
    zero value (a pointer, or no omitempty), ``i`` inlines the message's fields (``json:",inline"``)."""
    out: dict[str, dict[int, tuple[str, str]]] = {}
    for src in sorted(folder.glob("*.go")):
        struct: dict[int, tuple[str, str]] | None = None
        for line in src.read_text().splitlines():
            start = re.match(r"^type (\w+) struct \{$", line)
            if start:
                struct = out.setdefault(start.group(1), {})
            elif line.startswith("}"):
                struct = None
            elif struct is not None and (m := _GO_FIELD.match(line)):
                pb = re.search(r'protobuf:"[^,]*,(\d+),', m.group(3))
                js = re.search(r'json:"([^"]*)"', m.group(3))
                if pb and js:
                    name, *opts = js.group(1).split(",")
                    omit = "omitempty" in opts or "omitzero" in opts
                    keep = m.group(2).startswith("*") or not omit
                    flags = ("z" if keep else "") + ("i" if "inline" in opts else "")
                    struct[int(pb.group(1))] = (name, flags)
    return out


def parse_proto(path: Path) -> tuple[str, dict[str, dict]]:
    """(package, message name -> {"f": {number: [json name, type, flags]}, "list": bool})."""
    text = path.read_text()
    package = re.search(r"^package ([\w.]+);", text, re.M)
    if package is None:
        raise SystemExit(f"error: {path}: no package line")
    pkg = package.group(1)
    tags = go_fields(path.parent)
    messages: dict[str, dict] = {}
    comments: list[str] = []
    current: dict | None = None
    go: dict[int, tuple[str, str]] = {}
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("//"):
            comments.append(stripped)
            continue
        start = re.match(r"^message (\w+) \{", line)
        if start:
            # a +protobuf.nullable list wrapper (Verbs, ExtraValue) is a plain JSON list
            current = {"f": {}, "list": "// +protobuf.nullable=true" in comments}
            messages[start.group(1)] = current
            go = tags.get(start.group(1), {})
        elif line.startswith("}"):
            current = None
        elif current is not None and ((m := _FIELD.match(line)) or (m := _MAP.match(line))):
            if m.re is _MAP:
                type_name = f"map:{m.group(1)}:{_qualify(m.group(2), pkg)}"
                label = "m"
            else:
                type_name, label = _qualify(m.group(2), pkg), ("r" if m.group(1) == "repeated" else "")
            num = int(m.group(4))
            json_name, flags = go.get(num, (m.group(3), ""))
            current["f"][str(num)] = [json_name or m.group(3), type_name, label + flags]
        if stripped:
            comments = []
    return pkg, messages


def derive() -> dict:
    api, machinery = paths.k8s_proto_roots()
    protos = sorted(api.glob("*/*/generated.proto")) + sorted(machinery.rglob("generated.proto"))
    messages: dict[str, dict] = {}
    groups: dict[str, str] = {}
    for proto in protos:
        pkg, found = parse_proto(proto)
        messages.update({f".{pkg}.{name}": msg for name, msg in found.items()})
        register = proto.parent / "register.go"
        text = register.read_text() if register.is_file() else ""
        group = re.search(r'^const GroupName = "(.*)"', text, re.M)
        if group is not None:
            version = proto.parent.name
            groups[f"{group.group(1)}/{version}" if group.group(1) else version] = pkg
    refs = {t.rsplit(":", 1)[-1] for m in messages.values() for _, t, _ in m["f"].values()}
    missing = sorted(r for r in refs if r.startswith(".") and r not in messages)
    if missing:
        raise SystemExit(f"error: message types referenced but not found: {', '.join(missing[:5])}")
    sources = " ".join(f"{p}@{paths.versions()[p]}" for p in ("k8s.io/api", "k8s.io/apimachinery"))
    return {"source": sources, "groups": dict(sorted(groups.items())),
            "messages": dict(sorted(messages.items()))}


def encode(table: dict) -> bytes:
    """Byte-stable gzip (no name, no timestamp) so a re-pack of the same upstream is no diff."""
    return gzip.compress(json.dumps(table, sort_keys=True, separators=(",", ":")).encode(), mtime=0)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="compare only; exit 1 on drift")
    args = ap.parse_args(argv)
    try:
        data = encode(derive())
    except UpstreamMissing as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    same = DEST.is_file() and DEST.read_bytes() == data
    if args.check:
        if not same:
            print(f"{DEST}: differs from a fresh derivation from the upstream cache", file=sys.stderr)
            return 1
        return 0
    if not same:
        write_file_atomic(DEST, data)  # a reader never sees half a table
        print(f"wrote {DEST} ({len(data)} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
