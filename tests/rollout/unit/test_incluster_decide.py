"""The controller's pure reconcile (``incluster/decide.py``): observed state in, decisions out; no cluster."""

from __future__ import annotations

from typing import Any

import pytest

from lwsflow.controller.incluster import decide, lifecycle
from lwsflow.controller.incluster.decide import HELD, REFUSED, SETTLING, Decision, Effect, EffectKind, Verdict
from lwsflow.controller.rollout import state
from tests.rollout.rollout_builders import lws, with_state

V1, V2 = lws(image="vllm:1"), lws(image="vllm:2")


def _hash(obj: dict) -> str:
    return state.template_hash(state.template_of(obj))


STABLE_V1 = state.pack(state.template_of(V1))


def at(obj: dict, **kw: Any) -> dict:
    """``obj`` carrying the rollout record ``kw`` (V1 recorded as the stable template)."""
    return with_state(obj, state.RolloutState(last_good=STABLE_V1, **kw))


FIRST_SIGHT = V1  # no stable template, no rollout
SETTLED = at(V1)  # v1 stable and running
SYNCED = at(V2)  # Git synced v2: not tried yet
RUNNING = at(V2, id="r1", phase=state.RUNNING, target_hash=_hash(V2), targets=[1, 4])
PAUSED = at(V2, id="r1", phase=state.RUNNING, target_hash=_hash(V2), targets=[1, 4], paused=True)
PAUSED_ABORT = at(V2, id="r1", phase=state.RUNNING, target_hash=_hash(V2), targets=[1, 4], paused=True,
                  abort=True)
ENDED = at(V2, id="r1", phase=state.FAILED, target_hash=_hash(V2), manifest_hash=_hash(V2))
ROLLED_BACK = at(V1, id="r1", phase=state.ROLLED_BACK, target_hash=_hash(V2),
                 failed_template=state.pack(state.template_of(V2)))
SUCCEEDED = at(V1, id="r1", phase=state.SUCCEEDED, target_hash=_hash(V1))


def observed(objs: list[dict], **kw: Any) -> decide.Observed:
    base: dict[str, Any] = {
        "objs": objs, "generation": 1, "retry_asked": None, "kind": "LeaderWorkerSet", "probed": False,
        "held": None, "refused": None, "settling": None, "pair_hash": "p1", "template_key": "k1",
        "now": 1000.0, "fully_rolled": lambda _o: True}
    return decide.Observed(**{**base, **kw})


# (case, objects, observation overrides, expected decision)
TARGETS: list[tuple[str, list[dict], dict[str, Any], Decision]] = [
    ("first sight, fully rolled: adopted as stable", [FIRST_SIGHT], {},
     Decision(effects=(Effect(EffectKind.ADOPT, 0),))),
    ("first sight, still rolling: drive it", [FIRST_SIGHT], {"fully_rolled": lambda _o: False},
     Decision(start=False)),
    ("the stable template runs: nothing to do", [SETTLED], {}, Decision()),
    ("a new template synced: start its rollout", [SYNCED], {}, Decision(start=False)),
    ("a rollout under way: resume it", [RUNNING], {}, Decision(start=False)),
    ("a paused rollout: left paused", [PAUSED], {}, Decision()),
    ("an abort of a paused rollout: drive it (the rollback)", [PAUSED_ABORT], {}, Decision(start=False)),
    ("this template's rollout ended: not again", [ENDED], {}, Decision()),
    ("this template's rollout ended, retry asked: drive it as a retry", [ENDED], {"retry_asked": "r1"},
     Decision(start=True)),
    ("a retry of another rollout: not this one", [ENDED], {"retry_asked": "r0"}, Decision()),
    ("rolled back, retry asked: the failed template is put back", [ROLLED_BACK], {"retry_asked": "r1"},
     Decision(effects=(Effect(EffectKind.REAPPLY, 0, state.template_of(V2)),))),
    ("rolled back, retry asked of a DisaggregatedSet: no partition to hold it", [ROLLED_BACK],
     {"retry_asked": "r1", "kind": "DisaggregatedSet"}, Decision()),
    ("succeeded, retry asked: nothing to retry", [SUCCEEDED], {"retry_asked": "r1"}, Decision()),
    ("a pair: decode adopted, prefill's ended rollout retried", [FIRST_SIGHT, ENDED], {"retry_asked": "r1"},
     Decision(effects=(Effect(EffectKind.ADOPT, 0),), start=True)),
    ("a pair: one role synced, the other running its stable template", [SYNCED, SETTLED], {},
     Decision(start=False)),
]


@pytest.mark.parametrize(("objs", "kw", "want"), [c[1:] for c in TARGETS], ids=[c[0] for c in TARGETS])
def test_what_the_targets_ask_for(objs: list[dict], kw: dict[str, Any], want: Decision) -> None:
    assert decide.decide_rollout(observed(objs, **kw)) == want


