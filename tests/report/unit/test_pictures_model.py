"""What ``lwsflow report`` draws, checked on the pictures' data (``pictures.model``) and on the artists
drawn from it: the Events of two consecutive rollouts of one policy (the engine's on the target, the
in-cluster controller's on the RolloutPolicy of the same name, the next rollout's start recorded by the
controller first) land in their own panels, one mark per event, "held" only before a gated stage, and
every lane and panel on its own rollout's time axis."""

from __future__ import annotations

from typing import Any

import pytest

from lwsflow import report as pictures
from lwsflow.controller.kube.events import ROLLOUT_ID
from lwsflow.report import model, records
from lwsflow.report.records import Stage, Trace

T0 = 1_800_000_000.0
A, B = "aaaaaaaaaaaa", "bbbbbbbbbbbb"
LATER = 1750.0  # minutes between the two rollouts (issue 31: the failed one's axis stretched to 1,750)


def _m(minutes: float) -> float:
    return T0 + minutes * 60


def _event(rv: int, minutes: float, kind: str, reason: str, message: str, rollout: str,
           annotated: bool) -> dict[str, Any]:
    """A core/v1 Event as the cluster keeps it; ``annotated``: written by this release's recorder."""
    stamp = records.state.iso(_m(minutes))
    meta: dict[str, Any] = {"name": f"m.{rv}", "namespace": "ns", "resourceVersion": str(rv)}
    if annotated and kind != "RolloutPolicy":
        meta["annotations"] = {ROLLOUT_ID: rollout}
    return {"metadata": meta, "involvedObject": {"kind": kind, "name": "m", "namespace": "ns"},
            "reason": reason, "message": message, "firstTimestamp": stamp}


def _recorded(annotated: bool) -> list[dict[str, Any]]:
    """Rollout A fails stage 1 and is rolled back; B, 1,750 minutes later, passes both stages, held at
    the manual gate before stage 2. The controller's Events (on the policy) repeat the engine's."""
    lws, pol = "LeaderWorkerSet", "RolloutPolicy"
    rows = [
        (0.0, pol, "RolloutStarted", f"rollout {A} of LeaderWorkerSet/m started: template 1 (stable 0)", A),
        (0.1, lws, "RolloutStarted", f"rollout {A}: stages 1,100% -> groups [1, 2], frozen at "
                                     "partition 2", A),
        (1.0, lws, "StageStarted", "stage 1/2: partition 1, 1 groups to update", A),
        (10.0, lws, "StageFailed", "stage 1 hook failed: lwsflow: exit 1 analysis failed", A),
        (10.1, lws, "RollbackStarted", f"rollout {A}: stage 1 hook failed; restoring the previous "
                                       "template", A),
        (12.0, lws, "RolledBack", f"rollout {A}: previous template restored on every group", A),
        # the controller announces B before the engine records it
        (LATER, pol, "RolloutStarted", f"rollout {B} of LeaderWorkerSet/m started: template 2 (stable 0)", B),
        (LATER + 0.1, lws, "RolloutStarted", f"rollout {B}: stages 1,100% -> groups [1, 2], frozen at "
                                             "partition 2", B),
        (LATER + 1, lws, "StageStarted", "stage 1/2: partition 1, 1 groups to update", B),
        (LATER + 6, lws, "StagePassed", "stage 1/2 passed: target=1 replicas=2/2 ready=2", B),
        (LATER + 6.2, pol, "StagePassed", "LeaderWorkerSet/m: stage 1/2 passed", B),
        (LATER + 20, lws, "StageStarted", "stage 2/2: partition 0, 2 groups to update", B),
        (LATER + 25, lws, "StagePassed", "stage 2/2 passed: target=2 replicas=2/2 ready=2", B),
        (LATER + 25.1, lws, "RolloutSucceeded", f"rollout {B}: all stages passed", B),
        (LATER + 25.2, pol, "RolloutSucceeded", f"LeaderWorkerSet/m: rollout {B} succeeded", B),
    ]
    return [_event(rv, at, kind, reason, msg, rid, annotated)
            for rv, (at, kind, reason, msg, rid) in enumerate(rows, start=100)]


