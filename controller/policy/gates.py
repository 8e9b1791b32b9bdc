"""Manual gates (``pause: {}``) and the promote/retry marks, persisted next to the rollout state.

A promotion is written on the *target* (``rollout.lwsflow.io/promoted: <rollout id>:<stage>``), in
the same place as the rest of the rollout state, so a controller that takes over reads the same
answer: a gate is passed only by a mark for this rollout id and at least that stage, never skipped.
A retry of a failed release is asked on the policy (``rolloutpolicy.lwsflow.io/retry: <rollout id>``)
and honoured once: the next rollout gets another id.
"""

from __future__ import annotations

from collections.abc import Sequence

from lwsflow.controller.api import wire
from lwsflow.controller.api.labels import ROLLOUT_PREFIX
from lwsflow.controller.api.wire import Obj
from lwsflow.controller.policy.model import RolloutPolicySpec
from lwsflow.controller.rollout import state

PROMOTED = ROLLOUT_PREFIX + "promoted"
RETRY = "rolloutpolicy.lwsflow.io/retry"


def promoted_stage(obj: Obj, rollout_id: str) -> int:
    """The highest 1-based stage promoted for ``rollout_id`` (0: none)."""
    raw = wire.annotations_of(obj).get(PROMOTED, "")
    rid, _, stage = raw.partition(":")
    if rid != rollout_id or not stage.isdigit():
        return 0
    return int(stage)


def promote_value(rollout_id: str, stage: int) -> str:
    return f"{rollout_id}:{stage}"


def next_gate(spec: RolloutPolicySpec, st: state.RolloutState, promoted: int) -> int | None:
    """The 0-based stage whose manual gate holds the rollout next (None: no gate ahead).

    A gate sits *before* its stage: stage ``k`` (0-based) with ``pause`` starts only once promoted
    to ``k + 1``. Stages already passed need nothing.
    """
    for k in range(st.passed, len(spec.stages)):
        if spec.stages[k].pause is not None and promoted < k + 1:
            return k
    return None


def waiting_at(spec: RolloutPolicySpec, st: state.RolloutState, obj: Obj,
               others: Sequence[Obj] = ()) -> int | None:
    """The gate the rollout is waiting at right now: the next stage to start is gated, unpromoted.

    ``obj`` carries the marks (a pair's decode LWS); ``others`` (the prefill LWS) must have passed
    the stages before the gate too, as the pair coordinator waits for both roles.
    """
    if not st.active or st.paused or st.abort or st.phase == state.ROLLING_BACK:
        return None
    gate_k = next_gate(spec, st, promoted_stage(obj, st.id))
    if gate_k is None or gate_k != st.passed:
        return None
    if any(state.RolloutState.from_object(o).passed < gate_k for o in others):
        return None
    return gate_k
