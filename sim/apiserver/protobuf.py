"""Kubernetes protobuf request bodies (``application/vnd.kubernetes.protobuf``) as their JSON form.

kubectl's typed clients send protobuf for built-in kinds: ``kubectl create role|clusterrole|
rolebinding|deployment|service|secret|configmap|namespace|serviceaccount|token|...``, ``kubectl run``,
``kubectl auth can-i``. A body is a ``k8s\\0`` magic, then a ``runtime.Unknown`` envelope holding the
TypeMeta and the typed message. The message's fields come from ``k8s_protobuf.json.gz``, which
``scripts/pack_protobuf.py`` derives from the pinned k8s.io/api and k8s.io/apimachinery
``generated.proto`` files and Go struct tags (every message of every API group and version).

The wire format is read here: the ``protobuf`` runtime parses messages only from compiled descriptors
(there is no .proto parser without protoc), and the JSON form is Kubernetes' own anyway (IntOrString,
Quantity and Time are custom-marshalled; int64 is a number; repeated-string wrappers are lists). The
Go encoder writes every non-pointer field, zero or not: a zero value is dropped where the Go JSON tag
would drop it (``omitempty``), so the result is what kubectl would have sent as JSON. Answers are
always JSON, which the client accepts.
"""

from __future__ import annotations

import base64
import datetime
import gzip
import json
import struct
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

from lwsflow.controller.errors import BadRequest

MAGIC = b"k8s\x00"
TABLE = Path(__file__).with_name("k8s_protobuf.json.gz")
MAX_DEPTH = 64  # far beyond any built-in kind; a hostile body cannot recurse the decoder to death
_META = ".k8s.io.apimachinery.pkg.apis.meta.v1."
_SIGNED = {"int32", "int64"}


@cache
def table() -> dict[str, Any]:
    """The packaged decoding table: ``groups`` (apiVersion -> proto package) and ``messages``."""
    loaded: dict[str, Any] = json.loads(gzip.decompress(TABLE.read_bytes()))
    return loaded


def _varint(buf: bytes, i: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        if i >= len(buf) or shift > 63:
            raise BadRequest("truncated protobuf body")
        b = buf[i]
        i += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, i
        shift += 7


def _fields(buf: bytes) -> Iterator[tuple[int, int, int | bytes]]:
    """(field number, wire type, value): a varint, or the raw bytes of the other wire types."""
    i = 0
    while i < len(buf):
        key, i = _varint(buf, i)
        num, wire = key >> 3, key & 7
        if wire == 0:
            val, i = _varint(buf, i)
            yield num, wire, val
            continue
        if wire == 2:
            n, i = _varint(buf, i)
        elif wire in (1, 5):
            n = 8 if wire == 1 else 4
        else:
            raise BadRequest(f"unsupported protobuf wire type {wire}")
        if i + n > len(buf):
            raise BadRequest("truncated protobuf body")
        yield num, wire, buf[i : i + n]
        i += n


def _scalar(kind: str, wire: int, v: int | bytes) -> Any:
    if isinstance(v, int) and wire == 0 and kind not in ("string", "bytes", "double", "float"):
        if kind == "bool":
            return bool(v)
        if kind in _SIGNED and v >= 1 << 63:  # negative numbers are ten-byte two's complement
            v -= 1 << 64
        return v
    if isinstance(v, bytes) and kind == "string" and wire == 2:
        return v.decode("utf-8", "replace")
    if isinstance(v, bytes) and kind == "bytes" and wire == 2:
        return base64.b64encode(v).decode()
    if isinstance(v, bytes) and kind in ("double", "float") and wire in (1, 5):
        return struct.unpack("<d" if wire == 1 else "<f", v)[0]
    raise BadRequest(f"protobuf {kind} field sent with wire type {wire}")


def _packed(kind: str, v: bytes) -> list[Any]:
    """A packed repeated number (proto3 writers pack; Kubernetes' proto2 ones do not)."""
    out, i = [], 0
    while i < len(v):
        n, i = _varint(v, i)
        out.append(_scalar(kind, 0, n))
    return out


def _rfc3339(seconds: int, nanos: int, micro: bool) -> str:
    try:
        t = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC) + datetime.timedelta(seconds=seconds)
    except OverflowError:
        raise BadRequest(f"protobuf body: a time {seconds} s from the epoch is out of range") from None
    frac = f".{nanos // 1000:06d}" if micro else ""
    return t.strftime("%Y-%m-%dT%H:%M:%S") + frac + "Z"


def _duration(ns: int) -> str:
    """metav1.Duration's JSON: Go's time.Duration.String (``1h2m3s``, ``500ms``, ``0s``)."""
    if ns == 0:
        return "0s"
    sign, ns = ("-" if ns < 0 else ""), abs(ns)
    if ns < 1_000_000_000:
        for unit, size in (("ms", 1_000_000), ("µs", 1_000), ("ns", 1)):
            if ns >= size:
                return f"{sign}{ns / size:g}{unit}"
    h, rest = divmod(ns, 3_600_000_000_000)
    m, rest = divmod(rest, 60_000_000_000)
    s = f"{rest / 1e9:.9f}".rstrip("0").rstrip(".")
    return sign + (f"{h}h" if h else "") + (f"{m}m" if h or m else "") + f"{s}s"


