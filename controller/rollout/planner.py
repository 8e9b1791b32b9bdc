"""The pure planner: persisted state + observed object -> the next action of a single-LWS rollout.

No I/O and no clock: the executor (:mod:`lwsflow.controller.rollout.engine`) performs the action and asks
again. Because every input is either on the object or in its annotations, a restarted controller
asks the same question and gets the same answer, which is what makes resume crash-safe.
"""

from __future__ import annotations

from dataclasses import dataclass

from lwsflow.controller.api.wire import Obj
from lwsflow.controller.rollout import gate, state
from lwsflow.controller.rollout.stages import partition_for

# action kinds
START = "start"  # no active rollout: record previous template, freeze, apply
FINISH_START = "finish-start"  # applied, target hash not yet recorded
SET_PARTITION = "set-partition"  # lower the partition to the current stage's target
GATE = "gate"  # wait for the stage gate, bake, hooks
DONE = "done"  # every stage passed: mark Succeeded
ROLLBACK = "rollback"  # restore the previous template, partition 0
ROLLBACK_WAIT = "rollback-wait"  # rollback applied: wait for equality on the old revision
PAUSED = "paused"  # a human paused it: stop here
FOREIGN = "foreign"  # someone else changed the template: abort without writing anything
GUARD = "guard"  # an invariant is broken (partition below the stage target)


@dataclass(frozen=True)
class Action:
    """What to do next. ``stage`` is 0-based; ``partition`` the value to set for SET_PARTITION."""

    kind: str
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
