"""The Argo CD health check of a RolloutPolicy, run in Lua 5.1 and current Lua with Argo CD's sandbox,
against statuses the controller's own status mirror computes (controller/policy/status.py)."""

from __future__ import annotations

import pytest

from lwsflow.controller.policy import status as pstatus
from lwsflow.controller.policy.model import RolloutPolicySpec
from lwsflow.controller.rollout import state
from tests.gitops.integration.test_gitops_argocd import run_health, runtime  # noqa: F401 (fixture)

SPEC = RolloutPolicySpec.model_validate({"targetRef": {"kind": "LeaderWorkerSet", "name": "m"},
                                         "stages": [{"groups": 1}, {"groups": "100%", "pause": {}}]})


def _policy(st: state.RolloutState | None, generation: int = 1, observed: int | None = None) -> dict:
    obj = {"metadata": {"name": "p", "generation": generation}, "spec": {}}
    if st is None:
        return obj
    lws = {"metadata": {"annotations": {k: v for k, v in st.annotations().items() if v is not None}},
           "spec": {"leaderWorkerTemplate": {"size": 1}}}
    status = pstatus.compute(SPEC, lws, generation if observed is None else observed, {}, "t")
    return {**obj, "status": status}


@pytest.mark.parametrize(("st", "health"), [
    (state.RolloutState(), "Healthy"),
    (state.RolloutState(id="r", phase=state.SUCCEEDED, targets=[1, 4], passed=2), "Healthy"),
    (state.RolloutState(id="r", phase=state.RUNNING, targets=[1, 4], passed=0), "Progressing"),
    (state.RolloutState(id="r", phase=state.RUNNING, targets=[1, 4], passed=1), "Suspended"),
    (state.RolloutState(id="r", phase=state.RUNNING, targets=[1, 4], passed=0, paused=True), "Suspended"),
    (state.RolloutState(id="r", phase=state.ROLLED_BACK, targets=[1, 4]), "Degraded"),
    (state.RolloutState(id="r", phase=state.FAILED, targets=[1, 4]), "Degraded"),
    (state.RolloutState(id="r", phase=state.ABORTED, targets=[1, 4]), "Degraded"),
])
def test_phase_to_health(st: state.RolloutState, health: str, runtime: str) -> None:  # noqa: F811
    status, _msg = run_health("RolloutPolicy", _policy(st), runtime)
    assert status == health


def test_unobserved_generation_is_progressing(runtime: str) -> None:  # noqa: F811
    assert run_health("RolloutPolicy", _policy(None), runtime)[0] == "Progressing"
    assert run_health("RolloutPolicy", _policy(state.RolloutState(), generation=2, observed=1),
                      runtime)[0] == "Progressing"
    status, msg = run_health("RolloutPolicy", _policy(state.RolloutState(
        id="r", phase=state.RUNNING, targets=[1, 4], passed=1)), runtime)
    assert (status, "promote" in msg) == ("Suspended", True)


def test_a_missing_target_is_degraded_until_it_appears(runtime: str) -> None:  # noqa: F811
    """The controller's status for a policy whose target does not exist (phase Idle, TargetFound
    False) is Degraded, not Healthy; with the target there again, TargetFound True: Healthy."""
    from lwsflow.controller.incluster import lifecycle

    missing = lifecycle.target_missing({}, SPEC, 'leaderworkersets "m" not found', "default", 1, "t")
    status, msg = run_health("RolloutPolicy", {**_policy(None), "status": missing}, runtime)
    assert (status, "LeaderWorkerSet/m not found" in msg) == ("Degraded", True)
    found = _policy(state.RolloutState())
    found["status"] = lifecycle.target_found(found["status"], missing, SPEC, "t")
    assert run_health("RolloutPolicy", found, runtime)[0] == "Healthy"
