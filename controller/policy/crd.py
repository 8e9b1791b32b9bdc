"""The RolloutPolicy CRD, generated from the pydantic models (the single definition of its schema).

pydantic's JSON Schema is not a Kubernetes *structural* schema: it uses ``$ref``/``$defs``, ``anyOf``
with ``null`` for optional fields, ``title``s and ``const``. :func:`structural` rewrites it: refs
inlined, optionals become plain optional properties, ``int | str`` becomes
``x-kubernetes-int-or-string`` (keeping its ``maxLength``), numeric ``exclusiveMinimum``/``exclusiveMaximum``
become the OpenAPI 3.0 pair (``minimum`` plus ``exclusiveMinimum: true``), every node gets a ``type``,
and no ``default`` is published (the model applies its own; see ``_without_defaults``).
``rules.attach`` adds the CEL rules (``x-kubernetes-validations``) that refuse an invalid policy at
``kubectl apply``.
``metadata`` is left to the API server.

The generated CRD is shipped twice: ``overlays/controller/crd.yaml`` (what a cluster applies) and
``controller/api/crds/rolloutpolicies.json.gz`` (what the embedded cluster and ``crd_info`` read).
``python -m lwsflow.controller.policy.crd [--check]`` writes them; a test regenerates and compares.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

from lwsflow.controller.api.crd import PACKAGE_DIR, encode_packed, extract_crd
from lwsflow.controller.policy import model as m
from lwsflow.controller.policy import rules

_DROP = ("title", "$defs")

PRINTER_COLUMNS: list[dict[str, Any]] = [
    {"name": "Target", "type": "string", "jsonPath": ".spec.targetRef.name"},
    {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
    {"name": "Stage", "type": "string", "jsonPath": ".status.stageText"},
    {"name": "Stable", "type": "string", "jsonPath": ".status.stableRevision"},
    {"name": "Canary", "type": "string", "jsonPath": ".status.canaryRevision"},
    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
]


def _resolve(node: Any, defs: dict[str, Any]) -> Any:
    if isinstance(node, list):
        return [_resolve(x, defs) for x in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        target = defs[node["$ref"].rsplit("/", 1)[-1]]
        merged = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
        return _resolve(merged, defs)
    return {k: _resolve(v, defs) for k, v in node.items() if k not in _DROP}


def _structural(node: Any) -> Any:
    if isinstance(node, list):
        return [_structural(x) for x in node]
    if not isinstance(node, dict):
        return node
    node = dict(node)
    if node.get("x-lwsflow-number-or-text"):
        # int-or-string would refuse 0.005, number "0.5%": a free-form value the model validates
        out: dict[str, Any] = {"x-kubernetes-preserve-unknown-fields": True}
        if "description" in node:
            out["description"] = node["description"]
        return out
    if node.pop("x-kubernetes-int-or-string", False):
        out = {"x-kubernetes-int-or-string": True, "anyOf": [{"type": "integer"}, {"type": "string"}]}
        for key in ("description", "maxLength"):  # maxLength: bounds the CEL rules' cost estimate
            if key in node:
                out[key] = node[key]
        return out
    if "anyOf" in node:  # X | None: an optional X (absence, not null, is how it is left out)
        options = [o for o in node.pop("anyOf") if o.get("type") != "null"]
        if len(options) != 1:
            raise ValueError(f"cannot make a structural schema of anyOf {options}")
        default = node.pop("default", None)
        merged = {**_structural(options[0]), **{k: v for k, v in node.items()}}
        if default is not None:
            merged["default"] = default
        return _structural(merged)
    for bound, exclusive in (("minimum", "exclusiveMinimum"), ("maximum", "exclusiveMaximum")):
        # JSON Schema 2020 spells an open bound as a number; apiextensions v1 (OpenAPI 3.0) only
        # takes the bound itself plus a boolean, and refuses the number outright
        value = node.get(exclusive)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            node[bound] = value
            node[exclusive] = True
    if "const" in node:
        node["enum"] = [node.pop("const")]
    if "enum" in node and "type" not in node:
        node["type"] = "string"
    if node.get("additionalProperties") is False:
        del node["additionalProperties"]  # structural schemas prune unknown fields instead
    if node.get("type") == "object" and "properties" in node:
        node["properties"] = {k: _structural(v) for k, v in node["properties"].items()}
    if "items" in node:
        node["items"] = _structural(node["items"])
    if node.get("type") == "object" and not node.get("properties") and "additionalProperties" not in node:
        node.setdefault("properties", {})
    if "type" not in node and not node.get("x-kubernetes-preserve-unknown-fields"):
        # a free-form value (``Any``): a structural schema types every node or says it is free-form
        node["x-kubernetes-preserve-unknown-fields"] = True
    return node


def _without_defaults(node: Any) -> Any:
    """The schema with no ``default``: the pydantic model is the one source of defaults. The API server
    would write them into the stored object, where the model reads them as given by the user: a
    ``compare`` of mode ``relative`` would arrive with ``quantile: 0.95``, which the model refuses
    ("quantile is only for mode histogram")."""
    if isinstance(node, list):
        return [_without_defaults(x) for x in node]
    if not isinstance(node, dict):
        return node
    out = {k: v for k, v in node.items() if k != "default"}
    if isinstance(out.get("properties"), dict):
        out["properties"] = {k: _without_defaults(v) for k, v in out["properties"].items()}
    for key in ("items", "additionalProperties", "anyOf"):
        if key in out:
            out[key] = _without_defaults(out[key])
    return out


def structural(schema: dict[str, Any]) -> dict[str, Any]:
    """A Kubernetes structural schema from a pydantic JSON Schema (see module docstring)."""
    out: dict[str, Any] = _without_defaults(_structural(_resolve(schema, schema.get("$defs", {}))))
    return out


def openapi_schema() -> dict[str, Any]:
    """The ``openAPIV3Schema`` of RolloutPolicy."""
    schema = rules.attach(structural(m.RolloutPolicy.model_json_schema(mode="validation")))
    props = schema["properties"]
    props["metadata"] = {"type": "object"}
    props["apiVersion"] = {"type": "string"}
    props["kind"] = {"type": "string"}
    schema["required"] = ["spec"]
    schema["description"] = ("RolloutPolicy: how lwsflow's in-cluster controller stages new templates "
                             "of a LeaderWorkerSet, DisaggregatedSet or P/D LWS pair.")
    return schema


def crd_document() -> dict[str, Any]:
    """The CustomResourceDefinition manifest."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{m.PLURAL}.{m.GROUP}"},
        "spec": {
            "group": m.GROUP,
            "names": {"kind": m.KIND, "listKind": f"{m.KIND}List", "plural": m.PLURAL,
                      "singular": m.SINGULAR, "shortNames": list(m.SHORT_NAMES), "categories": ["lwsflow"]},
            "scope": "Namespaced",
            "versions": [{
                "name": m.VERSION, "served": True, "storage": True,
                "subresources": {"status": {}},
                "additionalPrinterColumns": PRINTER_COLUMNS,
                "schema": {"openAPIV3Schema": openapi_schema()},
            }],
        },
    }


