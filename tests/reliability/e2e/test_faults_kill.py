"""`lwsflow rollout` (a subprocess) SIGKILLed at seeded random moments of its work and restarted until
the rollout has an outcome: every trial ends succeeded or cleanly rolled back, with no stage skipped or
repeated, no gate bypassed (checked against the pods at each partition change) and the final equality
holding. Scenarios: a release from --manifest, one that never becomes Ready (rollback), one applied by
GitOps (no --manifest), a P/D pair (decode first), and a flaky API at the same time.
``reliability/fault_campaign.py`` runs the same trials 50 times per scenario by default."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from lwsflow.sim.apiserver import ApiFaults
from reliability.fault_helpers import (
    NEW_IMAGE,
    OLD_IMAGE,
    Change,
    FaultEnv,
    decode_first_problems,
    served,
    start_env,
)
from reliability.fault_trials import kill_pair_trial, kill_trial


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FaultEnv]:
    e = start_env(tmp_path_factory.mktemp("kill"))
    try:
        yield e
    finally:
        e.close()
@pytest.mark.parametrize(("scenario", "seed"), [("succeed", 1), ("rollback", 3), ("gitops-rollback", 5)])
def test_sigkilled_controller_resumes_to_an_outcome(env: FaultEnv, tmp_path: Path, scenario: str,
                                                    seed: int) -> None:
    trial = kill_trial(env, tmp_path, seed, scenario)
    assert trial.survived, (trial.problems, trial.detail)
    assert trial.detail["kills"], trial.detail  # it really was killed at least once
def test_sigkilled_controller_on_a_flaky_api(tmp_path: Path) -> None:
    """Both at once: the restarted controller also meets 5xx/429/409, watch cuts and 410 Gone."""
    faults = ApiFaults(seed=9, error_rate=0.05, retry_after_s=0, conflict_rate=0.1, watch_cut_mean_s=0.1,
                       gone_on_resume_rate=0.3)
    with served(tmp_path, faults=faults) as env:
        trial = kill_trial(env, tmp_path, 9, "succeed")
    assert trial.survived, (trial.problems, trial.detail)
    assert trial.detail["kills"] and sum(faults.injected.values()) > 0, (trial.detail, faults.injected)
def test_sigkilled_pair_rollout_moves_decode_first(env: FaultEnv, tmp_path: Path) -> None:
    trial = kill_pair_trial(env, tmp_path, 4)
    assert trial.survived, (trial.problems, trial.detail)
    assert trial.detail["kills"], trial.detail


def test_decode_first_checker_catches_prefill_running_ahead() -> None:
    def ch(rv: int, p: int, img: str = NEW_IMAGE) -> Change:
        return Change(rv, p, img, "", 0, frozenset(), {})
    prefill = [ch(0, 0, OLD_IMAGE), ch(10, 4), ch(20, 3), ch(40, 2)]
    assert decode_first_problems([(5, 0), (15, 1), (30, 2)], prefill, replicas=4, targets=[1, 2]) == []
    late = decode_first_problems([(5, 0), (25, 1), (30, 2)], prefill, replicas=4, targets=[1, 2])
    assert late and "stage 1" in late[0]
