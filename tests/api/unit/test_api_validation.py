"""Mutated upstream manifests are rejected with the exact field path; update rules; unknown fields."""

from __future__ import annotations

import copy
import re
import time
from typing import Any

import pytest

from lwsflow.controller.api.ds_webhook import service_name_length
from lwsflow.controller.api.validation import unknown_fields, validate_object, validate_update
from tests.api.api_examples import DS_SAMPLE, LWS_SAMPLE, example

RUC = "rolloutStrategy.rollingUpdateConfiguration"
EXCL = "leaderworkerset.sigs.k8s.io/exclusive-topology"
SG_EXCL = "leaderworkerset.sigs.k8s.io/subgroup-exclusive-topology"


def put(obj: dict[str, Any], path: str, value: Any) -> None:
    """Set ``a.b[0].c`` (mappings created on the way, a list index == len appends); ``~`` spells a dot
    inside a map key (annotation names); value DELETE removes the entry."""
    parts = [int(p) if p.isdigit() else p.replace("~", ".") for p in re.findall(r"[^.\[\]]+", path)]
    node: Any = obj
    for p in parts[:-1]:
        if isinstance(p, str) and p not in node:
            node[p] = {}
        node = node[p]
    last = parts[-1]
    if value is DELETE:
        del node[last]
    elif isinstance(node, list) and last == len(node):
        node.append(value)
    else:
        node[last] = value


DELETE = object()
Mut = dict[str, Any]

# (id, base example, {path: value}, expected error path, message fragment)
LWS_CASES: list[tuple[str, Mut, str, str]] = [
    ("name-not-dns1035", {"metadata.name": "Bad_Name"}, "metadata.name", "DNS-1035"),
    ("name-starts-with-digit", {"metadata.name": "1lws"}, "metadata.name", "DNS-1035"),
    ("name-too-long", {"metadata.name": "a" * 64}, "metadata.name", "no more than 63"),
    ("name-missing", {"metadata.name": DELETE}, "metadata.name", "Required"),
    ("replicas-negative", {"spec.replicas": -1}, "spec.replicas", "greater than or equal to 0"),
    ("replicas-over-1e6", {"spec.replicas": 1_000_001}, "spec.replicas", "less than or equal to 1000000"),
    ("replicas-wrong-type", {"spec.replicas": "3"}, "spec.replicas", "of type integer"),
    ("replicas-times-size-over-int32", {"spec.replicas": 1_000_000, "spec.leaderWorkerTemplate.size": 3000},
     "spec.replicas", "must not exceed 2147483647"),
    ("size-zero", {"spec.leaderWorkerTemplate.size": 0}, "spec.leaderWorkerTemplate.size",
     "greater than or equal to 1"),
    ("size-over-int32", {"spec.leaderWorkerTemplate.size": 2**31, "spec.replicas": 0},
     "spec.leaderWorkerTemplate.size", "int32"),
    ("partition-negative", {f"spec.{RUC}.partition": -1}, f"spec.{RUC}.partition", "greater than or equal"),
    ("unavailable-over-100pct", {f"spec.{RUC}.maxUnavailable": "150%"}, f"spec.{RUC}.maxUnavailable",
     "greater than 100%"),
    ("surge-not-a-percent", {f"spec.{RUC}.maxSurge": "two"}, f"spec.{RUC}.maxSurge", "percent"),
    ("surge-digits-without-percent", {f"spec.{RUC}.maxSurge": "2"}, f"spec.{RUC}.maxSurge", "percent"),
    ("surge-negative", {f"spec.{RUC}.maxSurge": -1}, f"spec.{RUC}.maxSurge", "greater than or equal to 0"),
    ("surge-float", {f"spec.{RUC}.maxSurge": 1.5}, f"spec.{RUC}.maxSurge", "integer or a string"),
    ("surge-and-unavailable-zero", {f"spec.{RUC}.maxSurge": 0, f"spec.{RUC}.maxUnavailable": 0},
     f"spec.{RUC}.maxUnavailable", "must not be 0 when maxSurge is 0"),
    ("both-resolve-to-zero", {f"spec.{RUC}.maxSurge": "0%", f"spec.{RUC}.maxUnavailable": "10%"},
     f"spec.{RUC}.maxUnavailable", "must not be 0"),  # 10% of 3 rounds down to 0
    ("rollout-type", {"spec.rolloutStrategy.type": "Recreate"}, "spec.rolloutStrategy.type",
     'supported values: "RollingUpdate"'),
    ("restart-policy", {"spec.leaderWorkerTemplate.restartPolicy": "Always"},
     "spec.leaderWorkerTemplate.restartPolicy", "Unsupported value"),
    ("startup-policy", {"spec.startupPolicy": "Eager"}, "spec.startupPolicy", "Unsupported value"),
    ("subdomain-policy", {"spec.networkConfig.subdomainPolicy": "PerPod"},
     "spec.networkConfig.subdomainPolicy", "Unsupported value"),
    ("subgroup-size-zero", {"spec.leaderWorkerTemplate.subGroupPolicy": {"subGroupSize": 0}},
     "spec.leaderWorkerTemplate.SubGroupPolicy.subGroupSize", "equal or greater than 1"),
    # size 1: size - 1 (0) is divisible, so "larger than size" is the one rule upstream reports
    ("subgroup-larger-than-size", {"spec.leaderWorkerTemplate.size": 1,
                                   "spec.leaderWorkerTemplate.subGroupPolicy": {"subGroupSize": 2}},
     "spec.leaderWorkerTemplate.SubGroupPolicy.subGroupSize", "larger than size"),
    ("subgroup-not-dividing", {"spec.leaderWorkerTemplate.size": 6,
                               "spec.leaderWorkerTemplate.subGroupPolicy": {"subGroupSize": 4}},
     "spec.leaderWorkerTemplate.SubGroupPolicy.subGroupSize", "divisible"),
    ("subgroup-leader-excluded", {"spec.leaderWorkerTemplate.subGroupPolicy":
                                  {"subGroupSize": 2, "subGroupPolicyType": "LeaderExcluded"}},
     "spec.leaderWorkerTemplate.SubGroupPolicy.subGroupSize", "LeaderExcluded"),
    ("subgroup-size-missing",
     {"spec.leaderWorkerTemplate.subGroupPolicy": {"subGroupPolicyType": "LeaderWorker"}},
     "spec.leaderWorkerTemplate.SubGroupPolicy.subGroupSize", "Required"),
    ("subgroup-topology-without-policy", {f"metadata.annotations.{SG_EXCL.replace('.', '~')}": "zone"},
     f"metadata.annotations[{SG_EXCL}]", "requires"),
    ("worker-template-missing", {"spec.leaderWorkerTemplate.workerTemplate": DELETE},
     "spec.leaderWorkerTemplate.workerTemplate", "Required"),
    ("container-name-missing", {"spec.leaderWorkerTemplate.workerTemplate.spec.containers[0].name": DELETE},
     "spec.leaderWorkerTemplate.workerTemplate.spec.containers[0].name", "Required"),
    ("duplicate-container", {"spec.leaderWorkerTemplate.workerTemplate.spec.containers[1]":
                             {"name": "nginx", "image": "x"}},
     "spec.leaderWorkerTemplate.workerTemplate.spec.containers[1]", "Duplicate"),
    ("bad-quantity",
     {"spec.leaderWorkerTemplate.workerTemplate.spec.containers[0].resources.limits.cpu": "lots"},
     "spec.leaderWorkerTemplate.workerTemplate.spec.containers[0].resources.limits.cpu", "should match"),
    ("group-identity", {"spec.groupIdentity": "Random"}, "spec.groupIdentity", "Ordinal"),
    ("max-group-restarts", {"spec.leaderWorkerTemplate.maxGroupRestarts": -1},
     "spec.leaderWorkerTemplate.maxGroupRestarts", ">= 0"),
]