def _special(name: str, buf: bytes) -> tuple[bool, Any]:
    """The apimachinery types with a JSON form of their own: (handled, value; None leaves it out)."""
    if name in (_META + "Time", _META + "MicroTime"):
        f = {n: v for n, _, v in _fields(buf) if isinstance(v, int)}
        secs, nanos = _scalar("int64", 0, f.get(1, 0)), f.get(2, 0)
        return True, (_rfc3339(secs, nanos, name.endswith("MicroTime")) if secs or nanos else None)
    if name == _META + "Duration":
        d = {n: v for n, _, v in _fields(buf) if isinstance(v, int)}
        return True, _duration(_scalar("int64", 0, d.get(1, 0)))
    if name == ".k8s.io.apimachinery.pkg.util.intstr.IntOrString":
        ios = {n: v for n, _, v in _fields(buf)}
        if ios.get(1, 0) == 1:
            s = ios.get(3, b"")
            return True, s.decode("utf-8", "replace") if isinstance(s, bytes) else ""
        n = ios.get(2, 0)
        return True, _scalar("int32", 0, n if isinstance(n, int) else 0)
    if name == ".k8s.io.apimachinery.pkg.api.resource.Quantity":
        s = next((v for n, _, v in _fields(buf) if n == 1 and isinstance(v, bytes)), b"")
        return True, s.decode("utf-8", "replace")
    if name in (".k8s.io.apimachinery.pkg.runtime.RawExtension", _META + "FieldsV1"):
        raw = next((v for n, _, v in _fields(buf) if n == 1 and isinstance(v, bytes)), b"")
        if not raw:
            return True, None
        try:
            return True, json.loads(raw)
        except (ValueError, RecursionError):
            raise BadRequest(f"protobuf body: a {name.rsplit('.', 1)[1]} that is not JSON") from None
    return False, None


def _message(name: str, buf: bytes, depth: int) -> Any:
    if depth > MAX_DEPTH:
        raise BadRequest(f"protobuf body nested deeper than {MAX_DEPTH} levels")
    handled, value = _special(name, buf)
    if handled:
        return value
    msg = table()["messages"][name]
    if msg["list"]:  # a +protobuf.nullable wrapper of one repeated field (Verbs, ExtraValue)
        return [_scalar("string", w, v) for n, w, v in _fields(buf) if n == 1]
    out: dict[str, Any] = {}
    for num, wire, v in _fields(buf):
        field = msg["f"].get(str(num))
        if field is None:
            continue  # a field newer than the pinned k8s.io/api: JSON clients' unknown fields are dropped too
        key, kind, flags = field
        if kind.startswith("map:"):
            _, key_kind, value_kind = kind.split(":", 2)
            entry = {n: (w, x) for n, w, x in _fields(v if isinstance(v, bytes) else b"")}
            k = _value(key_kind, *entry.get(1, (2, b"")), depth)
            out.setdefault(key, {})[str(k)] = _value(value_kind, *entry.get(2, (2, b"")), depth)
            continue
        if "r" in flags:
            items = out.setdefault(key, [])
            if wire == 2 and kind in _SIGNED | {"bool", "uint32", "uint64"} and isinstance(v, bytes):
                items.extend(_packed(kind, v))
            else:
                items.append(_value(kind, wire, v, depth))
            continue
        value = _value(kind, wire, v, depth)
        if "i" in flags and isinstance(value, dict):  # json:",inline": the message's fields are ours
            out.update(value)
        elif value is None or (not value and "z" not in flags and not isinstance(value, (dict, list))):
            out.pop(key, None)  # omitempty: Go's encoder wrote the zero value, JSON would not
        else:
            out[key] = value
    return out


def _value(kind: str, wire: int, v: int | bytes, depth: int) -> Any:
    if kind.startswith("."):
        if not isinstance(v, bytes) or wire != 2:
            raise BadRequest(f"protobuf message field {kind.rsplit('.', 1)[1]} sent with wire type {wire}")
        return _message(kind, v, depth + 1)
    return _scalar(kind, wire, v)


def decode_k8s_protobuf(raw: bytes) -> dict[str, Any]:
    """The JSON form of a protobuf-encoded object of any kind of k8s.io/api."""
    if not raw.startswith(MAGIC):
        raise BadRequest("protobuf body without the k8s magic prefix")
    envelope = {n: v for n, _, v in _fields(raw[len(MAGIC) :])}
    raw_meta = envelope.get(1)
    type_meta = {n: v for n, _, v in _fields(raw_meta if isinstance(raw_meta, bytes) else b"")}
    api_version, kind = (_scalar("string", 2, type_meta.get(i, b"")) for i in (1, 2))
    package = table()["groups"].get(api_version)
    name = f".{package}.{kind}"
    if package is None or name not in table()["messages"] or not kind:
        raise BadRequest(
            f"a protobuf body of kind {kind or '?'} ({api_version or 'no apiVersion'}) cannot be decoded "
            f"here (only k8s.io/api kinds can); send it as JSON, e.g. "
            f"`kubectl create ... --dry-run=client -o yaml | kubectl apply -f -`")
    body = envelope.get(2, b"")
    obj = _message(name, body if isinstance(body, bytes) else b"", 0)
    return {"apiVersion": api_version, "kind": kind, **obj}
