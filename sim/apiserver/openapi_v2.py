"""``/openapi/v2``: the Swagger 2.0 document kubectl falls back to when OpenAPI v3 does not answer.

kubectl asks v3 first (``openapi.py``); for a kind whose group-version v3 does not list (an
``argoproj.io`` Application before Argo CD is installed, a kind the cluster does not serve) it asks
``/openapi/v2``, in protobuf (gnostic's ``openapi_v2.Document``), and without a v2 document its
client-side validation fails with "the server could not find the requested resource". So v2 lists
the same operations (each PATCH with the ``fieldValidation`` parameter, so kubectl leaves validation
to the server as against v3) and the custom kinds' schemas under ``definitions``, converted to
Swagger 2.0 (what a v2 schema cannot say is dropped, as kube-apiserver's v2 publishing drops it).

The protobuf wire format is written here by hand (a few dozen lines: tags, varints, length-delimited
fields) with the field numbers of gnostic's ``OpenAPIv2.proto``: the project has no generated Python
classes for it, and this document needs only a small part of its messages.
"""

from __future__ import annotations

import json
import struct
from functools import cache
from typing import Any

import yaml

from lwsflow.sim import kinds
from lwsflow.sim.apiserver import openapi

# what kubectl asks for (either spelling) and what the server answers with (kube-openapi's handler)
PROTOBUF_ACCEPT = ("com.github.proto-openapi.spec.v2@v1.0+protobuf",
                   "com.github.proto-openapi.spec.v2.v1.0+protobuf")
PROTOBUF = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
_V2_KEYS = ("description", "type", "format", "required", "properties", "items", "additionalProperties",
            "enum", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "minLength", "maxLength",
            "minItems", "maxItems", "pattern")


def _v2_schema(node: Any) -> Any:
    """A v3 structural schema as Swagger 2.0 keeps it: no anyOf/nullable/CEL, vendor extensions kept."""
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "properties":
            out[key] = {k: _v2_schema(v) for k, v in value.items()}
        elif key in ("items", "additionalProperties"):
            out[key] = _v2_schema(value)
        elif key in _V2_KEYS or (key.startswith("x-kubernetes-") and key != "x-kubernetes-validations"):
            out[key] = value
    return out


def _paths() -> dict[str, Any]:
    paths: dict[str, Any] = {}
    for t in kinds.ALL:
        for path, item in openapi.paths_for(t).items():
            paths[path] = {verb: {
                "operationId": op["operationId"],
                "parameters": [{"name": p["name"], "in": "query", "type": p["schema"]["type"],
                                "uniqueItems": True} for p in op["parameters"]],
                "responses": {"200": {"description": "OK"}},
                "x-kubernetes-action": op["x-kubernetes-action"],
                "x-kubernetes-group-version-kind": op["x-kubernetes-group-version-kind"],
                **({"consumes": list(op["requestBody"]["content"])} if "requestBody" in op else {}),
            } for verb, op in item.items()}
    return paths


def document() -> dict[str, Any]:
    """The Swagger 2.0 document (JSON form)."""
    return _document(kinds.generation())


@cache
def _document(_generation: int) -> dict[str, Any]:
    definitions: dict[str, Any] = {}
    for t in kinds.ALL:
        for name, schema in openapi.schemas_for(t).items():
            definitions[name] = _v2_schema(schema)
    return {"swagger": "2.0", "info": {"title": "Kubernetes", "version": "v1.37.1"},
            "paths": _paths(), "definitions": definitions}


def wants_protobuf(accept: str) -> bool:
    """Protobuf when the Accept header's first type is gnostic's (kubectl sends only that one)."""
    first = accept.split(",")[0]
    return any(t in first for t in PROTOBUF_ACCEPT) and "q=0" not in first


def document_json() -> bytes:
    return json.dumps(document(), separators=(",", ":")).encode()


# -- protobuf (gnostic openapi_v2) ---------------------------------------------------------------------

def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _len(num: int, payload: bytes) -> bytes:
    return _varint(num << 3 | 2) + _varint(len(payload)) + payload


def _str(num: int, value: str) -> bytes:
    return _len(num, value.encode()) if value else b""