ROLE0 = "spec.roles[0]"
DS_CASES: list[tuple[str, Mut, str, str]] = [
    ("ds-name", {"metadata.name": "Disagg"}, "metadata.name", "DNS-1035"),
    ("role-name-not-dns-label", {f"{ROLE0}.name": "Prefill"}, f"{ROLE0}.name", "should match"),
    ("one-role", {"spec.roles[2]": DELETE, "spec.roles[1]": DELETE}, "spec.roles", "at least 2"),
    ("duplicate-role", {"spec.roles[1].name": "prefill"}, "spec.roles[1]", "Duplicate"),
    ("roles-missing", {"spec.roles": DELETE}, "spec.roles", "Required"),
    ("role-partition", {f"{ROLE0}.spec.{RUC}.partition": 1}, f"{ROLE0}.spec.{RUC}.partition",
     "not supported in a DisaggregatedSet role"),
    ("role-rollout-type", {f"{ROLE0}.spec.rolloutStrategy.type": "Recreate"},
     f"{ROLE0}.spec.rolloutStrategy.type", "Unsupported value"),
    ("role-surge-unavailable-zero", {f"{ROLE0}.spec.{RUC}.maxSurge": 0}, f"{ROLE0}.spec.{RUC}.maxUnavailable",
     "must not both be 0"),
    ("role-unavailable-pct", {f"{ROLE0}.spec.{RUC}.maxUnavailable": "101%"},
     f"{ROLE0}.spec.{RUC}.maxUnavailable", "greater than 100%"),
    ("role-size-zero", {f"{ROLE0}.spec.leaderWorkerTemplate.size": 0},
     f"{ROLE0}.spec.leaderWorkerTemplate.size", "greater than or equal to 1"),
    ("mixed-zero-replicas", {"spec.roles[1].spec.replicas": 0}, "spec",
     "replicas must be zero for all non-External roles or non-zero"),
    ("external-with-slices", {f"{ROLE0}.scaling.mode": "External", "spec.slices": 2},
     f"{ROLE0}.scaling.mode", "slices > 1"),
    ("scaling-mode", {f"{ROLE0}.scaling.mode": "Auto"}, f"{ROLE0}.scaling.mode", "Unsupported value"),
    ("placement-needs-topology", {"spec.placementPolicy.type": "ExclusiveSlice"},
     "spec.placementPolicy.topology", "Required"),
    ("placement-forbids-annotation", {"spec.placementPolicy": {"type": "ExclusiveTopology", "topology": "z"},
                                      f"{ROLE0}.metadata.annotations.{EXCL.replace('.', '~')}": "zone"},
     f"{ROLE0}.metadata.annotations[{EXCL}]", "Forbidden"),
    ("service-name-too-long", {"metadata.name": "d" * 39, f"{ROLE0}.name": "p" * 9},
     f"{ROLE0}.name", "64 characters"),
    ("slices-zero", {"spec.slices": 0}, "spec.slices", "greater than or equal to 1"),
    ("slices-over-100", {"spec.slices": 101}, "spec.slices", "less than or equal to 100"),
]