REFUSED_REC = decide.Refusal("k1", 1, 990.0, "no room for the surge")
LEFT = lifecycle.REFUSAL_RETRY_S - 10.0

# (case, objects, observation overrides, expected decision): what holds a rollout to drive
WAITS: list[tuple[str, list[dict], dict[str, Any], Decision]] = [
    ("held by the P/D probe's refusal", [SYNCED, SYNCED], {"probed": True, "held": {"verdict": "Refused"}},
     Decision(waiting=HELD)),
    ("held by a probe that could not run: looked at again", [SYNCED, SYNCED],
     {"probed": True, "held": {"verdict": "NotRun"}},
     Decision(waiting=HELD, rechecks=(decide.NOT_RUN_RECHECK_S,))),
    ("a probe record without the probe enabled holds nothing", [SYNCED], {"held": {"verdict": "Refused"}},
     Decision(start=False)),
    ("refused up front: held for the retry window, looked at when it ends", [SYNCED],
     {"refused": REFUSED_REC}, Decision(waiting=REFUSED, rechecks=(LEFT,))),
    ("refused, then the templates changed: the record goes, the rollout starts", [SYNCED],
     {"refused": REFUSED_REC, "template_key": "k2"}, Decision(start=False, refusal_expired=True)),
    ("refused, then the policy changed", [SYNCED], {"refused": REFUSED_REC, "generation": 2},
     Decision(start=False, refusal_expired=True)),
    ("refused, the retry window over", [SYNCED], {"refused": REFUSED_REC, "now": 990.0 + 1e6},
     Decision(start=False, refusal_expired=True)),
    ("refused, nothing to roll: the record stays, the window is watched", [SETTLED],
     {"refused": REFUSED_REC}, Decision(rechecks=(LEFT,))),
    ("a fresh probed pair first seen: its sync settles first", [SYNCED, SYNCED], {"probed": True},
     Decision(waiting=SETTLING, settling=("p1", 1000.0), rechecks=(decide.SETTLE_S,))),
    ("a fresh probed pair still settling", [SYNCED, SYNCED], {"probed": True, "settling": ("p1", 999.5)},
     Decision(waiting=SETTLING, settling=("p1", 999.5), rechecks=(0.5,))),
    ("a fresh probed pair whose templates changed again", [SYNCED, SYNCED],
     {"probed": True, "settling": ("p0", 900.0)},
     Decision(waiting=SETTLING, settling=("p1", 1000.0), rechecks=(decide.SETTLE_S,))),
    ("a fresh probed pair settled: start", [SYNCED, SYNCED], {"probed": True, "settling": ("p1", 990.0)},
     Decision(start=False)),
    ("a probed pair mid-rollout: no settling", [RUNNING, RUNNING], {"probed": True}, Decision(start=False)),
]


@pytest.mark.parametrize(("objs", "kw", "want"), [c[1:] for c in WAITS], ids=[c[0] for c in WAITS])
def test_what_holds_a_rollout_back(objs: list[dict], kw: dict[str, Any], want: Decision) -> None:
    assert decide.decide_rollout(observed(objs, **kw)) == want


def test_a_first_sight_not_needing_the_readiness_gate_never_asks_for_it() -> None:
    """The gate of a DisaggregatedSet reads its child LWS: asked only of a target seen for the first time."""
    asked: list[dict] = []
    decide.decide_rollout(observed([SETTLED, SYNCED, RUNNING], fully_rolled=lambda o: bool(asked.append(o))))
    assert asked == []


# (invalid, owned by another, target missing, blue-green, caught up) -> verdict: earlier answers win
CLASSIFY = [
    ((True, True, True, True, False), Verdict.INVALID),
    ((False, True, True, True, False), Verdict.NOT_OWNER),
    ((False, False, True, True, False), Verdict.TARGET_MISSING),
    ((False, False, False, True, False), Verdict.STALE),
    ((False, False, False, False, False), Verdict.STALE),
    ((False, False, False, True, True), Verdict.BLUE_GREEN),
    ((False, False, False, False, True), Verdict.ROLL),
]


@pytest.mark.parametrize(("flags", "want"), CLASSIFY)
def test_the_first_question_of_every_reconcile(flags: tuple[bool, ...], want: Verdict) -> None:
    invalid, owned, missing, bg, caught_up = flags
    assert decide.classify(invalid=invalid, owned_by_other=owned, target_missing=missing, blue_green=bg,
                           caught_up=caught_up) is want


@pytest.mark.parametrize(("old", "announce"), [
    ({}, True),
    ({"conditions": [{"type": "TargetFound", "status": "False", "reason": "TargetNotFound"}]}, False),
    ({"conditions": [{"type": "TargetFound", "status": "True"}]}, True),
])
def test_a_missing_target_is_announced_once(old: dict, announce: bool) -> None:
    assert decide.announce_missing(old) is announce
