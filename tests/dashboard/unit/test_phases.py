"""One phase vocabulary: the PolicyPhase enum, the CRD's ``status.phase`` enum and the dashboard's
ranking and buttons name the same phases, and a status written to the cluster holds plain strings."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from lwsflow.controller.api.phases import ConditionType, PolicyAction, PolicyPhase
from lwsflow.controller.policy import actions as policy_actions
from lwsflow.controller.policy import crd
from lwsflow.controller.policy import status as pstatus
from lwsflow.controller.policy.model import PHASES, RolloutPolicySpec, RolloutPolicyStatus
from lwsflow.dashboard import pages, views


def _crd_phases(doc: dict[str, Any]) -> list[str]:
    version = doc["spec"]["versions"][0]
    return list(version["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]["phase"]["enum"])


def test_enum_crd_and_dashboard_name_the_same_phases() -> None:
    values = [p.value for p in PolicyPhase]
    assert list(PHASES) == values
    assert _crd_phases(crd.crd_document()) == values  # generated from the enum, in its order
    shipped = yaml.safe_load(crd.overlay_path().read_text())
    assert _crd_phases(shipped) == values  # what a cluster applies
    assert set(views._RANK) == set(PolicyPhase)  # every phase has its place in the overview
    assert set(views.FINAL_BAD) <= set(PolicyPhase)


def test_every_action_has_a_button_rule_and_an_implementation() -> None:
    assert set(policy_actions.ACTIONS) == set(PolicyAction) == set(policy_actions.BY_NAME)
    assert set(pages.ENABLED) == set(PolicyAction) == set(pages.CONFIRM)
    assert all(set(phases) <= set(PolicyPhase) for phases in pages.ENABLED.values())


def test_status_model_refuses_an_unknown_phase_and_keeps_plain_strings() -> None:
    assert type(RolloutPolicyStatus().phase) is str  # the exact type the wire carries
    assert type(RolloutPolicyStatus(phase="Paused").phase) is str
    with pytest.raises(ValidationError, match="phase"):
        RolloutPolicyStatus(phase="Sleeping")  # type: ignore[arg-type]


def test_derived_status_holds_plain_strings() -> None:
    """The simulator's schema check and the YAML dumpers match ``str`` exactly: the status the
    controller writes carries the enum's values, not its members."""
    spec = RolloutPolicySpec.model_validate({"targetRef": {"kind": "LeaderWorkerSet", "name": "m"},
                                             "stages": [{"groups": 1}, {"groups": "100%"}]})
    lws = {"metadata": {"name": "m", "annotations": {}}, "spec": {"leaderWorkerTemplate": {}}}
    new = pstatus.compute(spec, lws, 1, {}, "2026-01-01T00:00:00Z")
    assert new["phase"] == PolicyPhase.IDLE and type(new["phase"]) is str
    assert [c["type"] for c in new["conditions"]] == [ConditionType.PROGRESSING, ConditionType.READY]
    assert all(type(c["type"]) is str and type(c["reason"]) is str for c in new["conditions"])
    yaml.safe_dump(new)  # SafeDumper refuses a str subclass
