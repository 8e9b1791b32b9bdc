"""Defaulting like the API server: CRD structural defaults, then the LWS mutating webhook."""

from __future__ import annotations

import copy
from typing import Any

from lwsflow.controller.api.defaults import default_object
from lwsflow.controller.api.schema_check import schema_errors, validator
from lwsflow.controller.api.validation import validate_object


def test_lws_webhook_fills_missing_rollout_and_network(lws: dict[str, Any]) -> None:
    before = copy.deepcopy(lws)
    out = default_object(lws)
    assert lws == before, "default_object must not mutate its input"
    spec = out["spec"]
    assert spec["rolloutStrategy"] == {"type": "RollingUpdate", "rollingUpdateConfiguration":
                                       {"partition": 0, "maxUnavailable": 1, "maxSurge": 0}}
    assert spec["networkConfig"] == {"subdomainPolicy": "Shared"}
    assert spec["startupPolicy"] == "LeaderCreated"
    assert spec["leaderWorkerTemplate"]["restartPolicy"] == "RecreateGroupOnPodRestart"
    # structural defaults reach into the pod template too (ContainerPort.protocol defaults to TCP)
    port = spec["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]["ports"][0]
    assert port == {"containerPort": 8080, "protocol": "TCP"}


def test_partial_rolling_update_configuration_gets_crd_sub_defaults(lws: dict[str, Any]) -> None:
    lws["spec"]["rolloutStrategy"] = {"rollingUpdateConfiguration": {"maxSurge": 2}}
    ruc = default_object(lws)["spec"]["rolloutStrategy"]
    assert ruc == {"type": "RollingUpdate",
                   "rollingUpdateConfiguration": {"maxSurge": 2, "maxUnavailable": 1, "partition": 0}}


def test_replicas_and_size_defaults(lws: dict[str, Any]) -> None:
    del lws["spec"]["replicas"]
    del lws["spec"]["leaderWorkerTemplate"]["size"]
    out = default_object(lws)["spec"]
    assert (out["replicas"], out["leaderWorkerTemplate"]["size"]) == (1, 1)


def test_deprecated_default_restart_policy_becomes_none(lws: dict[str, Any]) -> None:
    lws["spec"]["leaderWorkerTemplate"]["restartPolicy"] = "Default"
    assert default_object(lws)["spec"]["leaderWorkerTemplate"]["restartPolicy"] == "None"


def test_explicit_subdomain_policy_kept(lws: dict[str, Any]) -> None:
    lws["spec"]["networkConfig"] = {"subdomainPolicy": "UniquePerReplica"}
    assert default_object(lws)["spec"]["networkConfig"] == {"subdomainPolicy": "UniquePerReplica"}


def test_null_is_defaulted_or_pruned(lws: dict[str, Any]) -> None:
    lws["spec"]["replicas"] = None  # has a default: replaced
    lws["spec"]["leaderWorkerTemplate"]["leaderTemplate"] = None  # no default: pruned
    out = default_object(lws)
    assert out["spec"]["replicas"] == 1 and "leaderTemplate" not in out["spec"]["leaderWorkerTemplate"]
    assert validate_object(lws) == []


def test_ds_defaults_without_lws_webhook(ds: dict[str, Any]) -> None:
    del ds["spec"]["roles"][1]["spec"]["rolloutStrategy"]
    ds["spec"]["placementPolicy"] = {"topology": "zone"}
    out = default_object(ds)
    assert out["spec"]["slices"] == 1
    assert out["spec"]["placementPolicy"] == {"topology": "zone", "type": "None"}
    prefill, decode = out["spec"]["roles"][0]["spec"], out["spec"]["roles"][1]["spec"]
    assert prefill["rolloutStrategy"] == {"type": "RollingUpdate", "rollingUpdateConfiguration":
                                          {"maxSurge": 1, "maxUnavailable": 0, "partition": 0}}
    # the DS webhook adds nothing: a role without a configuration keeps none (planner uses 1/0)
    assert "rolloutStrategy" not in decode
    assert decode["startupPolicy"] == "LeaderCreated" and "networkConfig" not in decode


def test_ds_example_without_rollout_type_needs_defaulting_first(ds: dict[str, Any]) -> None:
    assert "type" not in ds["spec"]["roles"][0]["spec"]["rolloutStrategy"]
    raw = [str(e) for e in schema_errors(ds, "disaggregatedsets")]
    assert "spec.roles[0].spec.rolloutStrategy.type: Required value" in raw
    assert validator("disaggregatedsets").is_valid(default_object(ds))
    assert validate_object(ds) == []


def test_other_kinds_are_copied_untouched() -> None:
    svc = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}}
    out = default_object(svc)
    assert out == svc and out is not svc
