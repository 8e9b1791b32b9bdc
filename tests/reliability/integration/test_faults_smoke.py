"""Smoke against endpoints that hang, reset connections, return garbage or half a stream: every one
ends as failed checks (exactly the ones the fault hits) within the per-check bound derived from the
request timeout, and a hang costs about the timeout, not more; on a rollout's new pods the smoke
stage hook catches each of them and the release is rolled back."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from reliability.fault_helpers import FaultEnv, start_env
from reliability.fault_smoke import EXPECTED_FAILS, smoke_gate_trial, smoke_trial


@pytest.mark.parametrize("mode", sorted(EXPECTED_FAILS))
def test_faulty_endpoint_fails_within_its_timeout(mode: str) -> None:
    trial = smoke_trial(mode, request_timeout_s=0.3)
    assert trial.survived, (trial.problems, trial.detail)


def test_hang_costs_the_timeout_and_scales_with_it() -> None:
    short, longer = smoke_trial("hang", 0.2), smoke_trial("hang", 0.6)
    assert short.survived and longer.survived, (short.problems, longer.problems)
    # a hung request is cut at the timeout: the slowest check tracks it, within the bound
    assert 0.2 <= float(short.detail["slowest_check_s"]) <= float(short.detail["bound_s"])  # type: ignore[arg-type]
    assert 0.6 <= float(longer.detail["slowest_check_s"]) <= float(longer.detail["bound_s"])  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FaultEnv]:
    e = start_env(tmp_path_factory.mktemp("smoke"), engines=True)
    try:
        yield e
    finally:
        e.close()


@pytest.mark.parametrize("mode", sorted(EXPECTED_FAILS))
def test_smoke_stage_hook_catches_the_faulty_release_and_rolls_back(env: FaultEnv, mode: str) -> None:
    """The same faults on the new revision's pods (Ready, but serving badly), found by the smoke test
    run as the rollout's stage hook: stage 1 fails within the smoke bounds, the old template returns."""
    trial = smoke_gate_trial(env, mode, seed=7)
    assert trial.survived, (trial.problems, trial.detail)
