"""``kubectl lwsflow`` and the dashboard read a stored policy through ``problems.stored_spec``: an
invalid one (stored before the CRD's rules) is one line naming the policy, in the user's words."""

from __future__ import annotations

import pytest

from lwsflow.controller.errors import InvalidInput
from lwsflow.controller.policy import problems


def _policy(stages: list[dict]) -> dict:
    return {"metadata": {"name": "chat", "namespace": "team"},
            "spec": {"targetRef": {"kind": "LeaderWorkerSet", "name": "chat"}, "stages": stages}}


def test_a_valid_stored_policy_gives_its_model() -> None:
    spec = problems.stored_spec(_policy([{"groups": 1}, {"groups": "100%"}]))
    assert spec.targetRef.name == "chat" and len(spec.stages) == 2


def test_an_invalid_stored_policy_names_the_policy_and_the_stage_as_the_user_counts() -> None:
    with pytest.raises(InvalidInput) as err:
        problems.stored_spec(_policy([{"groups": 1}, {"groups": "150%"}]))
    text = str(err.value)
    assert text.startswith("rolloutpolicy team/chat: stage 2: groups must be"), text
    assert "150%" in text and "Value error" not in text and "stages.1" not in text
