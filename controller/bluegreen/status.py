"""The status of a ``strategy: blue-green`` RolloutPolicy, derived from its HTTPRoute's state.

A blue-green persists its progress on the HTTPRoute (``rollout.lwsflow.io/bluegreen-*``, see
``bluegreen/plan.py``), not on the pair's LWS; the keys and conditions are those of
:func:`lwsflow.controller.policy.status.compute`, so Events and the printer columns read the same.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from lwsflow.controller.api.phases import ConditionType, PolicyPhase
from lwsflow.controller.api.wire import Obj
from lwsflow.controller.bluegreen import plan as P
from lwsflow.controller.bluegreen.executor import ABORTED, PAUSE
from lwsflow.controller.policy.model import HISTORY_LIMIT, RolloutPolicySpec
from lwsflow.controller.policy.status import _condition, stable_hash
from lwsflow.controller.rollout import state

_FINAL = {P.SUCCEEDED: PolicyPhase.SUCCEEDED, P.ROLLED_BACK: PolicyPhase.ROLLED_BACK,
          P.FAILED: PolicyPhase.FAILED}


def _weight(route: Obj | None, pool: str) -> int:
    """The pool's backendRef weight in the route's first rule that names it (0: none)."""
    for rule in ((route or {}).get("spec") or {}).get("rules") or []:
        for ref in rule.get("backendRefs") or []:
            if ref.get("kind") == "InferencePool" and ref.get("name") == pool:
                return int(ref.get("weight", 1))
    return 0


def compute(spec: RolloutPolicySpec, st: P.BlueGreenState, route: Obj | None, objs: Sequence[Obj],
            generation: int, old: Obj, now: str) -> Obj:
    """The status for a pair (``objs``: decode, prefill LWS) whose HTTPRoute holds ``st`` (only a
    blue-green this controller runs, one that folds back, counts: the CLI's is the CLI's to report)."""
    ours = bool(st.phase) and bool(st.fold_back)
    # the release by its decode template's hash, as a partition rollout of the pair names it (the
    # pipeline's controller mode waits for a verdict on that hash)
    release = json.loads(st.fold_back).get("templates", {}).get("decode", "") if ours else ""
    current = state.template_hash(state.template_of(objs[0]))
    stable = stable_hash(state.RolloutState.from_object(objs[0]))
    phase = PolicyPhase.IDLE if not ours else (PolicyPhase.PROGRESSING if st.active
                                               else _FINAL.get(st.phase, PolicyPhase.FAILED))
    if phase == PolicyPhase.ROLLED_BACK and st.reason == ABORTED:
        phase = PolicyPhase.ABORTED
    held = (((route or {}).get("metadata") or {}).get("annotations") or {}).get(PAUSE)
    if phase == PolicyPhase.PROGRESSING and held == st.id:
        phase = PolicyPhase.PAUSED  # held before the next shift once the current stage passes
    stages = len(st.weights) if ours else len(spec.stages)
    stage = min(st.passed + 1, stages) if ours and st.active else 0
    message = st.reason if ours else ""
    if ours and st.active and not message and st.green is not None:
        message = (f"green {st.green.pair} at {_weight(route, st.green.pool)}% of the traffic "
                   f"({st.phase})")
    if st.phase and not st.fold_back and st.active:
        message = f"blue-green {st.id} was started by `lwsflow rollout`; it is the CLI's to drive"
    history: list[dict[str, Any]] = list(old.get("history") or [])
    if ours and not st.active and all(h.get("id") != st.id for h in history):
        history.append({"id": st.id, "templateHash": release, "outcome": phase.value, "started": "",
                        "finished": now, "message": st.reason[:300]})
    conds = list(old.get("conditions") or [])
    out: Obj = {
        "observedGeneration": generation, "phase": phase.value, "message": message[:500],
        "rolloutId": st.id if ours else "", "currentStage": stage, "stages": stages,
        "stageText": f"{stage}/{stages}" if stage else "", "observedTemplateHash": current,
        "stableRevision": stable,
        "canaryRevision": release if ours and st.active else (current if current != stable else ""),
        "promotedStage": 0,
        "conditions": [_condition(ConditionType.PROGRESSING, phase == PolicyPhase.PROGRESSING, phase, message,
                                  now, conds),
                       _condition(ConditionType.READY, phase in (PolicyPhase.IDLE, PolicyPhase.SUCCEEDED),
                                  phase, message, now, conds)],
        "history": history[-HISTORY_LIMIT:]}
    if ours and st.blue is not None and st.green is not None:
        out["blueGreen"] = {"phase": st.phase, "bluePair": st.blue.pair, "greenPair": st.green.pair,
                            "bluePool": st.blue.pool, "greenPool": st.green.pool,
                            "blueWeight": _weight(route, st.blue.pool),
                            "greenWeight": _weight(route, st.green.pool), "weights": list(st.weights)}
    return out
