"""Just enough Kubernetes protobuf decoding for the request bodies kubectl's imperative commands send.

``kubectl create configmap|secret|namespace|serviceaccount`` post
``application/vnd.kubernetes.protobuf`` (a ``k8s\\0`` magic, then a ``runtime.Unknown`` envelope
holding the typed message). This decodes those few kinds, with the field numbers of k8s.io/api's
``generated.proto``, into the JSON wire form; answers are always JSON, which the client accepts.
Fields a create does not need (status, server-set metadata) are skipped.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterator
from typing import Any

from lwsflow.controller.errors import BadRequest

MAGIC = b"k8s\x00"


def _varint(buf: bytes, i: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        if i >= len(buf):
            raise BadRequest("truncated protobuf body")
        b = buf[i]
        i += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, i
        shift += 7


def _fields(buf: bytes) -> Iterator[tuple[int, int | bytes]]:
    i = 0
    while i < len(buf):
        key, i = _varint(buf, i)
        num, wire = key >> 3, key & 7
        if wire == 0:
            val, i = _varint(buf, i)
            yield num, val
        elif wire == 2:
            n, i = _varint(buf, i)
            yield num, buf[i : i + n]
            i += n
        elif wire == 1:
            i += 8
        elif wire == 5:
            i += 4
        else:
            raise BadRequest(f"unsupported protobuf wire type {wire}")


def _str(v: int | bytes) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def _map(v: int | bytes, value: Callable[[bytes], Any]) -> tuple[str, Any]:
    entry = dict(_fields(v if isinstance(v, bytes) else b""))
    raw = entry.get(2, b"")
    return _str(entry.get(1, b"")), value(raw if isinstance(raw, bytes) else b"")


def _object_meta(buf: bytes) -> dict[str, Any]:
    meta: dict[str, Any] = {}
    names = {1: "name", 2: "generateName", 3: "namespace"}
    for num, v in _fields(buf):
        if num in names:
            if _str(v):  # proto3 sends empty strings; JSON omits them
                meta[names[num]] = _str(v)
        elif num in (11, 12):
            k, val = _map(v, lambda b: b.decode())
            meta.setdefault("labels" if num == 11 else "annotations", {})[k] = val
        elif num == 14:
            meta.setdefault("finalizers", []).append(_str(v))
    return meta


def _b64(b: bytes) -> str:
    return base64.b64encode(b).decode()


def _decode(kind: str, buf: bytes) -> dict[str, Any]:
    obj: dict[str, Any] = {}
    for num, v in _fields(buf):
        if num == 1 and isinstance(v, bytes):
            obj["metadata"] = _object_meta(v)
        elif kind == "ConfigMap" and num in (2, 3):
            k, val = _map(v, (lambda b: b.decode()) if num == 2 else _b64)
            obj.setdefault("data" if num == 2 else "binaryData", {})[k] = val
        elif kind == "Secret" and num in (2, 4):
            k, val = _map(v, _b64 if num == 2 else (lambda b: b.decode()))
            obj.setdefault("data" if num == 2 else "stringData", {})[k] = val
        elif kind == "Secret" and num == 3:
            obj["type"] = _str(v)
        elif (kind, num) in (("ConfigMap", 4), ("Secret", 5)):
            obj["immutable"] = bool(v)
        elif kind == "Namespace" and num == 2 and isinstance(v, bytes):
            finalizers = [_str(f) for n, f in _fields(v) if n == 1]
            if finalizers:
                obj["spec"] = {"finalizers": finalizers}
        elif kind == "ServiceAccount" and num == 4:
            obj["automountServiceAccountToken"] = bool(v)
        elif kind == "SelfSubjectAccessReview" and num == 2 and isinstance(v, bytes):
            obj["spec"] = _access_review_spec(v)
        elif kind == "TokenRequest" and num == 2 and isinstance(v, bytes):
            obj["spec"] = _token_request_spec(v)
    return obj


_RESOURCE_ATTRS = {1: "namespace", 2: "verb", 3: "group", 4: "version", 5: "resource", 6: "subresource",
                   7: "name"}


def _access_review_spec(buf: bytes) -> dict[str, Any]:
    """SelfSubjectAccessReviewSpec: resourceAttributes (1) or nonResourceAttributes (2: path, verb)."""
    spec: dict[str, Any] = {}
    for num, v in _fields(buf):
        if num == 1 and isinstance(v, bytes):
            spec["resourceAttributes"] = {_RESOURCE_ATTRS[n]: _str(x) for n, x in _fields(v)
                                          if n in _RESOURCE_ATTRS and _str(x)}
        elif num == 2 and isinstance(v, bytes):
            spec["nonResourceAttributes"] = {{1: "path", 2: "verb"}[n]: _str(x) for n, x in _fields(v)
                                             if n in (1, 2) and _str(x)}
    return spec


def _token_request_spec(buf: bytes) -> dict[str, Any]:
    """TokenRequestSpec: audiences (1), expirationSeconds (4); the bound object is not modelled."""
    spec: dict[str, Any] = {}
    for num, v in _fields(buf):
        if num == 1:
            spec.setdefault("audiences", []).append(_str(v))
        elif num == 4 and isinstance(v, int):
            spec["expirationSeconds"] = v
    return spec


SUPPORTED = ("ConfigMap", "Secret", "Namespace", "ServiceAccount", "SelfSubjectAccessReview", "TokenRequest")


def decode_k8s_protobuf(raw: bytes) -> dict[str, Any]:
    """The JSON form of a protobuf-encoded object of one of the ``SUPPORTED`` kinds."""
    if not raw.startswith(MAGIC):
        raise BadRequest("protobuf body without the k8s magic prefix")
    envelope = dict(_fields(raw[len(MAGIC) :]))
    raw_meta = envelope.get(1)
    type_meta = dict(_fields(raw_meta if isinstance(raw_meta, bytes) else b""))
    api_version, kind = _str(type_meta.get(1, b"")), _str(type_meta.get(2, b""))
    if kind not in SUPPORTED:
        raise BadRequest(f"protobuf bodies are supported for {', '.join(SUPPORTED)} only; send JSON")
    body = envelope.get(2, b"")
    obj = _decode(kind, body if isinstance(body, bytes) else b"")
    return {"apiVersion": api_version, "kind": kind, **obj}
