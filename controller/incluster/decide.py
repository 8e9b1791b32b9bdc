"""The pure reconcile of one RolloutPolicy: what the controller observed in, what to do out.

No I/O and no clock of its own, in the style of :mod:`lwsflow.controller.rollout.planner`: the supervisor
(:mod:`lwsflow.controller.incluster.manager`) gathers the observation (the policy, its targets from the
informer cache, its own timers, ``time.monotonic()``), asks, and applies the answer: the writes, the
driver thread it starts, the status it computes, the rechecks it schedules. The same question asked
again after a restart gets the same answer, because every input is on the cluster or in the timers
the answer hands back.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum

from lwsflow.controller.api.wire import Obj
from lwsflow.controller.incluster import lifecycle
from lwsflow.controller.pd import incluster as pd_gate
from lwsflow.controller.policy import gates
from lwsflow.controller.policy import status as pstatus
from lwsflow.controller.rollout import state

# Argo CD applies a sync's objects one after another: a pair's green starts from both roles' templates
# once they have stopped changing for this long (wall seconds), not from the first role synced
SETTLE_S = 1.0
# a pair's probe that could not run holds its templates for a retry window of cluster time: look again
NOT_RUN_RECHECK_S = 30.0


class Verdict(StrEnum):
    """What a policy's reconcile amounts to, before any rollout is considered."""

    INVALID = "Invalid"  # admitted, yet its spec does not validate: a Failed status says why
    NOT_OWNER = "NotOwner"  # an older policy names the same target: TargetOwned, nothing written to it
    TARGET_MISSING = "TargetNotFound"  # the target is not there (or not what the kind says)
    STALE = "Stale"  # the cache has not seen the last rollout's last writes: their events re-enqueue it
    BLUE_GREEN = "BlueGreen"  # a blue-green pair: its own reconcile (bluegreen/incluster.py)
    ROLL = "Roll"  # a partition rollout: decide_rollout, then the status


def classify(*, invalid: bool, owned_by_other: bool, target_missing: bool, blue_green: bool,
             caught_up: bool) -> Verdict:
    """The first question of every reconcile, in the order the answers take precedence."""
    if invalid:
        return Verdict.INVALID
    if owned_by_other:
        return Verdict.NOT_OWNER
    if target_missing:
        return Verdict.TARGET_MISSING
    if not caught_up:
        return Verdict.STALE
    return Verdict.BLUE_GREEN if blue_green else Verdict.ROLL


def announce_missing(old_status: Obj) -> bool:
    """A missing target gets its TargetNotFound event once, not every pass (nor after a restart)."""
    return not lifecycle.target_was_missing(old_status)


@dataclass(frozen=True)
class Refusal:
    """A partition rollout refused up front (its driver raised InvalidInput): held while the same
    templates and policy generation stand, for lifecycle.REFUSAL_RETRY_S."""

    template_key: str
    generation: int
    at: float  # time.monotonic()
    why: str


@dataclass(frozen=True)
class RefusalCheck:
    why: str | None  # None: nothing holds the rollout
    expired: bool  # the record no longer applies: forget it
    recheck_s: float | None  # look again when the hold ends


def refusal(rec: Refusal | None, template_key: str, generation: int, now: float) -> RefusalCheck:
    if rec is None:
        return RefusalCheck(None, False, None)
    left = lifecycle.REFUSAL_RETRY_S - (now - rec.at)
    if rec.template_key != template_key or rec.generation != generation or left <= 0:
        return RefusalCheck(None, True, None)
    return RefusalCheck(rec.why, False, left)


@dataclass(frozen=True)
class SettleCheck:
    settled: bool
    record: tuple[str, float]  # (pair hash, since): the settle timer to keep
    recheck_s: float | None


def settle(rec: tuple[str, float] | None, pair_hash: str, now: float) -> SettleCheck:
    """Whether a pair's templates have been ``pair_hash`` for SETTLE_S."""
    if rec is None or rec[0] != pair_hash:
        return SettleCheck(False, (pair_hash, now), SETTLE_S)
    if now - rec[1] < SETTLE_S:
        return SettleCheck(False, rec, SETTLE_S - (now - rec[1]))
    return SettleCheck(True, rec, None)


class EffectKind(StrEnum):
    ADOPT = "adopt"  # first sight, fully rolled: the running template is the stable revision
    REAPPLY = "reapply"  # a retry asked after the rollback: put the failed template back (partition held)


@dataclass(frozen=True)
class Effect:
    kind: EffectKind
    index: int  # which target object (a pair: 0 decode, 1 prefill)
    template: Obj | None = None  # REAPPLY: the failed template the rollback recorded


