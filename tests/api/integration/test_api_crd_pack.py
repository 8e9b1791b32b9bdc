"""The packaged CRD schemas match the pinned upstream modules and carry what the server needs.

Gateway API and InferencePool: the packaged copy equals a fresh extraction from the pinned module.
LWS and DisaggregatedSet: the packaged copies are the product's own (LWS main after v0.10.0; the Go
module proxy serves v0.9.0 at the newest), so they are checked to keep the identity and every field of
the pinned v0.9.0 module's CRDs; DisaggregatedSetRoleScaler is v0.10+ and has no v0.9.0 CRD.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from lwsflow.controller.api import cel, crd
from lwsflow.controller.api.paths import repo_root


@pytest.mark.parametrize("plural", sorted(crd.upstream_sources()))
def test_packaged_copy_equals_fresh_extraction(plural: str) -> None:
    fresh = crd.extract_crd_file(crd.upstream_sources()[plural])
    assert crd.packed(plural) == fresh
    # byte-identical too, so scripts/pack_crds.py --check and a re-pack never produce a diff
    assert (crd.PACKAGE_DIR / f"{plural}.json.gz").read_bytes() == crd.encode_packed(fresh)


def _fields(schema: dict, path: str = "") -> set[str]:
    """Every property path of a schema (``spec.roles[].name``), array items spelled ``[]``."""
    out = set()
    for name, sub in (schema.get("properties") or {}).items():
        out |= {f"{path}.{name}".lstrip(".")} | _fields(sub, f"{path}.{name}")
    if isinstance(schema.get("items"), dict):
        out |= _fields(schema["items"], f"{path}[]")
    if isinstance(schema.get("additionalProperties"), dict):
        out |= _fields(schema["additionalProperties"], f"{path}{{}}")
    return out


@pytest.mark.parametrize("plural", sorted(crd.lws_module_sources()))
def test_own_lws_copy_keeps_everything_the_pinned_module_has(plural: str) -> None:
    # needs only sigs.k8s.io/lws v0.9.0 (scripts/upstream/go.mod); the packaged copy follows v0.10+
    old = crd.extract_crd_file(crd.lws_module_sources()[plural])
    own = crd.packed(plural)
    assert {k: own[k] for k in ("group", "version", "kind", "plural", "scope", "subresources")} == \
        {k: old[k] for k in ("group", "version", "kind", "plural", "scope", "subresources")}
    missing = _fields(old["openAPIV3Schema"]) - _fields(own["openAPIV3Schema"])
    assert not missing, sorted(missing)[:20]
    if plural == "disaggregatedsets":  # v0.10+ fields the packaged copy has on top of v0.9.0's
        added = _fields(own["openAPIV3Schema"]) - _fields(old["openAPIV3Schema"])
        assert {"spec.slices", "spec.placementPolicy", "spec.roles[].scaling"} <= added


def test_role_scaler_is_the_products_own() -> None:
    # DisaggregatedSetRoleScaler came with LWS v0.10; the pinned v0.9.0 module has no such CRD
    assert crd.CRD_SOURCES["disaggregatedsetrolescalers"] is None
    assert not any("rolescaler" in p.name for p in crd.lws_module_sources().values())
    assert crd.crd_info("disaggregatedsetrolescalers").kind == "DisaggregatedSetRoleScaler"


def test_lws_identity_subresources_and_columns() -> None:
    info = crd.crd_info("leaderworkersets")
    assert (info.api_version, info.kind, info.short_names) == ("leaderworkerset.x-k8s.io/v1",
                                                              "LeaderWorkerSet", ("lws",))
    assert info.subresources["scale"] == {"labelSelectorPath": ".status.hpaPodSelector",
                                          "specReplicasPath": ".spec.replicas",
                                          "statusReplicasPath": ".status.replicas"}
    assert [c["name"] for c in info.printer_columns] == ["Ready", "Desired", "Up-to-date", "Age"]
    assert "leaderWorkerTemplate" in info.schema["properties"]["spec"]["properties"]


def test_ds_has_status_but_no_scale_and_no_columns() -> None:
    info = crd.crd_info("disaggregatedsets")
    assert info.subresources == {"status": {}}
    assert info.printer_columns == ()
    assert crd.crd_info("disaggregatedsetrolescalers").subresources["scale"]["labelSelectorPath"] == \
        ".status.selector"


def test_object_lookup() -> None:
    assert crd.crd_for_object({"apiVersion": "disaggregatedset.x-k8s.io/v1", "kind": "DisaggregatedSet"})
    assert crd.crd_for_object({"apiVersion": "leaderworkerset.x-k8s.io/v1alpha1",
                               "kind": "LeaderWorkerSet"}) is None
    assert crd.crd_for_object({"apiVersion": "v1", "kind": "Service"}) is None
    with pytest.raises(KeyError):
        crd.packed("pods")


def _rules(schema: dict) -> list[str]:
    out = [r["rule"] for r in schema.get("x-kubernetes-validations") or []]
    subs = [*(schema.get("properties") or {}).values(), schema.get("items"),
            schema.get("additionalProperties")]
    return out + [r for s in subs if isinstance(s, dict) for r in _rules(s)]


@pytest.mark.parametrize("plural", sorted(crd.CRD_SOURCES))
def test_every_cel_rule_compiles(plural: str) -> None:
    # an upstream bump that adds a rule the interpreter cannot compile must fail here, not at apply time
    rules = _rules(crd.crd_info(plural).schema)
    for rule in rules:
        assert cel.holds(rule, {}) is not None  # compiles (an evaluation error on {} is fine)
        cel._program(rule)
    if plural == "httproutes":
        assert len(rules) >= 80, len(rules)  # the Gateway API v1.6.1 route's rules, list items included


def test_pack_script_check_mode_reports_no_drift() -> None:
    proc = subprocess.run([sys.executable, str(repo_root() / "scripts" / "pack_crds.py"), "--check"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