def _mutate(base: dict[str, Any], mutation: Mut) -> dict[str, Any]:
    obj = copy.deepcopy(base)
    for path, value in mutation.items():
        put(obj, path, value)
    return obj


def _check(base_name: str, mutation: Mut, path: str, fragment: str) -> None:
    base = example(base_name)
    assert validate_object(base) == []
    errors = validate_object(_mutate(base, mutation))
    assert [e.path for e in errors] == [path], errors
    assert fragment in errors[0].message, errors[0]


@pytest.mark.parametrize(("mutation", "path", "fragment"), [c[1:] for c in LWS_CASES],
                         ids=[c[0] for c in LWS_CASES])
def test_lws_rule(mutation: Mut, path: str, fragment: str) -> None:
    _check(LWS_SAMPLE, mutation, path, fragment)


@pytest.mark.parametrize(("mutation", "path", "fragment"), [c[1:] for c in DS_CASES],
                         ids=[c[0] for c in DS_CASES])
def test_ds_rule(mutation: Mut, path: str, fragment: str) -> None:
    _check(DS_SAMPLE, mutation, path, fragment)


@pytest.mark.parametrize("mutation", [
    {"spec.replicas": 0, f"spec.{RUC}.maxSurge": 0, f"spec.{RUC}.maxUnavailable": 0},  # R=0 exempt
    {f"spec.{RUC}.maxSurge": "100%", f"spec.{RUC}.maxUnavailable": 0},
    {"spec.leaderWorkerTemplate.subGroupPolicy": {"subGroupSize": 3}},  # size-1 divisible
    {"spec.leaderWorkerTemplate.size": 5, "spec.leaderWorkerTemplate.subGroupPolicy":
        {"subGroupSize": 2, "subGroupPolicyType": "LeaderExcluded"}},
    {"spec.leaderWorkerTemplate.subGroupPolicy": {"subGroupSize": 2},
     f"metadata.annotations.{SG_EXCL.replace('.', '~')}": "zone"},
    {f"spec.{RUC}.partition": 99},  # no upper bound: it freezes every group
    {"metadata.name": "a" * 63},
], ids=["zero-replicas", "surge-only", "subgroup-size-minus-one", "leader-excluded-ok",
        "subgroup-topology-ok", "partition-above-replicas", "name-63"])
def test_lws_boundaries_accepted(mutation: Mut) -> None:
    assert validate_object(_mutate(example(LWS_SAMPLE), mutation)) == []


@pytest.mark.parametrize("mutation", [
    {"spec.roles[0].spec.replicas": 0, "spec.roles[1].spec.replicas": 0, "spec.roles[2].spec.replicas": 0},
    {f"{ROLE0}.scaling.mode": "External", f"{ROLE0}.spec.replicas": 0},  # External is outside the CEL rule
    {"spec.placementPolicy": {"type": "ExclusiveSlice", "topology": "zone"}, "spec.slices": 3},
    {"metadata.name": "d" * 38, f"{ROLE0}.name": "p" * 9},  # exactly 63
    {f"{ROLE0}.spec.rolloutStrategy": DELETE},  # planner default applies, no both-zero check
], ids=["all-zero", "external-zero", "placement-ok", "service-name-63", "no-rollout-config"])
def test_ds_boundaries_accepted(mutation: Mut) -> None:
    assert validate_object(_mutate(example(DS_SAMPLE), mutation)) == []


