"""Status pieces for the life of a policy beyond its rollouts (docs/controller.md "Lifecycle").

- Two policies naming one target: the oldest (creation time, then name) owns it; any other gets
  phase ``Failed`` and ``Ready``/``Progressing`` False with reason ``TargetOwned`` naming the owner,
  and the controller writes nothing to the target on its behalf.
- A rollout refused before it wrote anything (``lwsflow rollout``'s capacity check: a surge that
  cannot fit): phase ``Failed``, ``Ready`` False with reason ``Refused`` and the check's numbers; it
  is tried again when the template or the policy changes, or after ``REFUSAL_RETRY_S``.
- A target that does not exist (yet): phase ``Idle``, ``TargetFound`` False (reason ``TargetNotFound``,
  the API's words) and ``Ready`` False, one Warning Event; once the target appears ``TargetFound`` is
  True and the policy is reconciled as any other.
- A spec edited while a rollout of the policy runs: the rollout finishes under the spec and
  generation it started with; the status keeps ``observedGeneration`` at that generation and shows
  ``SpecApplied`` False (reason ``RolloutInProgress``) until it ends; the next rollout uses the edit.
"""

from __future__ import annotations

from typing import Any

from lwsflow.controller.api.phases import ConditionType, PolicyPhase
from lwsflow.controller.api.wire import Obj
from lwsflow.controller.policy import status as pstatus
from lwsflow.controller.policy.model import RolloutPolicySpec

TARGET_OWNED = "TargetOwned"
REFUSED = "Refused"
REFUSAL_RETRY_S = 60.0  # wall seconds before a refused rollout is checked again (capacity may free up)
SPEC_APPLIED = ConditionType.SPEC_APPLIED.value
TARGET_FOUND = ConditionType.TARGET_FOUND.value
_PROGRESSING, _READY = ConditionType.PROGRESSING.value, ConditionType.READY.value
TARGET_NOT_FOUND = "TargetNotFound"


def _since(old: Obj, ctype: str, status: str, now: str) -> str:
    prev = next((c for c in old.get("conditions") or [] if c.get("type") == ctype), None)
    return str(prev["lastTransitionTime"]) if prev and prev.get("status") == status else now


def not_owner(old: Obj, spec: RolloutPolicySpec, owner: Obj, generation: int, now: str) -> Obj:
    """The status of a policy whose target another policy owns."""
    meta = owner.get("metadata") or {}
    ref = spec.targetRef
    msg = (f"{ref.kind}/{ref.name} is owned by rolloutpolicy {meta.get('namespace')}/{meta.get('name')} "
           "(the oldest policy naming it); this policy changes nothing")
    conds: list[dict[str, Any]] = [
        {"type": t, "status": "False", "reason": TARGET_OWNED, "message": msg,
         "lastTransitionTime": _since(old, t, "False", now)} for t in (_PROGRESSING, _READY)]
    return {**pstatus.derived(old), "phase": PolicyPhase.FAILED.value, "message": msg,
            "observedGeneration": generation, "conditions": conds}


def spec_applied(new: Obj, old: Obj, generation: int, running: int, now: str) -> Obj:
    """``new`` with the ``SpecApplied`` condition while the policy's ``generation`` is not the one its
    running rollout uses (``running``); without it otherwise."""
    conds = [c for c in new.get("conditions") or [] if c.get("type") != SPEC_APPLIED]
    if generation != running:
        msg = (f"generation {generation} applies from the next rollout; the rollout in progress keeps "
               f"generation {running}'s stages, checks and gates")
        conds.append({"type": SPEC_APPLIED, "status": "False", "reason": "RolloutInProgress",
                      "message": msg, "lastTransitionTime": _since(old, SPEC_APPLIED, "False", now)})
    return {**new, "conditions": conds}


def refused(new: Obj, old: Obj, why: str, now: str) -> Obj:
    """``new`` (the derived status) showing a rollout refused up front."""
    msg = f"refused: {why}"[:500]
    conds = [{**c, "status": "False", "reason": REFUSED, "message": msg,
              "lastTransitionTime": _since(old, str(c.get("type")), "False", now)}
             for c in new.get("conditions") or [] if c.get("type") in (_PROGRESSING, _READY)]
    return {**new, "phase": PolicyPhase.FAILED.value, "message": msg, "conditions": conds}


def target_missing(old: Obj, spec: RolloutPolicySpec, why: str, namespace: str, generation: int,
                   now: str) -> Obj:
    """The status of a policy whose target is not there: Idle, but ``TargetFound`` and ``Ready`` False
    (Argo CD's health check and the dashboard show it as broken, not as an idle healthy policy)."""
    ref = spec.targetRef
    msg = (f"{ref.kind}/{ref.name} not found in namespace {namespace} ({why}); create it or fix "
           "spec.targetRef: nothing rolls out until it exists")[:500]
    conds: list[dict[str, Any]] = [
        {"type": t, "status": "False", "reason": TARGET_NOT_FOUND, "message": msg,
         "lastTransitionTime": _since(old, t, "False", now)} for t in (TARGET_FOUND, _READY)]
    return {**pstatus.derived(old), "phase": PolicyPhase.IDLE.value, "message": msg,
            "observedGeneration": generation, "conditions": conds}


def target_was_missing(old: Obj) -> bool:
    """Whether the persisted status already says the target is missing (its Event was emitted)."""
    return any(c.get("type") == TARGET_FOUND and c.get("status") == "False"
               for c in old.get("conditions") or [])


def target_found(new: Obj, old: Obj, spec: RolloutPolicySpec, now: str) -> Obj:
    """``new`` with ``TargetFound`` True (the target exists)."""
    ref = spec.targetRef
    conds = [c for c in new.get("conditions") or [] if c.get("type") != TARGET_FOUND]
    conds.append({"type": TARGET_FOUND, "status": "True", "reason": "Found",
                  "message": f"{ref.kind}/{ref.name} exists",
                  "lastTransitionTime": _since(old, TARGET_FOUND, "True", now)})
    return {**new, "conditions": conds}