def _history() -> list[Trace]:
    """The two rollouts as the policy's status history keeps them (stage times, no Events yet)."""
    a = Trace("ns", "LeaderWorkerSet", "m", A, "RolledBack", _m(0), _m(12), "status",
              [Stage(1, "", 1, _m(1), None, _m(10), "failed", replicas=2)], (_m(10.1), _m(12)),
              label="m #1", objects=["m"], gated=[2])
    b = Trace("ns", "LeaderWorkerSet", "m", B, "Succeeded", _m(LATER), _m(LATER + 25.1), "status",
              [Stage(1, "", 1, _m(LATER + 1), _m(LATER + 3), _m(LATER + 6), "passed", replicas=2),
               Stage(2, "", 2, _m(LATER + 20), _m(LATER + 22), _m(LATER + 25), "passed", replicas=2)],
              label="m #2", objects=["m"], gated=[2])
    return [a, b]


def _ungated() -> Trace:
    """Another policy's rollout, no manual gate, its stage 2 started 4 minutes after stage 1 ended (the
    controller's own pace, a P/D role waiting for the other): nothing held it."""
    return Trace("ns", "LeaderWorkerSet", "n", "cccccccccccc", "Succeeded", _m(0), _m(6.1), "status",
                 [Stage(1, "", 1, _m(0.1), _m(0.5), _m(1.0), "passed"),
                  Stage(2, "", 2, _m(5.0), _m(5.5), _m(6.0), "passed")], label="n")


def _traces(annotated: bool) -> list[Trace]:
    traces = _history()
    records.attach_events(traces, {"ns": records.owned_events(_recorded(annotated))})
    return traces


@pytest.mark.parametrize("annotated", [False, True], ids=["older-events", "rollout-id-annotation"])
def test_each_rollouts_events_land_in_its_own_panel(annotated: bool) -> None:
    a, b = _traces(annotated)
    assert {r for _t, r, _m in a.events} == {"RolloutStarted", "StageStarted", "StageFailed",
                                             "RollbackStarted", "RolledBack"}
    assert all(_m(0) <= at <= _m(12) for at, _r, _msg in a.events)  # nothing of B's
    assert all(_m(LATER) <= at <= _m(LATER + 25.2) for at, _r, _msg in b.events)
    assert not [e for e in a.events + b.events if e[2].startswith("LeaderWorkerSet/")]  # the policy's

    first, second = model.panels([a, b])
    # each panel's axis spans its own rollout: A's 12 minutes, not the 1,750 until B started
    assert first.xmin == 0.0 and first.xmax == pytest.approx(12.0, abs=0.2)
    assert second.xmin == 0.0 and second.xmax == pytest.approx(25.2, abs=0.2)
    assert [m.label for m in first.marks] == ["start", "stage 1", "1 FAILED · rollback", "rolled back"]
    assert [m.label for m in second.marks] == ["start", "stage 1", "1 passed", "stage 2",
                                               "2 passed · succeeded"]


def test_the_rollout_id_annotation_places_events_whatever_their_wording_or_clock() -> None:
    """B's start Events expired (the API server keeps Events an hour), the rest name no rollout, and the
    process that drove B ran its clock 2 minutes behind the controller that wrote the history: by time,
    B's first stage would fall inside A's span; by their annotation they are B's."""
    recorded = [e for e in _recorded(annotated=True)
                if not (e["reason"] == "RolloutStarted" and e["message"].startswith(f"rollout {B}"))]
    for e in recorded:
        at = records.rfc3339(e["firstTimestamp"])
        assert at is not None
        if e["metadata"].get("annotations", {}).get(ROLLOUT_ID) == B:
            e["firstTimestamp"] = records.state.iso(at - 120)
    a, b = _history()
    records.attach_events([a, b], {"ns": records.owned_events(recorded)})
    assert [r for _t, r, _m in b.events] == ["StageStarted", "StagePassed", "StageStarted", "StagePassed",
                                             "RolloutSucceeded"]
    assert max(at for at, _r, _m in a.events) == _m(12)
    assert model.panels([a])[0].xmax == pytest.approx(12.0, abs=0.2)