def test_service_name_length_counts_slice_digits() -> None:
    assert service_name_length("ds", "decode", 1) == 2 + 6 + 15 + 1
    assert service_name_length("ds", "decode", 11) == 2 + 6 + 15 + 2


def test_every_error_is_reported_not_just_the_first(lws: dict[str, Any]) -> None:
    bad = _mutate(lws, {"metadata.name": "X", "spec.leaderWorkerTemplate.size": 0,
                        f"spec.{RUC}.partition": -2})
    assert [e.path for e in validate_object(bad)] == [
        "metadata.name", "spec.leaderWorkerTemplate.size", f"spec.{RUC}.partition"]


def test_non_objects_and_other_kinds() -> None:
    assert [e.path for e in validate_object({"apiVersion": "v1", "kind": "Service"})] == ["kind"]
    assert validate_object([])[0].message.startswith("an object must be a mapping")  # type: ignore[arg-type]
    scaler = {"apiVersion": "disaggregatedset.x-k8s.io/v1", "kind": "DisaggregatedSetRoleScaler",
              "metadata": {"name": "ds-prefill"}, "spec": {"replicas": -1}}
    assert [str(e) for e in validate_object(scaler)] == [
        "spec.replicas: Invalid value: -1: must be greater than or equal to 0"]


# -- updates ---------------------------------------------------------------------------------------

def test_subgroup_policy_is_immutable(lws: dict[str, Any]) -> None:
    with_sg = _mutate(lws, {"spec.leaderWorkerTemplate.subGroupPolicy": {"subGroupSize": 2}})
    changed = _mutate(lws, {"spec.leaderWorkerTemplate.subGroupPolicy": {"subGroupSize": 4}})
    assert validate_update(with_sg, with_sg) == []
    for old, new in ((lws, with_sg), (with_sg, lws), (with_sg, changed)):
        assert [e.path for e in validate_update(old, new)] == ["spec.leaderWorkerTemplate.subGroupPolicy"]
    # defaulting makes an explicit default type equal to an omitted one
    explicit = _mutate(with_sg,
                       {"spec.leaderWorkerTemplate.subGroupPolicy.subGroupPolicyType": "LeaderWorker"})
    assert validate_update(with_sg, explicit) == []


def test_subdomain_policy_cannot_be_nulled(lws: dict[str, Any]) -> None:
    old = _mutate(lws, {"spec.networkConfig": {"subdomainPolicy": "UniquePerReplica"}})
    for nulled in ({"spec.networkConfig": None}, {"spec.networkConfig.subdomainPolicy": None}):
        errs = validate_update(old, _mutate(lws, nulled))
        assert [e.path for e in errs] == ["spec.networkConfig.subdomainPolicy"]
    assert validate_update(old, lws) == []  # omitted: the webhook defaults it to Shared
    assert validate_update(old, _mutate(lws, {"spec.networkConfig.subdomainPolicy": "Shared"})) == []
    assert [e.path for e in validate_update(old, example(DS_SAMPLE))] == ["kind"]


# -- unknown fields --------------------------------------------------------------------------------

def test_unknown_fields_found_everywhere_but_preserved_and_v1_fields(lws: dict[str, Any],
                                                                     ds: dict[str, Any]) -> None:
    bad = _mutate(lws, {"spec.replica": 3, "metadata.labelz": {}, "status.readyReplica": 1,
                        "spec.leaderWorkerTemplate.workerTemplate.spec.containers[0].imagePullPolcy": "x",
                        "spec.groupIdentity": "Ordinal"})
    assert sorted(unknown_fields(bad)) == [
        "metadata.labelz", "spec.leaderWorkerTemplate.workerTemplate.spec.containers[0].imagePullPolcy",
        "spec.replica", "status.readyReplica"]
    assert sorted(unknown_fields(bad, include_templates=False)) == [
        "metadata.labelz", "spec.replica", "status.readyReplica"]
    ds_bad = _mutate(ds, {f"{ROLE0}.spec.leaderWorkerTemplate.maxGroupRestarts": 2, f"{ROLE0}.replicas": 1})
    assert unknown_fields(ds_bad) == [f"{ROLE0}.replicas"]
    # annotations / labels maps take any key
    assert unknown_fields(_mutate(lws, {"metadata.annotations": {"any/thing": "x"}})) == []


def test_validation_is_fast_once_warm(lws: dict[str, Any], ds: dict[str, Any]) -> None:
    # not a benchmark (bench/api_validate.py is): only guards against losing the compiled-validator cache
    validate_object(lws)
    start = time.perf_counter()
    for _ in range(20):
        validate_object(ds)
    assert (time.perf_counter() - start) / 20 < 0.1
