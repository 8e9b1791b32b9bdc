"""The packaged CRD schemas equal a fresh extraction from ../shared and carry what the server needs."""

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
