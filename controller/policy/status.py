"""The RolloutPolicy status, derived from the target's rollout annotations (the source of truth).

Nothing here is remembered between calls: any replica that reads the target computes the same
status, so a controller that takes over after a crash mirrors exactly what the old one would have.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lwsflow.controller.api.phases import ConditionType, PolicyPhase
from lwsflow.controller.api.wire import Obj
from lwsflow.controller.policy import gates, timings
from lwsflow.controller.policy.model import HISTORY_LIMIT, RolloutPolicySpec
from lwsflow.controller.rollout import kueue_hold, state

_FINAL: dict[str, PolicyPhase] = {
    state.SUCCEEDED: PolicyPhase.SUCCEEDED, state.ROLLED_BACK: PolicyPhase.ROLLED_BACK,
    state.FAILED: PolicyPhase.FAILED, state.ABORTED: PolicyPhase.ABORTED}


def stable_hash(st: state.RolloutState) -> str:
    """The template hash of the last template that succeeded ("" when none is recorded)."""
    return state.template_hash(state.unpack(st.last_good)) if st.last_good else ""


def phase_of(spec: RolloutPolicySpec, st: state.RolloutState, obj: Obj,
             others: Sequence[Obj] = ()) -> PolicyPhase:
    if not st.id:
        return PolicyPhase.IDLE
    if not st.active and state.any_active(others):
        return PolicyPhase.PROGRESSING  # a pair: the other role has not ended yet
    if st.active:
        if st.paused and not st.abort:  # an abort overrides the pause: it is rolling back
            return PolicyPhase.PAUSED
        if gates.waiting_at(spec, st, obj, others) is not None:
            return PolicyPhase.WAITING_FOR_PROMOTION
        return PolicyPhase.PROGRESSING
    return _FINAL.get(st.phase, PolicyPhase.FAILED)


def _condition(ctype: ConditionType, ok: bool, reason: str, message: str, now: str,
               old: list[dict[str, Any]]) -> dict[str, Any]:
    status = "True" if ok else "False"
    prev = next((c for c in old if c.get("type") == ctype), None)
    since = prev["lastTransitionTime"] if prev and prev.get("status") == status else now
    return {"type": ctype.value, "status": status, "reason": str(reason), "message": message[:500],
            "lastTransitionTime": since}


def compute(spec: RolloutPolicySpec, obj: Obj, generation: int, old: Obj, now: str,
            others: Sequence[Obj] = ()) -> Obj:
    """The status for ``obj`` (the target; for a pair: its decode LWS, with the prefill LWS in
    ``others``) given the previous status."""
    st = state.RolloutState.from_object(obj)
    phase = phase_of(spec, st, obj, others)
    current = state.template_hash(state.template_of(obj))
    stable = stable_hash(st)
    canary = st.target_hash if st.active and st.target_hash else (current if current != stable else "")
    stages = len(st.targets) if st.active else len(spec.stages)
    stage = min(st.passed + 1, stages) if st.active else 0
    message = st.reason if st.reason else ""
    wait = gates.waiting_at(spec, st, obj, others)
    if wait is not None:
        message = f"stage {wait + 1} waits for `kubectl lwsflow promote`"
    held = phase == PolicyPhase.PAUSED and gates.inconclusive_at(st) is not None
    if held:
        message = gates.inconclusive_message(st)
    quota_held = phase == PolicyPhase.PAUSED and st.reason.startswith(kueue_hold.QUOTA_BLOCKED + ":")
    if quota_held:
        message = (f"{st.reason.removeprefix(kueue_hold.QUOTA_BLOCKED + ': ')}; `kubectl lwsflow resume` "
                   "waits again (a fresh deadline), `kubectl lwsflow abort` rolls back")
    reason = gates.INCONCLUSIVE if held else kueue_hold.QUOTA_BLOCKED if quota_held else phase
    history: list[dict[str, Any]] = list(old.get("history") or [])
    settled = not state.any_active(others)
    if st.id and not st.active and settled and st.phase in _FINAL and all(h.get("id") != st.id
                                                                          for h in history):
        history.append({"id": st.id, "templateHash": st.target_hash or st.manifest_hash,
                        "outcome": _FINAL[st.phase].value, "started": st.started, "finished": st.updated,
                        "message": st.reason[:300], **timings.timings([obj, *others])})
    old_conds = list(old.get("conditions") or [])
    conditions = [
        _condition(ConditionType.PROGRESSING,
                   phase in (PolicyPhase.PROGRESSING, PolicyPhase.WAITING_FOR_PROMOTION),
                   reason, message, now, old_conds),
        _condition(ConditionType.READY, phase in (PolicyPhase.IDLE, PolicyPhase.SUCCEEDED), reason, message,
                   now, old_conds),
    ]
    if quota_held:  # only while it holds: a policy that never meets Kueue never shows it
        conditions.append(_condition(ConditionType.QUOTA_BLOCKED, True, kueue_hold.QUOTA_BLOCKED, message,
                                     now, old_conds))
    return {
        "observedGeneration": generation, "phase": phase.value, "message": message[:500], "rolloutId": st.id,
        "currentStage": stage, "stages": stages, "stageText": f"{stage}/{stages}" if stage else "",
        "observedTemplateHash": current, "stableRevision": stable, "canaryRevision": canary,
        "promotedStage": gates.promoted_stage(obj, st.id) if st.id else 0,
        "conditions": conditions, "history": history[-HISTORY_LIMIT:],
    }


DRIVER_KEYS = ("analysis", "pdProbe")  # written by the rollout's driver, never derived here


def derived(s: Obj) -> Obj:
    """The part of a status this module derives: all but ``analysis`` and ``pdProbe``, which the
    rollout's driver writes (``analysis/status.py``, ``pd/incluster.py``); a status write
    leaves them to the driver."""
    return {k: v for k, v in s.items() if k not in DRIVER_KEYS}


def same(a: Obj, b: Obj) -> bool:
    """Equal but for condition timestamps and the driver's keys (so an unchanged status is not
    rewritten)."""
    def strip(s: Obj) -> Obj:
        return {**derived(s), "conditions": [{k: v for k, v in c.items() if k != "lastTransitionTime"}
                                             for c in s.get("conditions") or []]}
    return strip(a) == strip(b)
