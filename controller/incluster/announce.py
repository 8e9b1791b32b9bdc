"""What a policy's status change announces: the Events and webhook notes of ``old`` -> ``new``.

Pure. Derived from the persisted status, so a new leader does not repeat what the old one already
announced; the supervisor (``incluster/manager.py``) emits and sends them.
"""

from __future__ import annotations

from dataclasses import dataclass

from lwsflow.controller.api.phases import PolicyPhase
from lwsflow.controller.api.wire import Obj

STARTED = "RolloutStarted"


@dataclass(frozen=True)
class Note:
    reason: str
    message: str
    warning: bool = False

    @property
    def notify(self) -> bool:
        """Whether the policy's webhooks get it too (a start is an Event only)."""
        return self.reason != STARTED


def notes(target: str, old: Obj, new: Obj) -> list[Note]:
    """``target``: ``Kind/name``, as the messages name it."""
    rid, phase = new.get("rolloutId", ""), new.get("phase", "")
    same_rollout = old.get("rolloutId") == rid and bool(rid)
    out: list[Note] = []
    if rid and not same_rollout and phase in (PolicyPhase.PROGRESSING, PolicyPhase.WAITING_FOR_PROMOTION):
        stable = new.get("stableRevision") or "none"
        out.append(Note(STARTED, f"rollout {rid} of {target} started: template "
                                 f"{new.get('canaryRevision')} (stable {stable})"))
    if same_rollout and int(new.get("currentStage") or 0) > int(old.get("currentStage") or 0):
        for k in range(int(old.get("currentStage") or 0), int(new["currentStage"])):
            if k >= 1:
                out.append(Note("StagePassed", f"{target}: stage {k}/{new.get('stages')} passed"))
    if phase != old.get("phase"):
        msg = new.get("message") or ""
        if phase == PolicyPhase.WAITING_FOR_PROMOTION:
            out.append(Note("WaitingForPromotion", f"{target}: {msg}"))
        elif phase == PolicyPhase.SUCCEEDED:
            out.append(Note("RolloutSucceeded", f"{target}: rollout {rid} succeeded"))
        elif phase in (PolicyPhase.ROLLED_BACK, PolicyPhase.FAILED, PolicyPhase.ABORTED):
            if "hook failed" in msg or "check" in msg:
                out.append(Note("CheckFailed", f"{target}: {msg}", True))
            out.append(Note(f"Rollout{phase}", f"{target}: rollout {rid} {phase}: {msg}", True))
    return out
