"""Cluster faults in the middle of a stage, over HTTP against the embedded cluster: a pod crash in an
updated group (the group is recreated and the gate waits for it), a lost node, an image that never
becomes Ready (rollback to the old template), and a second writer changing the template (abort,
their change stands). The history checker itself is tested on hand-made histories first."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from reliability.fault_helpers import NEW_IMAGE, OLD_IMAGE, Change, FaultEnv, history_problems, start_env
from reliability.fault_trials import cluster_fault_trial


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FaultEnv]:
    e = start_env(tmp_path_factory.mktemp("cluster"))
    try:
        yield e
    finally:
        e.close()


@pytest.mark.parametrize("kind", ["pod-crash", "node-lost", "never-ready", "foreign-change"])
def test_rollout_survives_cluster_fault_mid_stage(env: FaultEnv, kind: str) -> None:
    trial = cluster_fault_trial(env, kind, seed=1)
    assert trial.survived, (trial.result, trial.problems, trial.detail)


def _h(*steps: tuple[int, str, set[int]]) -> list[Change]:
    return [Change(i, p, img, "", 0, frozenset(good), {}) for i, (p, img, good) in enumerate(steps)]


GOOD = _h((0, OLD_IMAGE, set()), (4, NEW_IMAGE, set()), (3, NEW_IMAGE, set()), (2, NEW_IMAGE, {3}),
          (1, NEW_IMAGE, {2, 3}), (0, NEW_IMAGE, {1, 2, 3}))


@pytest.mark.parametrize(("history", "result", "problem"), [
    pytest.param(GOOD, "succeeded", "", id="clean"),
    pytest.param([*GOOD[:3], _h((0, OLD_IMAGE, set()))[0]], "rolled-back", "", id="clean-rollback"),
    pytest.param(GOOD[:3] + GOOD[4:], "succeeded", "not a prefix", id="stage-skipped"),
    pytest.param(GOOD[:4] + GOOD[2:3] + GOOD[3:], "succeeded", "not a prefix", id="stage-repeated"),
    pytest.param(GOOD[:4] + _h((1, NEW_IMAGE, {3}))[:1] + GOOD[5:], "succeeded", "gate bypassed",
                 id="gate-bypassed"),
    pytest.param(GOOD[:4], "succeeded", "succeeded but", id="unfinished"),
    pytest.param(GOOD[:3] + _h((3, OLD_IMAGE, set()))[:1], "rolled-back", "rollback history",
                 id="rollback-kept-partition"),
    pytest.param(GOOD, "aborted", "neither", id="other-outcome"),
])
def test_history_checker_catches_each_violation(history: list[Change], result: str, problem: str) -> None:
    problems = history_problems(history, replicas=4, targets=[1, 2, 3, 4], result=result)
    if problem:
        assert any(problem in p for p in problems), problems
    else:
        assert problems == []


def test_history_checker_allows_only_the_gitops_freeze_at_rest() -> None:
    frozen = [*GOOD, _h((4, NEW_IMAGE, {0, 1, 2, 3}))[0]]
    assert history_problems(frozen, replicas=4, targets=[1, 2, 3, 4], result="succeeded", at_rest=True) == []
    assert history_problems(frozen, replicas=4, targets=[1, 2, 3, 4], result="succeeded")  # not by default
    bumped = [*GOOD, _h((2, NEW_IMAGE, set()))[0]]  # anything but the full freeze is still a change
    assert history_problems(bumped, replicas=4, targets=[1, 2, 3, 4], result="succeeded", at_rest=True)
