"""Status predicate tables, including the worked traces of lws-semantics.md sections c and d."""

from __future__ import annotations

from typing import Any

import pytest

from lwsflow.controller.api.status import (
    condition_true,
    ds_fully_rolled,
    ds_roles_ready,
    explain_ds,
    explain_lws,
    get_condition,
    lws_fully_rolled,
    lws_stage_complete,
)

T, F = "True", "False"


def cond(ctype: str, status: str, gen: int = 2, reason: str = "X") -> dict[str, Any]:
    return {"type": ctype, "status": status, "reason": reason, "message": "", "observedGeneration": gen,
            "lastTransitionTime": "2026-01-01T00:00:00Z"}


def lws(replicas: int | None, counts: tuple[int, int, int], *, partition: int | None = None, gen: int = 2,
        observed: int = 2, available: tuple[str, int] | None = (T, 2),
        update_in_progress: tuple[str, int] | None = None) -> dict[str, Any]:
    """An LWS with spec.replicas, status (replicas, ready, updated) and conditions as upstream writes them."""
    spec: dict[str, Any] = {"leaderWorkerTemplate": {"workerTemplate": {}}}
    if replicas is not None:
        spec["replicas"] = replicas
    if partition is not None:
        spec["rolloutStrategy"] = {"type": "RollingUpdate", "rollingUpdateConfiguration": {
            "partition": partition, "maxSurge": 1, "maxUnavailable": 1}}
    conditions = []
    if available:
        conditions.append(cond("Available", available[0], available[1], "AllGroupsReady"))
        conditions.append(cond("Progressing", F if available[0] == T else T, available[1]))
    if update_in_progress:
        conditions.append(cond("UpdateInProgress", *update_in_progress, reason="GroupsUpdating"))
    r, ready, updated = counts
    return {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
            "metadata": {"name": "m", "generation": gen}, "spec": spec,
            "status": {"replicas": r, "readyReplicas": ready, "updatedReplicas": updated,
                       "observedGeneration": observed, "conditions": conditions}}


FULLY_ROLLED = [
    ("steady", lws(4, (4, 4, 4), update_in_progress=(F, 2)), True),
    ("no-update-condition-ever", lws(4, (4, 4, 4)), True),
    ("default-replicas-1", lws(None, (1, 1, 1)), True),
    ("scaled-to-zero", lws(0, (0, 0, 0)), True),
    ("status-not-observed", lws(4, (4, 4, 4), observed=1), False),
    ("available-for-old-generation", lws(4, (4, 4, 4), available=(T, 1)), False),
    ("available-false-reason-stale", lws(4, (4, 4, 4), available=(F, 2)), False),
    ("available-missing", lws(4, (4, 4, 4), available=None), False),
    ("update-in-progress", lws(4, (4, 4, 4), update_in_progress=(T, 2)), False),
    ("surge-lingering", lws(4, (5, 5, 5)), False),
    # R=4, S=2: groups 2-5 updated reads updated == 4 while groups 0-1 are still old
    ("r4-s2-updated-equals-replicas-but-groups-0-1-old", lws(4, (6, 6, 4)), False),
    ("one-unready", lws(4, (4, 3, 4)), False),
    ("partition-held", lws(4, (4, 4, 2), partition=2), False),
]


@pytest.mark.parametrize(("obj", "want"), [c[1:] for c in FULLY_ROLLED], ids=[c[0] for c in FULLY_ROLLED])
def test_lws_fully_rolled(obj: dict[str, Any], want: bool) -> None:
    assert lws_fully_rolled(obj) is want
    assert (explain_lws(obj, 0) == "done") is want  # fully rolled == the final (P=0) stage is done


STAGES = [
    # worked trace of section d: R=4, U=1, S=1, P=2
    ("trace-tick0-surge-created", lws(4, (5, 4, 1), partition=2, available=(F, 2),
                                      update_in_progress=(T, 2)), 2, False),
    ("trace-tick1-window-rolling", lws(4, (5, 3, 3), partition=2, available=(F, 2),
                                       update_in_progress=(T, 2)), 2, False),
    ("trace-done-5-5-3", lws(4, (5, 5, 3), partition=2, update_in_progress=(F, 2)), 2, True),
    # every group updated but one still unready: UpdateInProgress stays True (stale) until Available
    ("stale-update-in-progress", lws(4, (5, 4, 3), partition=2, available=(F, 2),
                                     update_in_progress=(T, 2)), 2, False),
    ("surge-group-unready-though-available", lws(4, (5, 4, 3), partition=2), 2, False),
    ("surge-inflates-updated", lws(4, (5, 5, 2), partition=2), 2, False),
    ("no-surge-stage", lws(4, (4, 4, 2), partition=2), 2, True),
    ("spec-partition-not-yet-lowered", lws(4, (5, 5, 1), partition=3), 2, False),
    ("not-observed", lws(4, (5, 5, 3), partition=2, observed=1), 2, False),
    ("available-from-previous-stage", lws(4, (5, 5, 3), partition=2, available=(T, 1)), 2, False),
    ("final-stage-surge-left", lws(4, (5, 5, 5), partition=0), 0, False),
    ("final-stage-done", lws(4, (4, 4, 4), partition=0), 0, True),
    ("final-stage-r4-s2-fooled-counts", lws(4, (6, 6, 4), partition=0), 0, False),
    ("canary-p-equals-r", lws(4, (5, 5, 1), partition=4), 4, True),
    ("canary-surge-unready", lws(4, (5, 4, 1), partition=4), 4, False),
]


