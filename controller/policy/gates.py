"""Manual gates (``pause: {}``) and the promote/retry marks, persisted next to the rollout state.

A promotion is written on the *target* (``rollout.lwsflow.io/promoted: <rollout id>:<stage>``), in
the same place as the rest of the rollout state, so a controller that takes over reads the same
answer: a gate is passed only by a mark for this rollout id and at least that stage, never skipped.
A retry of a failed release is asked on the policy (``rolloutpolicy.lwsflow.io/retry: <rollout id>``)
and honoured once: the next rollout gets another id. When the rollback took the failed template off
the target (and no Git sync brought it back), the controller first puts the template the rollback
recorded (``rollout.lwsflow.io/failed-template``) back, frozen at partition = replicas, then rolls it
out as a retry.
"""

from __future__ import annotations

from collections.abc import Sequence

from lwsflow.controller.api import wire
from lwsflow.controller.api.labels import ROLLOUT_PREFIX
from lwsflow.controller.api.wire import Obj
from lwsflow.controller.policy.model import RolloutPolicySpec
from lwsflow.controller.rollout import gate, outcome, state
from lwsflow.controller.rollout.patches import deep_merge, merge_diff, partition_patch

PROMOTED = ROLLOUT_PREFIX + "promoted"
RETRY = "rolloutpolicy.lwsflow.io/retry"
INCONCLUSIVE = outcome.INCONCLUSIVE_REASON


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


def recorded_failure(st: state.RolloutState) -> Obj | None:
    """The template the rollback of rollout ``st`` took off the target (None: none recorded, or a
    record that is not this rollout's template)."""
    if st.active or not st.failed_template or not st.target_hash:
        return None
    template = state.unpack(st.failed_template)
    return template if state.template_hash(template) == st.target_hash else None


def reapply_patch(obj: Obj, template: Obj) -> Obj:
    """The one conditional write that puts a failed ``template`` back on an LWS for its retry, with
    the partition at replicas so no group moves before the retried rollout's first stage."""
    return deep_merge({"metadata": {"resourceVersion": obj["metadata"]["resourceVersion"]},
                       "spec": merge_diff(state.template_of(obj), template)},
                      partition_patch(gate.replicas(obj)))


def inconclusive_at(st: state.RolloutState) -> int | None:
    """The 0-based stage the rollout is paused at because its analysis decided nothing
    (``onInconclusive: pause``), or None. Promote passes that stage; abort rolls it back."""
    if not st.active or not st.paused or st.abort or st.phase == state.ROLLING_BACK:
        return None
    if st.inconclusive != st.passed + 1 or not st.reason.startswith(INCONCLUSIVE + ":"):
        return None
    return st.passed


def inconclusive_message(st: state.RolloutState) -> str:
    """The status line of a rollout paused inconclusive: what to do first, then the traffic figures."""
    k = st.passed
    why = st.reason.removeprefix(f"{INCONCLUSIVE}: stage {k + 1}: ")
    return (f"stage {k + 1} paused: the analysis decided nothing; `kubectl lwsflow promote` passes the "
            f"stage, `kubectl lwsflow abort` rolls it back: {why}")


def accept_patch(obj: Obj, st: state.RolloutState, now: float) -> Obj:
    """The one conditional write of a promote at an inconclusive pause: stage ``passed + 1`` accepted
    (its analysis is not run again), the pause lifted, a fresh progress deadline from ``now``."""
    ann = state.RolloutState(accepted=st.passed + 1, paused=False, stage_started=state.iso(now),
                             updated=state.iso(now))
    return {"metadata": {"resourceVersion": obj["metadata"]["resourceVersion"],
                         "annotations": ann.annotations(("accepted", "paused", "stage_started", "updated"))}}
