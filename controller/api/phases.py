"""Phases, actions, results and condition types: the controller's vocabulary, one enum each.

``StrEnum`` members equal (and format as) their string values, so annotations, status, JSON and the
CRD read exactly as the bare strings did; comparisons against values read back from the cluster (plain
``str``) hold. Where a value is written into an object, ``str(member)`` or ``member.value`` hands over
a plain ``str`` (the simulator's schema check and the YAML dumpers match the exact type).

Not here yet: the analysis verdicts (``successful``/``failed``/``inconclusive``/``error``,
``analysis/evaluate.py``) and the blue-green executor's phases (``bluegreen/plan.py``).
"""

from __future__ import annotations

from enum import StrEnum


class PolicyPhase(StrEnum):
    # the RolloutPolicy's ``status.phase`` (the CRD's enum, in this order)
    IDLE = "Idle"
    PROGRESSING = "Progressing"
    PAUSED = "Paused"
    WAITING_FOR_PROMOTION = "WaitingForPromotion"
    SUCCEEDED = "Succeeded"
    ROLLED_BACK = "RolledBack"
    FAILED = "Failed"
    ABORTED = "Aborted"


class EnginePhase(StrEnum):
    # a rollout's phase as its target's ``rollout.lwsflow.io/phase`` annotation records it
    STARTING = "Starting"
    RUNNING = "Running"
    ROLLING_BACK = "RollingBack"
    SUCCEEDED = "Succeeded"
    ROLLED_BACK = "RolledBack"
    FAILED = "Failed"
    ABORTED = "Aborted"


class ActionKind(StrEnum):
    # what the pure planner (``rollout/planner.py``) asks the engine to do next
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


class PolicyAction(StrEnum):
    # what a person does to a RolloutPolicy (``kubectl lwsflow``, the dashboard's buttons)
    PROMOTE = "promote"
    PAUSE = "pause"
    RESUME = "resume"
    ABORT = "abort"
    RETRY = "retry"


class Result(StrEnum):
    # how a rollout ended (``rollout/outcome.py``): the CLI's line, the report, the metrics label
    SUCCEEDED = "succeeded"
    ROLLED_BACK = "rolled-back"
    FAILED = "failed"
    ABORTED = "aborted"
    PAUSED = "paused"
    # paused because a stage's analysis decided nothing (``onInconclusive: pause``): a person decides
    PAUSED_INCONCLUSIVE = "paused-inconclusive"


class ConditionType(StrEnum):
    # the RolloutPolicy's ``status.conditions[].type``
    PROGRESSING = "Progressing"
    READY = "Ready"
    TARGET_FOUND = "TargetFound"  # False while the policy's target does not exist (incluster/lifecycle.py)
    SPEC_APPLIED = "SpecApplied"  # False while a rollout runs under an older generation of the spec
    QUOTA_BLOCKED = "QuotaBlocked"  # True while the rollout is paused because Kueue holds its groups