def test_one_event_is_one_mark() -> None:
    """A stage recorded passing twice (the engine, the controller: ``records.json`` of an older report
    kept both) is one "passed" mark; the same holds for a start recorded twice."""
    _a, b = _traces(annotated=True)
    b.events += [(_m(LATER + 6.2), "StagePassed", "LeaderWorkerSet/m: stage 1/2 passed"),
                 (_m(LATER + 9.0), "RolloutStarted", f"rollout {B} of LeaderWorkerSet/m started")]
    (panel,) = model.panels([b])
    reasons = [r for m in panel.marks for r in m.reasons]
    assert reasons.count("StagePassed") == 2 and reasons.count("RolloutStarted") == 1
    labels = " · ".join(m.label for m in panel.marks)
    assert labels.count("1 passed") == 1 and "?" not in labels


def test_held_only_where_a_manual_gate_held() -> None:
    a, b = _traces(annotated=True)
    lanes = model.lanes([a, b, _ungated()])
    assert [lane.label for lane in lanes] == ["m #1", "m #2", "n"]
    assert lanes[0].holds == []  # A failed in stage 1: it never reached its gate
    assert lanes[1].holds == [model.Hold("hold:m #2:2", 2, 6.0, 20.0, "held")]  # gate before stage 2
    assert lanes[2].holds == []  # a 4-minute gap, no gate: not "held"
    b.gated = []
    assert model.lanes([b])[0].holds == []


def test_every_lane_on_its_own_scale() -> None:
    a, b = _traces(annotated=True)
    short = _ungated()
    lanes = model.lanes([a, b, short])
    assert [round(lane.xmax, 1) for lane in lanes] == [12.0, 25.0, 6.0]
    kinds = [(bar.kind, bar.stage, round(bar.start, 1), round(bar.end, 1)) for bar in lanes[1].bars]
    assert kinds == [("wait", 1, 1.0, 3.0), ("bake", 1, 3.0, 6.0), ("wait", 2, 20.0, 22.0),
                     ("bake", 2, 22.0, 25.0)]
    assert [(b.gid, round(b.start, 1), round(b.end, 1)) for b in lanes[0].bars] == [
        ("stage:m #1:1:wait", 1.0, 10.0), ("rollback:m #1", 10.1, 12.0)]


def test_the_figures_draw_the_model() -> None:
    """The artists: one axis per lane with its own limits, the hold where the model has one, each
    timeline panel limited to its rollout, one mark artist per model mark."""
    traces = [*_traces(annotated=True), _ungated()]
    lanes = model.lanes(traces)
    fig = pictures.stages_figure(traces)
    assert [ax.get_yticklabels()[0].get_text() for ax in fig.axes] == [lane.label for lane in lanes]
    for ax, lane in zip(fig.axes, lanes, strict=True):
        assert ax.get_xlim()[1] == pytest.approx(lane.xmax * 1.12 + 0.05)
    holds = {str(a.get_gid()) for a in fig.findobj(lambda a: str(a.get_gid() or "").startswith("hold:"))}
    assert holds == {"hold:m #2:2"}
    helds = [t for t in fig.findobj(lambda a: hasattr(a, "get_text") and a.get_text() == "held")]
    assert len(helds) == 1

    timeline = pictures.timeline_figure(traces)
    panels = model.panels(traces)
    axes = [ax for ax in timeline.axes if ax.get_ylabel() == "groups"]
    for ax, panel in zip(axes, panels, strict=True):
        assert ax.get_xlim() == pytest.approx((panel.xmin, panel.xmax * 1.02 + 0.05))
        drawn = [a for a in ax.get_children()
                 if str(getattr(a, "get_gid", lambda: "")() or "").startswith("mark:")]
        assert [a.get_text() for a in drawn] == [m.label for m in panel.marks]
    assert axes[0].get_xlim()[1] < 15  # A's panel: its 12 minutes
