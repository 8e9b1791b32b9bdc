"""The stage log annotation: bounded, one entry per stage and result, a rollback's start then end, and a
foreign value read as empty (the log is what the pictures draw; it must never break a rollout)."""

from __future__ import annotations

from lwsflow.controller.rollout import stagelog
from lwsflow.controller.rollout.report import StageRecord


def _rec(k: int, result: str = "passed") -> StageRecord:
    return StageRecord(k, k, 4 - k, started=100.0 * k, gate_passed=100.0 * k + 20.04, ended=100.0 * k + 50,
                       result=result, min_ready_groups=3)


def test_entries_replace_their_own_stage_and_stay_bounded() -> None:
    text = ""
    for k in range(1, stagelog.LIMIT + 6):
        text = stagelog.with_stage(text, stagelog.stage_entry(_rec(k), ended=100.0 * k + 50, result="passed",
                                                              replicas=4))
    text = stagelog.with_stage(text, stagelog.stage_entry(_rec(stagelog.LIMIT + 5), ended=1.0,
                                                          result="passed", replicas=4))
    log = stagelog.parse(text)
    assert len(log) == stagelog.LIMIT and log[0]["stage"] == 6 and log[-1]["ended"] == 1.0
    assert log[1] == {"stage": 7, "groups": 7, "replicas": 4, "started": 700.0, "gatePassed": 720.0,
                      "ended": 750.0, "result": "passed", "minReady": 3}


def test_failed_stage_then_rollback_start_and_end() -> None:
    failed = _rec(2, "failed")
    text = stagelog.with_failed(stagelog.with_stage("", stagelog.stage_entry(
        _rec(1), ended=150.0, result="passed", replicas=4)), [_rec(1), failed], replicas=4)
    text = stagelog.with_rollback(text, started=260.0)
    text = stagelog.with_failed(text, [failed], replicas=4)  # a resumed rollback adds nothing twice
    text = stagelog.with_rollback(text, ended=300.0)
    assert [(e.get("stage"), e.get("result"), e.get("rollback"), e.get("ended"))
            for e in stagelog.parse(text)] == [(1, "passed", None, 150.0), (2, "failed", None, 250.0),
                                              (None, None, 260.0, 300.0)]


def test_a_foreign_value_reads_as_an_empty_log() -> None:
    assert stagelog.parse("not json") == [] and stagelog.parse('{"a": 1}') == []
    assert stagelog.parse('[1, {"stage": 1}]') == [{"stage": 1}]
