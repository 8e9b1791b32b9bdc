"""The upstream CRDs' schemas, from the packaged copies in ``controller/api/crds/<plural>.json.gz``.

The upstream CRD files are 1.3 MB of YAML each (mostly the embedded PodTemplateSpec schema), so the
packaged copy is compact JSON, read lazily on first use and cached for the life of the process.
``extract_crd`` is the single definition of what gets packaged. ``scripts/pack_crds.py`` writes the
Gateway API and InferencePool copies from the pinned Go modules (``controller/api/paths.py``) and a
test checks they still equal a fresh extraction. The LWS and DisaggregatedSet copies are the
product's own: they follow LWS main after v0.10.0 (commit 060ab4da), which no served module carries
(the Go module proxy serves v0.9.0 at the newest); a test checks they keep every field of the pinned
v0.9.0 module's CRDs.
"""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import yaml

PACKAGE_DIR = Path(__file__).resolve().parent / "crds"

# The LWS family: packaged copies are lwsflow's own (v0.10+ semantics, see the module docstring).
# plural -> the pinned LWS module's file under config/crd/bases/, or None where v0.9.0 has no such CRD.
CRD_SOURCES: dict[str, str | None] = {
    "leaderworkersets": "leaderworkerset.x-k8s.io_leaderworkersets.yaml",
    "disaggregatedsets": "disaggregatedset.x-k8s.io_disaggregatedsets.yaml",
    "disaggregatedsetrolescalers": None,  # DisaggregatedSetRoleScaler is v0.10+
}

# plural -> upstream file name in the pinned modules (Gateway API v1.6.1 standard channel and
# Gateway API Inference Extension v1.6.0; scripts/upstream/go.mod)
GATEWAY_CRD_SOURCES: dict[str, str] = {
    "inferencepools": "inference.networking.k8s.io_inferencepools.yaml",
    "httproutes": "gateway.networking.k8s.io_httproutes.yaml",
}

# lwsflow's own CRDs, generated from pydantic models (``python -m lwsflow.controller.policy.crd``)
OWN_CRDS: tuple[str, ...] = ("rolloutpolicies",)


def upstream_sources() -> dict[str, Path]:
    """plural -> the upstream CRD file (in the cached pinned modules) its packaged copy is extracted from."""
    from lwsflow.controller.api.paths import gateway_crd

    return {p: gateway_crd(name) for p, name in GATEWAY_CRD_SOURCES.items()}


def lws_module_sources() -> dict[str, Path]:
    """plural -> the pinned LWS module's CRD file, for the LWS-family CRDs that module has."""
    from lwsflow.controller.api.paths import lws_crd_dir

    return {p: lws_crd_dir() / name for p, name in CRD_SOURCES.items() if name is not None}


@dataclass(frozen=True)
class CrdInfo:
    """What lwsflow needs from one CRD: identity, subresources, printer columns and the schema."""

    group: str
    version: str
    kind: str
    list_kind: str
    plural: str
    singular: str
    short_names: tuple[str, ...]
    categories: tuple[str, ...]
    namespaced: bool
    subresources: dict[str, Any]
    printer_columns: tuple[dict[str, Any], ...]
    schema: dict[str, Any]

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"


def extract_crd(crd: dict[str, Any]) -> dict[str, Any]:
    """The packaged form of a CRD document: its storage version's schema plus identity fields."""
    spec = crd["spec"]
    version = next(v for v in spec["versions"] if v.get("storage", True))
    names = spec["names"]
    return {
        "group": spec["group"],
        "version": version["name"],
        "kind": names["kind"],
        "listKind": names.get("listKind", names["kind"] + "List"),
        "plural": names["plural"],
        "singular": names.get("singular", names["kind"].lower()),
        "shortNames": list(names.get("shortNames", [])),
        "categories": list(names.get("categories", [])),
        "scope": spec.get("scope", "Namespaced"),
        "subresources": version.get("subresources", {}),
        "additionalPrinterColumns": version.get("additionalPrinterColumns", []),
        "openAPIV3Schema": version["schema"]["openAPIV3Schema"],
    }


def extract_crd_file(path: Path) -> dict[str, Any]:
    """``extract_crd`` of an upstream CRD YAML file (the C loader when present: the files are big)."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    with path.open("rb") as fh:
        return extract_crd(yaml.load(fh, Loader=loader))


def encode_packed(doc: dict[str, Any]) -> bytes:
    """Deterministic gzip of compact JSON (mtime 0, sorted keys) so re-packing is byte-identical."""
    raw = json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()
    return gzip.compress(raw, compresslevel=9, mtime=0)


@cache
def packed(plural: str) -> dict[str, Any]:
    """The packaged extraction for ``plural`` (KeyError when lwsflow ships no such CRD)."""
    if plural not in CRD_SOURCES and plural not in GATEWAY_CRD_SOURCES and plural not in OWN_CRDS:
        raise KeyError(plural)
    doc: dict[str, Any] = json.loads(gzip.decompress((PACKAGE_DIR / f"{plural}.json.gz").read_bytes()))
    return doc


@cache
def crd_info(plural: str) -> CrdInfo:
    """The typed view of a packaged CRD."""
    d = packed(plural)
    return CrdInfo(
        group=d["group"], version=d["version"], kind=d["kind"], list_kind=d["listKind"],
        plural=d["plural"], singular=d["singular"], short_names=tuple(d["shortNames"]),
        categories=tuple(d.get("categories", ())),
        namespaced=d["scope"] == "Namespaced", subresources=d["subresources"],
        printer_columns=tuple(d["additionalPrinterColumns"]), schema=d["openAPIV3Schema"],
    )


_BY_KIND: dict[tuple[str, str], str] = {
    ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet"): "leaderworkersets",
    ("disaggregatedset.x-k8s.io/v1", "DisaggregatedSet"): "disaggregatedsets",
    ("disaggregatedset.x-k8s.io/v1", "DisaggregatedSetRoleScaler"): "disaggregatedsetrolescalers",
    ("lwsflow.io/v1alpha1", "RolloutPolicy"): "rolloutpolicies",
    ("inference.networking.k8s.io/v1", "InferencePool"): "inferencepools",
    ("gateway.networking.k8s.io/v1", "HTTPRoute"): "httproutes",
}


def plural_for(api_version: str, kind: str) -> str | None:
    """The CRD plural serving ``apiVersion``/``kind``, or None when it is not one of ours."""
    return _BY_KIND.get((api_version, kind))


def crd_for_object(obj: dict[str, Any]) -> CrdInfo | None:
    """The CRD of a manifest, or None for kinds lwsflow has no CRD for (Service, HPA, ...)."""
    plural = plural_for(str(obj.get("apiVersion", "")), str(obj.get("kind", "")))
    return crd_info(plural) if plural else None