@dataclass(frozen=True)
class Targets:
    """What the targets ask for. ``drive``: None nothing to roll; False drive; True drive as the retry
    of a failed release. ``effects`` are applied in order before anything else."""

    drive: bool | None
    effects: tuple[Effect, ...] = ()


def targets(objs: Sequence[Obj], *, retry_asked: str | None, kind: str,
            fully_rolled: Callable[[Obj], bool]) -> Targets:
    """Read each target's rollout annotations. ``fully_rolled`` is the readiness gate (pure for an LWS;
    a DisaggregatedSet's reads its child LWS): asked only of a target seen for the first time."""
    drive: bool | None = None
    effects: list[Effect] = []
    for i, obj in enumerate(objs):
        st = state.RolloutState.from_object(obj)
        if st.active:
            if not st.paused or st.abort:  # an abort of a paused rollout rolls it back
                drive = False
            continue
        cur = state.template_hash(state.template_of(obj))
        stable = pstatus.stable_hash(st)
        if cur == stable:
            if st.id and retry_asked == st.id and st.phase != state.SUCCEEDED:
                failed = gates.recorded_failure(st)  # a DisaggregatedSet has no partition to hold it
                if failed is not None and kind != "DisaggregatedSet":
                    effects.append(Effect(EffectKind.REAPPLY, i, failed))  # its write wakes the next pass
            continue
        if not stable and not st.id:
            if fully_rolled(obj):
                effects.append(Effect(EffectKind.ADOPT, i))
            else:
                drive = False
            continue
        if st.id and st.manifest_hash == cur:  # this template's rollout already ended
            if retry_asked and retry_asked == st.id:
                return Targets(True, tuple(effects))
            continue
        drive = False
    return Targets(drive, tuple(effects))


@dataclass(frozen=True)
class Observed:
    """One idle partition policy as the supervisor sees it."""

    objs: Sequence[Obj]
    generation: int
    retry_asked: str | None  # the policy's retry annotation (`kubectl lwsflow retry`)
    kind: str  # the target kind
    probed: bool  # the policy has a P/D probe (pd_gate.enabled)
    held: Obj | None  # the probe record holding these templates (pd_gate.holds), if any
    refused: Refusal | None  # this policy's up-front refusal record
    settling: tuple[str, float] | None  # this policy's settle timer
    pair_hash: str  # the templates' hash (bluegreen.pair_hash): what the settle timer follows
    template_key: str  # pd_gate.template_key of the targets
    now: float  # time.monotonic()
    fully_rolled: Callable[[Obj], bool]


@dataclass(frozen=True)
class Decision:
    """What to do for an idle partition policy, in order: ``effects``, then start a driver when
    ``start`` is not None (its value: whether it is a retry); ``rechecks`` are wall delays after which
    the policy is looked at again; ``refusal_expired`` and ``settling`` update the supervisor's timers;
    ``waiting`` says why a rollout to drive was not started (empty when started or nothing to do)."""

    effects: tuple[Effect, ...] = ()
    start: bool | None = None
    rechecks: tuple[float, ...] = ()
    refusal_expired: bool = False
    settling: tuple[str, float] | None = None  # None: leave the timer as it is
    waiting: str = ""


HELD, REFUSED, SETTLING = "held by the P/D probe", "refused up front", "waiting for both roles' sync"


def decide_rollout(obs: Observed) -> Decision:
    """Adopt, reapply, start a driver, or wait (held by the probe, refused, settling a pair's sync)."""
    want = targets(obs.objs, retry_asked=obs.retry_asked, kind=obs.kind, fully_rolled=obs.fully_rolled)
    rechecks: list[float] = []
    held = obs.held if obs.probed else None
    if held is not None and held.get("verdict") == pd_gate.NOT_RUN:
        rechecks.append(NOT_RUN_RECHECK_S)
    ref = refusal(obs.refused, obs.template_key, obs.generation, obs.now)
    if ref.recheck_s is not None:
        rechecks.append(ref.recheck_s)
    out = Decision(effects=want.effects, refusal_expired=ref.expired, rechecks=tuple(rechecks))
    if want.drive is None:
        return out
    if held:
        return replace(out, waiting=HELD)
    if ref.why is not None:
        return replace(out, waiting=REFUSED)
    if obs.probed and not state.any_active(obs.objs):  # a fresh probed pair: probe both roles, not half
        s = settle(obs.settling, obs.pair_hash, obs.now)
        if not s.settled:
            return replace(out, waiting=SETTLING, settling=s.record,
                           rechecks=(*rechecks, *([s.recheck_s] if s.recheck_s is not None else [])))
    return replace(out, start=want.drive)
