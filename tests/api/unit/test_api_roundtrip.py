"""Every upstream LWS/DS example loads into the typed model, dumps back equal, and validates."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from lwsflow.controller.api import common
from lwsflow.controller.api import ds as ds_mod
from lwsflow.controller.api import lws as lws_mod
from lwsflow.controller.api.common import ApiModel
from lwsflow.controller.api.ds import DisaggregatedSet
from lwsflow.controller.api.lws import LeaderWorkerSet
from lwsflow.controller.api.objects import parse
from lwsflow.controller.api.validation import unknown_fields, validate_object
from lwsflow.controller.errors import InvalidInput
from tests.api.api_examples import upstream_objects

EXAMPLES = upstream_objects()
IDS = [f"{name}:{d['metadata']['name']}" for name, d in EXAMPLES]


def test_examples_cover_both_kinds() -> None:
    kinds = [d["kind"] for _, d in EXAMPLES]
    assert kinds.count("LeaderWorkerSet") >= 10 and kinds.count("DisaggregatedSet") == 2


@pytest.mark.parametrize(("name", "doc"), EXAMPLES, ids=IDS)
def test_round_trip_is_lossless(name: str, doc: dict[str, Any]) -> None:
    model = parse(doc)
    assert isinstance(model, LeaderWorkerSet if doc["kind"] == "LeaderWorkerSet" else DisaggregatedSet)
    assert model.model_dump(by_alias=True, exclude_unset=True) == doc
    assert model.to_dict() == doc


@pytest.mark.parametrize(("name", "doc"), EXAMPLES, ids=IDS)
def test_upstream_examples_validate(name: str, doc: dict[str, Any]) -> None:
    assert validate_object(doc) == []
    assert unknown_fields(doc) == []


def test_typed_access(lws: dict[str, Any], ds: dict[str, Any]) -> None:
    m = parse(lws)
    assert isinstance(m, LeaderWorkerSet)
    assert (m.spec.replicas, m.spec.leader_worker_template.size) == (3, 4)
    assert m.spec.leader_worker_template.worker_template["spec"]["containers"][0]["name"] == "nginx"
    d = parse(ds)
    assert isinstance(d, DisaggregatedSet)
    assert [r.name for r in d.spec.roles] == ["prefill", "decode", "encode"]
    assert d.spec.role("decode").spec.resolved_replicas() == 2
    assert d.spec.resolved_slices() == 1


def test_v1_fields_accepted_not_required(lws: dict[str, Any]) -> None:
    lws["spec"]["groupIdentity"] = "Hash"
    lws["spec"]["leaderWorkerTemplate"]["maxGroupRestarts"] = 3
    lws["spec"]["leaderWorkerTemplate"]["restartBackoff"] = "30s"
    m = parse(lws)
    assert m.spec.group_identity == "Hash" and m.spec.leader_worker_template.max_group_restarts == 3
    assert m.to_dict() == lws
    assert validate_object(lws) == [] and unknown_fields(lws) == []
    lws["spec"]["groupIdentity"] = "Random"
    with pytest.raises(InvalidInput) as exc:
        parse(lws)
    assert exc.value.field == "spec.groupIdentity"
    assert [e.path for e in validate_object(lws)] == ["spec.groupIdentity"]


def test_unknown_extra_keys_survive_round_trip(lws: dict[str, Any]) -> None:
    lws["spec"]["futureField"] = {"a": 1}
    assert parse(lws).to_dict() == lws


def test_parse_rejects_wrong_kind_and_types(lws: dict[str, Any]) -> None:
    with pytest.raises(InvalidInput, match="not a LeaderWorkerSet or DisaggregatedSet"):
        parse({"apiVersion": "v1", "kind": "Service"})
    lws["spec"]["leaderWorkerTemplate"]["size"] = "4"  # strict: no silent "4" -> 4
    with pytest.raises(InvalidInput) as exc:
        parse(lws)
    assert exc.value.field == "spec.leaderWorkerTemplate.size"


def _lws_with(replicas: int, surge: Any = None, unavailable: Any = None) -> LeaderWorkerSet:
    ruc = {k: v for k, v in (("maxSurge", surge), ("maxUnavailable", unavailable)) if v is not None}
    spec: dict[str, Any] = {"replicas": replicas, "leaderWorkerTemplate": {"workerTemplate": {}}}
    if ruc:
        spec["rolloutStrategy"] = {"type": "RollingUpdate", "rollingUpdateConfiguration": ruc}
    return LeaderWorkerSet.model_validate({"metadata": {"name": "x"}, "spec": spec})


@pytest.mark.parametrize(("replicas", "surge", "unavailable", "want"), [
    (4, None, None, (0, 1)),        # webhook defaults: surge 0, unavailable 1
    (4, "50%", "50%", (2, 2)),
    (5, "30%", "30%", (2, 1)),      # 1.5: surge rounds up, unavailable rounds down
    (10, "29%", "29%", (3, 2)),     # integer arithmetic: no 2.9000000000000004 surprises
    (3, 5, 0, (3, 0)),              # surge capped at replicas
    (3, "100%", 2, (3, 2)),
    (0, "50%", "50%", (0, 0)),
])
def test_resolved_budgets(replicas: int, surge: Any, unavailable: Any, want: tuple[int, int]) -> None:
    spec = _lws_with(replicas, surge, unavailable).spec
    assert (spec.resolved_max_surge(), spec.resolved_max_unavailable()) == want


@pytest.mark.parametrize(("ruc", "replicas", "want"), [
    (None, 4, (1, 0)),                                   # no configuration: DS planner default
    ({"maxSurge": 2}, 4, (2, 1)),                        # CRD default maxUnavailable 1 kicks in
    ({"maxSurge": 1, "maxUnavailable": 0}, 4, (1, 0)),
    ({"maxSurge": 0, "maxUnavailable": 0}, 4, (1, 0)),
    ({"maxSurge": "25%", "maxUnavailable": "50%"}, 6, (2, 3)),
])
def test_ds_planner_budget(ds: dict[str, Any], ruc: Any, replicas: int, want: tuple[int, int]) -> None:
    role = ds["spec"]["roles"][0]["spec"]
    role["replicas"] = replicas
    if ruc is None:
        role.pop("rolloutStrategy")
    else:
        role["rolloutStrategy"] = {"rollingUpdateConfiguration": ruc}
    model = parse(ds)
    assert isinstance(model, DisaggregatedSet)
    assert model.spec.roles[0].planner_budget() == want


def _models() -> list[type[BaseModel]]:
    out = []
    for module in (common, lws_mod, ds_mod):
        out += [v for v in vars(module).values()
                if isinstance(v, type) and issubclass(v, ApiModel) and v is not ApiModel]
    return out


@pytest.mark.parametrize("model", _models(), ids=lambda m: m.__name__)
def test_every_field_is_documented_and_camel_cased(model: type[BaseModel]) -> None:
    assert model.__doc__
    for name, field in model.model_fields.items():
        assert field.description, f"{model.__name__}.{name} has no description"
        assert field.alias and "_" not in field.alias


def test_role_scaler_model() -> None:
    doc = {"apiVersion": "disaggregatedset.x-k8s.io/v1", "kind": "DisaggregatedSetRoleScaler",
           "metadata": {"name": "ds-decode"}, "spec": {"replicas": 3},
           "status": {"replicas": 3, "selector": "a=b"}}
    m = ds_mod.DisaggregatedSetRoleScaler.model_validate(doc)
    assert m.spec.replicas == 3 and m.to_dict() == doc


def test_v1_extension_names_match_whole_path(lws: dict[str, Any]) -> None:
    # a key that only starts like a v1 field (here with a trailing newline) is still unknown
    lws["spec"]["groupIdentity\n"] = "Hash"
    assert unknown_fields(lws) == ["spec.groupIdentity\n"]
