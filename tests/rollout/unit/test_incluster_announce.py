"""What a policy's status change announces (``incluster/announce.py``): Events and webhook notes."""

from __future__ import annotations

import pytest

from lwsflow.controller.incluster.announce import Note, notes

T = "LeaderWorkerSet/m"
RUN = {"rolloutId": "r1", "phase": "Progressing", "currentStage": 1, "stages": 3, "canaryRevision": "c2",
       "stableRevision": "s1"}

# (case, old status, new status, notes)
CASES = [
    ("nothing changed", RUN, RUN, []),
    ("a rollout started", {"phase": "Idle"}, RUN,
     [Note("RolloutStarted", "rollout r1 of LeaderWorkerSet/m started: template c2 (stable s1)")]),
    ("a first rollout: no stable revision yet", {}, {**RUN, "stableRevision": ""},
     [Note("RolloutStarted", "rollout r1 of LeaderWorkerSet/m started: template c2 (stable none)")]),
    ("two stages passed at once", RUN, {**RUN, "currentStage": 3},
     [Note("StagePassed", f"{T}: stage 1/3 passed"), Note("StagePassed", f"{T}: stage 2/3 passed")]),
    ("stage 0 is the start, not a passed stage", {**RUN, "currentStage": 0}, {**RUN, "currentStage": 2},
     [Note("StagePassed", f"{T}: stage 1/3 passed")]),
    ("a stage of another rollout: not announced as passed", RUN,
     {**RUN, "rolloutId": "r2", "currentStage": 2},
     [Note("RolloutStarted", "rollout r2 of LeaderWorkerSet/m started: template c2 (stable s1)")]),
    ("waiting for promotion", RUN, {**RUN, "phase": "WaitingForPromotion", "message": "promote stage 2"},
     [Note("WaitingForPromotion", f"{T}: promote stage 2")]),
    ("succeeded", RUN, {**RUN, "phase": "Succeeded"},
     [Note("RolloutSucceeded", f"{T}: rollout r1 succeeded")]),
    ("rolled back by a failed check", RUN, {**RUN, "phase": "RolledBack", "message": "check http failed"},
     [Note("CheckFailed", f"{T}: check http failed", True),
      Note("RolloutRolledBack", f"{T}: rollout r1 RolledBack: check http failed", True)]),
    ("aborted", RUN, {**RUN, "phase": "Aborted", "message": "superseded"},
     [Note("RolloutAborted", f"{T}: rollout r1 Aborted: superseded", True)]),
]


@pytest.mark.parametrize(("old", "new", "want"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_what_a_status_change_announces(old: dict, new: dict, want: list[Note]) -> None:
    assert notes(T, old, new) == want


def test_a_start_is_an_event_only() -> None:
    assert [n.notify for n in notes(T, {}, RUN)] == [False]
    assert [n.notify for n in notes(T, RUN, {**RUN, "phase": "Succeeded"})] == [True]
