"""The stage gate is not fooled by surge counts, stale conditions or unready groups (table tests)."""

from __future__ import annotations

import pytest

from lwsflow.controller.api import status as apistatus
from lwsflow.controller.rollout import gate
from tests.rollout.rollout_builders import lws, status

CASES = [
    # (replicas, partition, maxSurge, status, stage target groups, passes)
    pytest.param(4, 3, 0, status(4, 4, 1), 1, True, id="stage1_done"),
    pytest.param(4, 3, 0, status(4, 3, 1, available=False), 1, False, id="stage1_group_not_ready"),
    pytest.param(4, 2, 0, status(4, 4, 1), 2, False, id="updated_below_target"),
    pytest.param(4, 3, 0, status(4, 4, 1, observed=0), 1, False, id="generation_not_observed"),
    pytest.param(4, 3, 0, status(4, 4, 1, update_in_progress=True), 1, False, id="stale_update_in_progress"),
    pytest.param(4, 3, 0, status(4, 4, 1, cond_gen=0), 1, False, id="available_for_old_generation"),
    # R=4,S=1,P=2 (§d worked trace): surge group counted in updated; stage of 2 done with 5/5/3.
    pytest.param(4, 2, 1, status(5, 5, 3), 2, True, id="surge_trace_stage_done"),
    pytest.param(4, 2, 1, status(5, 4, 3, available=False), 2, False, id="surge_group_not_ready"),
    # updated 3 = 2 non-burst + 1 surge: must not pass a stage of 3 groups
    pytest.param(4, 1, 1, status(5, 5, 3), 3, False, id="surge_inflates_updated"),
    # §c: R=4,S=2 groups 2-5 updated reads updatedReplicas 4 == spec.replicas while 0-1 are old
    pytest.param(4, 0, 2, status(6, 6, 4), 4, False, id="final_surge_not_reclaimed"),
    pytest.param(4, 0, 0, status(4, 4, 4), 4, True, id="final_equality"),
    pytest.param(4, 0, 0, status(4, 3, 4, available=False), 4, False, id="final_one_unready"),
    pytest.param(4, 0, 0, status(3, 3, 3), 4, False, id="final_group_missing"),
    # GitOps frozen at rest (partition = replicas, issue 4): every group current -> equality holds
    pytest.param(4, 4, 0, status(4, 4, 4), 4, True, id="frozen_at_rest"),
    # a synced template waiting frozen: Available stays True (§c, no group in [P, R)), but nothing
    # is updated, so neither the first stage nor the final equality may pass
    pytest.param(4, 4, 0, status(4, 4, 0), 1, False, id="synced_frozen_stage1"),
    pytest.param(4, 4, 0, status(4, 4, 0), 4, False, id="synced_frozen_final"),
    # frozen at rest with maxSurge 1 and an unready group: a surge group appears (§d) -> not at rest
    pytest.param(4, 4, 1, status(5, 4, 5, available=False), 4, False, id="frozen_surge_at_rest"),
    # a condition without observedGeneration is not "Available for this generation" (the gate once
    # accepted it while status.py did not)
    pytest.param(4, 3, 0, status(4, 4, 1, cond_gen=-1), 1, False, id="available_without_generation"),
]


@pytest.mark.parametrize(("replicas", "partition", "surge", "st", "target", "passes"), CASES)
def test_stage_gate(replicas: int, partition: int, surge: int, st: dict, target: int, passes: bool) -> None:
    obj = lws(replicas=replicas, partition=partition, max_surge=surge, status=st)
    res = gate.lws_stage_gate(obj, target)
    assert res.passed is passes, (res.failing(), res.detail)
    if not passes:
        assert res.failing()
    # the gate composes status.py: its verdict is exactly the predicate's
    want = (apistatus.lws_fully_rolled(obj) if target >= replicas
            else apistatus.lws_stage_complete(obj, replicas - target))
    assert res.passed is want


def test_floor_and_resolution() -> None:
    obj = lws(replicas=10, max_unavailable="25%", max_surge="15%")
    assert gate.max_unavailable(obj) == 2  # percent rounds down
    assert gate.max_surge(obj) == 2  # percent rounds up
    assert gate.floor(obj) == 8
    assert gate.floor(lws(replicas=4)) == 3  # default maxUnavailable 1


def test_ds_gate_per_role() -> None:
    ds = {"metadata": {"generation": 2}, "spec": {"roles": [
        {"name": "prefill", "spec": {"replicas": 3}}, {"name": "decode", "spec": {"replicas": 1}}]},
        "status": {"observedGeneration": 2, "conditions": [
            {"type": "Available", "status": "True", "observedGeneration": 2}],
            "roleStatuses": [{"name": "prefill", "replicas": 3, "readyReplicas": 3, "updatedReplicas": 3},
                             {"name": "decode", "replicas": 2, "readyReplicas": 2, "updatedReplicas": 1}]}}
    res = gate.ds_gate(ds)
    assert not res.passed and res.failing() == ["role:decode"]
    assert res.checks["role:prefill"] and not res.checks["role:decode"]
    ds["status"]["roleStatuses"][1].update(replicas=1, readyReplicas=1, updatedReplicas=1)
    assert gate.ds_gate(ds).passed
