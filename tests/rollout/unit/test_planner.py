"""The pure planner: persisted state + observed LWS -> next action (named table cases)."""

from __future__ import annotations

import pytest

from lwsflow.controller.rollout import planner, state
from tests.rollout.rollout_builders import lws, with_state

NEW = lws(image="vllm:2")
TARGET = state.template_hash(state.template_of(NEW))
PREV = state.template_hash(state.template_of(lws(image="vllm:1")))


def st(**kw: object) -> state.RolloutState:
    base = dict(id="r1", phase=state.RUNNING, stages="1,25%,50%,100%", targets=[1, 2, 3, 4],
                target_hash=TARGET, previous_hash=PREV, previous_template="x")
    base.update(kw)
    return state.RolloutState(**base)  # type: ignore[arg-type]


CASES = [
    pytest.param(None, lws(), planner.START, -1, id="no_rollout"),
    pytest.param(st(phase=state.SUCCEEDED), lws(), planner.START, -1, id="previous_finished"),
    pytest.param(st(phase=state.STARTING), lws(image="vllm:2", partition=4), planner.FINISH_START, -1,
                 id="applied_not_recorded"),
    pytest.param(st(), lws(image="vllm:2", partition=4), planner.SET_PARTITION, 3, id="stage1_lower"),
    pytest.param(st(), lws(image="vllm:2", partition=3), planner.GATE, -1, id="stage1_gate"),
    pytest.param(st(passed=1), lws(image="vllm:2", partition=3), planner.SET_PARTITION, 2,
                 id="stage2_lower"),
    pytest.param(st(passed=2), lws(image="vllm:2", partition=2), planner.SET_PARTITION, 1,
                 id="resume_after_kill_mid_chain"),
    pytest.param(st(passed=1), lws(image="vllm:2", partition=1), planner.GUARD, -1,
                 id="partition_below_stage_target"),
    pytest.param(st(passed=4), lws(image="vllm:2", partition=0), planner.DONE, -1, id="all_passed"),
    pytest.param(st(), lws(image="vllm:3", partition=3), planner.FOREIGN, -1, id="someone_else_rolling"),
    pytest.param(st(paused=True), lws(image="vllm:2", partition=3), planner.PAUSED, -1, id="paused"),
    pytest.param(st(abort=True), lws(image="vllm:2", partition=3), planner.ROLLBACK, -1, id="abort"),
    pytest.param(st(phase=state.ROLLING_BACK), lws(image="vllm:2", partition=2), planner.ROLLBACK, -1,
                 id="rollback_not_applied"),
    pytest.param(st(phase=state.ROLLING_BACK), lws(image="vllm:1", partition=0), planner.ROLLBACK_WAIT,
                 -1, id="rollback_applied"),
    pytest.param(st(phase=state.ROLLING_BACK), lws(image="vllm:9"), planner.FOREIGN, -1,
                 id="foreign_during_rollback"),
]


@pytest.mark.parametrize(("rs", "obj", "kind", "partition"), CASES)
def test_next_action(rs: state.RolloutState | None, obj: dict, kind: str, partition: int) -> None:
    if rs is not None:
        obj = with_state(obj, rs)
    act = planner.next_action(state.RolloutState.from_object(obj), obj)
    assert act.kind == kind, act
    if partition >= 0:
        assert act.partition == partition


def test_state_roundtrip() -> None:
    rs = st(passed=2, bake_s=30.0, paused=True, previous_template=state.pack({"a": [1, 2]}))
    back = state.RolloutState.from_object(with_state(lws(), rs))
    assert back == rs
    assert state.unpack(back.previous_template) == {"a": [1, 2]}
    assert all(k.startswith("rollout.lwsflow.io/") for k in rs.annotations())


def test_merge_diff_restores_exactly() -> None:
    from lwsflow.controller.rollout.patches import merge_diff
    from lwsflow.sim.apiserver.patch import json_merge_patch

    cur = {"a": 1, "b": {"c": [1, 2], "d": "x", "gone": True}, "new": {"k": 1}}
    want = {"a": 2, "b": {"c": [3], "d": "x"}, "old": [1]}
    patch = merge_diff(cur, want)
    assert patch == {"a": 2, "b": {"c": [3], "gone": None}, "new": None, "old": [1]}
    assert json_merge_patch(cur, patch) == want
