"""GitOps under faults, with real git and a bare remote: a promotion SIGKILLed between writing the
overlay and committing it, or between committing and pushing, leaves the repository consistent and a
rerun completes it (exactly one promotion commit lands); concurrent promotions never lose one."""

from __future__ import annotations

from pathlib import Path

import pytest

from reliability.fault_gitops import race_trial, seam_trial_cli, seam_trial_step


@pytest.mark.parametrize("seam", ["commit", "push"])
def test_cli_promotion_killed_at_a_seam_then_rerun(tmp_path: Path, seam: str) -> None:
    trial = seam_trial_cli(tmp_path, seam)
    assert trial.survived, trial.problems
@pytest.mark.parametrize("seam", ["commit", "push"])
def test_pipeline_promote_step_killed_at_a_seam_then_rerun(tmp_path: Path, seam: str) -> None:
    trial = seam_trial_step(tmp_path, seam)
    assert trial.survived, trial.problems
def test_racing_promotions_never_lose_one(tmp_path: Path) -> None:
    trial = race_trial(tmp_path, seed=1, racers=4)
    assert trial.survived, (trial.problems, trial.detail)
    assert trial.detail["racers"] == 6