def overlay_path() -> Path:
    return Path(__file__).resolve().parents[2] / "overlays" / "controller" / "crd.yaml"


def packed_path() -> Path:
    return PACKAGE_DIR / f"{m.PLURAL}.json.gz"


class _CrdDumper(yaml.SafeDumper):
    """PyYAML's safe dumper with its own ``str`` representer: importing hera re-registers ``str`` on
    the global SafeRepresenter (literal blocks for multi-line text), which would make the generated
    bytes depend on what the process imported before."""


_CrdDumper.add_representer(str, yaml.representer.SafeRepresenter.represent_str)


def rendered() -> dict[Path, bytes]:
    """The generated files and their bytes."""
    doc = crd_document()
    header = "# Generated by `python -m lwsflow.controller.policy.crd` from controller/policy/model.py.\n"
    text = header + yaml.dump(doc, Dumper=_CrdDumper, sort_keys=False, width=100)
    return {overlay_path(): text.encode(), packed_path(): encode_packed(extract_crd(doc))}


def _write_atomic(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="generate the RolloutPolicy CRD")
    ap.add_argument("--check", action="store_true", help="compare only; exit 1 on drift")
    args = ap.parse_args(argv)
    drift = 0
    for path, data in rendered().items():
        if args.check:
            if not path.is_file() or path.read_bytes() != data:
                print(f"drift: {path}", file=sys.stderr)
                drift += 1
        else:
            _write_atomic(path, data)
            print(f"wrote {path}")
    return 1 if drift else 0


if __name__ == "__main__":
    raise SystemExit(main())