@pytest.mark.parametrize(("obj", "partition", "want"), [c[1:] for c in STAGES], ids=[c[0] for c in STAGES])
def test_lws_stage_complete(obj: dict[str, Any], partition: int, want: bool) -> None:
    assert lws_stage_complete(obj, partition) is want
    assert (explain_lws(obj, partition) == "done") is want


def test_stage_default_partition_is_the_spec_one() -> None:
    assert lws_stage_complete(lws(4, (5, 5, 3), partition=2)) is True
    assert lws_stage_complete(lws(4, (4, 4, 4))) is True  # no rolloutStrategy: partition 0


def test_explain_names_the_differing_counts() -> None:
    text = explain_lws(lws(4, (6, 5, 4), observed=1, available=(T, 1), update_in_progress=(T, 2)))
    assert "observedGeneration 1 != generation 2" in text
    assert "status.replicas 6 != spec.replicas 4 (2 surge groups left)" in text
    assert "readyReplicas 5 of 6" in text
    assert "Available stale (observedGeneration 1)" in text and "UpdateInProgress True" in text
    assert "spec partition 3 != stage partition 2" in explain_lws(lws(4, (4, 4, 1), partition=3), 2)
    assert "Available missing" in explain_lws(lws(4, (4, 4, 4), available=None))


def test_condition_lookup_ignores_reason() -> None:
    obj = lws(4, (4, 4, 4), update_in_progress=(F, 2))
    assert get_condition(obj, "UpdateInProgress")["reason"] == "GroupsUpdating"
    assert not condition_true(obj, "UpdateInProgress")
    assert condition_true(obj, "Available", current=True)
    assert get_condition({"status": {}}, "Available") is None
    assert get_condition({}, "Available") is None


def ds(roles: list[tuple[str, int | None, str]], statuses: list[tuple[str, int, int, int]], *,
       slices: int | None = None, gen: int = 3, observed: int = 3, available: str = T) -> dict[str, Any]:
    """A DS with (name, replicas, scaling mode) roles and (name, replicas, ready, updated) role statuses."""
    spec: dict[str, Any] = {"roles": []}
    for name, replicas, mode in roles:
        role_spec: dict[str, Any] = {"leaderWorkerTemplate": {"workerTemplate": {}}}
        if replicas is not None:
            role_spec["replicas"] = replicas
        spec["roles"].append({"name": name, "scaling": {"mode": mode}, "spec": role_spec})
    if slices is not None:
        spec["slices"] = slices
    return {"apiVersion": "disaggregatedset.x-k8s.io/v1", "kind": "DisaggregatedSet",
            "metadata": {"name": "d", "generation": gen}, "spec": spec,
            "status": {"observedGeneration": observed,
                       "roleStatuses": [{"name": n, "replicas": r, "readyReplicas": rd, "updatedReplicas": u}
                                        for n, r, rd, u in statuses],
                       "conditions": [cond("Available", available, gen, "AllRolesReady")]}}


DS_TABLE = [
    ("all-ready", ds([("prefill", 2, "Static"), ("decode", 1, "Static")],
                     [("prefill", 2, 2, 2), ("decode", 1, 1, 1)]),
     None, {"prefill": True, "decode": True}),
    ("slices-multiply-desired", ds([("prefill", 2, "Static"), ("decode", 1, "Static")],
                                   [("prefill", 4, 4, 4), ("decode", 2, 2, 1)], slices=2),
     None, {"prefill": True, "decode": False}),
    ("old-revision-still-counted", ds([("prefill", 4, "Static"), ("decode", 2, "Static")],
                                      [("prefill", 6, 6, 4), ("decode", 2, 2, 2)]),
     None, {"prefill": False, "decode": True}),
    ("default-replicas-and-missing-status", ds([("prefill", None, "Static"), ("decode", 1, "Static")],
                                               [("prefill", 1, 1, 1)]),
     None, {"prefill": True, "decode": False}),
    ("external-without-scaler", ds([("prefill", 2, "Static"), ("decode", 0, "External")],
                                   [("prefill", 2, 2, 2), ("decode", 3, 3, 3)]),
     None, {"prefill": True, "decode": False}),
    ("external-with-scaler", ds([("prefill", 2, "Static"), ("decode", 0, "External")],
                                [("prefill", 2, 2, 2), ("decode", 3, 3, 3)]),
     {"decode": 3}, {"prefill": True, "decode": True}),
]


@pytest.mark.parametrize(("obj", "external", "want"), [c[1:] for c in DS_TABLE], ids=[c[0] for c in DS_TABLE])
def test_ds_roles_ready(obj: dict[str, Any], external: dict[str, int] | None, want: dict[str, bool]) -> None:
    assert ds_roles_ready(obj, external) == want
    assert ds_fully_rolled(obj, external) is all(want.values())
    assert (explain_ds(obj, external) == "done") is all(want.values())


def test_ds_fully_rolled_needs_observation_and_available() -> None:
    roles, statuses = [("p", 1, "Static"), ("d", 1, "Static")], [("p", 1, 1, 1), ("d", 1, 1, 1)]
    assert ds_fully_rolled(ds(roles, statuses))
    assert not ds_fully_rolled(ds(roles, statuses, observed=2))
    assert not ds_fully_rolled(ds(roles, statuses, available=F))
    text = explain_ds(ds(roles, [("p", 2, 1, 1)], observed=2))
    assert "observedGeneration 2 != generation 3" in text
    assert "role p: replicas/ready/updated 2/1/1 (want 1)" in text and "role d: no roleStatus" in text