def _bool(num: int, value: bool) -> bytes:
    return _varint(num << 3) + b"\x01" if value else b""


def _int(num: int, value: int) -> bytes:
    return _varint(num << 3) + _varint(int(value))


def _double(num: int, value: float) -> bytes:
    return _varint(num << 3 | 1) + struct.pack("<d", float(value))


def _any(value: Any) -> bytes:  # Any{yaml = 2}
    return _str(2, yaml.safe_dump(value, default_flow_style=True).strip())


def _named_any(num: int, name: str, value: Any) -> bytes:  # NamedAny{name = 1, value = 2}
    return _len(num, _str(1, name) + _len(2, _any(value)))


def _schema(node: dict[str, Any]) -> bytes:
    """gnostic ``Schema``: the field numbers of OpenAPIv2.proto."""
    out = _str(2, node.get("format", "")) + _str(4, node.get("description", ""))
    for key, num in (("maximum", 7), ("minimum", 9)):
        if isinstance(node.get(key), (int, float)):
            out += _double(num, node[key])
    out += _bool(8, node.get("exclusiveMaximum") is True) + _bool(10, node.get("exclusiveMinimum") is True)
    for key, num in (("maxLength", 11), ("minLength", 12), ("maxItems", 14), ("minItems", 15)):
        if isinstance(node.get(key), int):
            out += _int(num, node[key])
    out += _str(13, node.get("pattern", ""))
    out += b"".join(_str(19, r) for r in node.get("required") or [])
    out += b"".join(_len(20, _any(e)) for e in node.get("enum") or [])
    extra = node.get("additionalProperties")
    if isinstance(extra, dict):  # AdditionalPropertiesItem{schema = 1 | boolean = 2}
        out += _len(21, _len(1, _schema(extra)))
    elif isinstance(extra, bool):
        out += _len(21, _bool(2, extra) or _varint(2 << 3) + b"\x00")
    if node.get("type"):  # TypeItem{repeated value = 1}
        out += _len(22, _str(1, node["type"]))
    if isinstance(node.get("items"), dict):  # ItemsItem{repeated schema = 1}
        out += _len(23, _len(1, _schema(node["items"])))
    if node.get("properties"):  # Properties{repeated NamedSchema additional_properties = 1}
        named = b"".join(_len(1, _str(1, k) + _len(2, _schema(v))) for k, v in node["properties"].items())
        out += _len(25, named)
    out += b"".join(_named_any(31, k, v) for k, v in node.items() if k.startswith("x-"))
    return out


def _operation(op: dict[str, Any]) -> bytes:
    out = _str(5, op["operationId"])
    out += b"".join(_str(7, c) for c in op.get("consumes") or [])
    for p in op["parameters"]:  # ParametersItem{parameter=1} > Parameter{non_body=2} > {query=3}
        query = _str(2, "query") + _str(4, p["name"]) + _str(6, p["type"]) + _bool(20, True)
        out += _len(8, _len(1, _len(2, _len(3, query))))
    ok = _len(1, _str(1, "200") + _len(2, _len(1, _str(1, "OK"))))  # NamedResponseValue > Response
    out += _len(9, ok)
    out += b"".join(_named_any(13, k, v) for k, v in op.items() if k.startswith("x-"))
    return out


_VERBS = {"get": 2, "put": 3, "post": 4, "delete": 5, "patch": 8}


def document_protobuf() -> bytes:
    return _protobuf(kinds.generation())


@cache
def _protobuf(_generation: int) -> bytes:
    doc = document()
    out = _str(1, doc["swagger"]) + _len(2, _str(1, doc["info"]["title"]) + _str(2, doc["info"]["version"]))
    paths = b""
    for path, item in doc["paths"].items():
        body = b"".join(_len(_VERBS[verb], _operation(op)) for verb, op in item.items())
        paths += _len(2, _str(1, path) + _len(2, body))
    out += _len(8, paths)
    defs = b"".join(_len(1, _str(1, name) + _len(2, _schema(s))) for name, s in doc["definitions"].items())
    out += _len(9, defs)
    return out
