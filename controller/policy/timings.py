"""The stage timings of a rollout for ``status.history``: the target's stage log (``rollout/stagelog``)
turned into the status's RFC 3339 form, both roles of a pair in one list.

The log on the target is overwritten by the next rollout; the policy's history keeps the last
``HISTORY_LIMIT`` rollouts' timings, so ``lwsflow report`` can draw a release and the one before it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lwsflow.controller.api import labels as L
from lwsflow.controller.api import wire
from lwsflow.controller.api.wire import Obj
from lwsflow.controller.policy.model import STAGE_TIMINGS_LIMIT
from lwsflow.controller.rollout import stagelog, state

_FIELDS = (("groups", "groups"), ("replicas", "replicas"), ("result", "result"), ("minReady", "minReady"))


def _iso(value: Any) -> str:
    return state.iso(float(value)) if isinstance(value, int | float) else ""


def timings(objs: Sequence[Obj]) -> dict[str, Any]:
    """``stages``, ``rollbackStarted`` and ``rollbackFinished`` of a history record (the first
    rollback of the roles: a pair rolls both back together)."""
    stages: list[dict[str, Any]] = []
    rb_started: list[str] = []
    rb_finished: list[str] = []
    for obj in objs:
        labels = wire.metadata(obj).get("labels") or {}
        role = labels.get(L.ROLE, "") if L.PD_PAIR in labels else ""  # not "aggregated"
        for e in stagelog.parse(state.RolloutState.from_object(obj).stage_log):
            if "rollback" in e:
                rb_started.append(_iso(e.get("rollback")))
                rb_finished.append(_iso(e.get("ended")))
                continue
            if not isinstance(e.get("stage"), int):
                continue
            rec: dict[str, Any] = {"stage": e["stage"], "role": role, "started": _iso(e.get("started")),
                                   "gatePassed": _iso(e.get("gatePassed")), "ended": _iso(e.get("ended"))}
            rec.update({k: e[src] for k, src in _FIELDS if e.get(src) is not None})
            stages.append(rec)
    stages.sort(key=lambda r: (r["started"] or r["ended"], r["role"]))
    out: dict[str, Any] = {"stages": stages[-STAGE_TIMINGS_LIMIT:]}
    if any(rb_started):
        out["rollbackStarted"] = min(t for t in rb_started if t)
        out["rollbackFinished"] = max(rb_finished) if all(rb_finished) else ""
    return out
