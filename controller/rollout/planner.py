"""The pure planner: persisted state + observed object -> the next action of a single-LWS rollout.

No I/O and no clock: the executor (:mod:`lwsflow.controller.rollout.engine`) performs the action and asks
again. Because every input is either on the object or in its annotations, a restarted controller
asks the same question and gets the same answer, which is what makes resume crash-safe.
"""

from __future__ import annotations

from dataclasses import dataclass

from lwsflow.controller.api.phases import ActionKind
from lwsflow.controller.api.wire import Obj
from lwsflow.controller.rollout import gate, state
from lwsflow.controller.rollout.stages import partition_for

# action kinds (aliases of the ActionKind members, the names the engine has always used)
START, FINISH_START, SET_PARTITION = ActionKind.START, ActionKind.FINISH_START, ActionKind.SET_PARTITION
GATE, DONE = ActionKind.GATE, ActionKind.DONE
ROLLBACK, ROLLBACK_WAIT = ActionKind.ROLLBACK, ActionKind.ROLLBACK_WAIT
PAUSED, FOREIGN, GUARD = ActionKind.PAUSED, ActionKind.FOREIGN, ActionKind.GUARD


@dataclass(frozen=True)
class Action:
    """What to do next. ``stage`` is 0-based; ``partition`` the value to set for SET_PARTITION."""

    kind: ActionKind
    stage: int = -1
    partition: int = -1
    reason: str = ""


def next_action(st: state.RolloutState, obj: Obj, *, partitioned: bool = True) -> Action:
    """Decide the next step of the rollout recorded in ``st`` for the observed LWS ``obj``.

    ``partitioned=False`` (a DisaggregatedSet: no partition) has one stage and goes straight to GATE.
    """
    if not st.id or not st.active:
        return Action(START)
    cur = state.template_hash(state.template_of(obj))
    if st.phase == state.ROLLING_BACK:
        if cur == st.previous_hash and (not partitioned or gate.partition(obj) == 0):
            return Action(ROLLBACK_WAIT)
        if cur not in (st.target_hash, st.previous_hash) and st.target_hash:
            return Action(FOREIGN, reason="the template changed during rollback")
        return Action(ROLLBACK, reason=st.reason or "rollback in progress")
    if st.phase == state.STARTING:
        return Action(FINISH_START)
    if cur != st.target_hash:
        return Action(FOREIGN, reason=f"template hash {cur} is neither this rollout's target "
                      f"{st.target_hash}: someone else is rolling")
    if st.abort:
        return Action(ROLLBACK, reason="abort requested")
    if st.paused:
        return Action(PAUSED, stage=st.passed, reason=st.reason or "paused")
    if st.done:
        return Action(DONE)
    k = st.passed
    if not partitioned:
        return Action(GATE, stage=k)
    want = partition_for(st.targets[k], gate.replicas(obj))
    have = gate.partition(obj)
    if have > want:
        return Action(SET_PARTITION, stage=k, partition=want)
    if have < want:
        # we never set it this low (the next stage's partition is written together with `passed`),
        # so someone else moved it: never run ahead of the gates.
        return Action(GUARD, stage=k, reason=f"partition {have} is below stage {k + 1}'s {want}")
    return Action(GATE, stage=k)
