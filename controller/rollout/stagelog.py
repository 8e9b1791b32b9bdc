"""The rollout's stage log: when each stage started, passed its gate and ended, and the rollback.

Kept on the target as one controller-owned annotation (``rollout.lwsflow.io/stage-log``, JSON), written
in the same patches that record a stage passed, a stage failed and a rollback (no extra API request),
so whoever drove the rollout (``lwsflow rollout``, the pipeline step, the in-cluster controller) leaves
the same record, and the RolloutPolicy status copies it into its history when the rollout ends
(``policy/status.py``). ``lwsflow report`` draws the pictures from it.

Bounded: a new rollout starts an empty log (the ``_start`` write resets every state annotation) and
at most ``LIMIT`` entries are kept (a stage that re-gates after a lost bake is still one entry).
Times are the cluster's clock in epoch seconds (0.1 s), the compact form; the policy status converts
them to RFC 3339.
"""

from __future__ import annotations

import json
from typing import Any

from lwsflow.controller.rollout.report import StageRecord

LIMIT = 24
Entry = dict[str, Any]


def parse(text: str) -> list[Entry]:
    """The entries of an annotation value ([] for a missing or foreign value: a log is best effort)."""
    try:
        value = json.loads(text) if text else []
    except ValueError:
        return []
    return [e for e in value if isinstance(e, dict)] if isinstance(value, list) else []


def dump(entries: list[Entry]) -> str:
    return json.dumps(entries[-LIMIT:], separators=(",", ":"))


def _t(value: float | None) -> float | None:
    return round(value, 1) if value is not None else None


def stage_entry(rec: StageRecord, *, ended: float, result: str, replicas: int) -> Entry:
    """One stage as it ended (``result``: passed or failed)."""
    entry: Entry = {"stage": rec.index, "groups": rec.target_groups, "replicas": replicas,
                    "started": _t(rec.started), "gatePassed": _t(rec.gate_passed), "ended": _t(ended),
                    "result": result}
    if rec.min_ready_groups is not None:
        entry["minReady"] = rec.min_ready_groups
    return entry


def with_stage(text: str, entry: Entry) -> str:
    """The log with ``entry`` recorded: in place of an entry of the same stage and result (which a
    controller that resumed after the write but before its own bookkeeping would add twice), else last."""
    log = parse(text)
    for i, e in enumerate(log):
        if e.get("stage") == entry["stage"] and e.get("result") == entry["result"]:
            log[i] = entry
            return dump(log)
    return dump([*log, entry])


def with_failed(text: str, recs: list[StageRecord], *, replicas: int) -> str:
    """The log with every failed stage of ``recs`` not yet in it."""
    for rec in recs:
        if rec.result == "failed" and rec.ended is not None:
            text = with_stage(text, stage_entry(rec, ended=rec.ended, result="failed", replicas=replicas))
    return text


def with_rollback(text: str, *, started: float | None = None, ended: float | None = None) -> str:
    """The log with a rollback begun at ``started``, or the last rollback ended at ``ended``."""
    log = parse(text)
    if started is not None:
        return dump([*log, {"rollback": _t(started)}])
    for e in reversed(log):
        if "rollback" in e:
            e["ended"] = _t(ended)
            break
    return dump(log)
