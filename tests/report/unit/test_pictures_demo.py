"""The pictures of a recorded demo run (``tests/data/pictures/demo-records.json``: the ``records.json`` a
real ``lwsflow demo`` wrote, every rollout driven by the in-cluster controller): every stage of every model
drawn, both roles of the P/D pair, the bad release's failed stage and rollback mark, the holds at the
manual gate, every lane on its own scale; the demo's check fails when the records lose their stages."""

from __future__ import annotations

import json
from pathlib import Path

from lwsflow import report as pictures
from lwsflow.rehearsal import demo_pictures
from lwsflow.report.records import Trace, dump, load

RECORDED = Path(__file__).parents[2] / "data" / "pictures" / "demo-records.json"
MODELS = ["llama-8b", "llama-70b", "llama-405b", "llama-70b-pd", "llama-8b-pair", "qwen-7b"]


def _traces() -> list[Trace]:
    return load(json.loads(RECORDED.read_text()))


def _gids(fig: object, prefix: str) -> set[str]:
    return {str(a.get_gid()) for a in fig.findobj(  # type: ignore[attr-defined]
        lambda a: str(a.get_gid() or "").startswith(prefix))}


def test_every_stage_of_every_model_is_drawn() -> None:
    traces = _traces()
    assert dump(load(dump(traces))) == dump(traces)  # records.json reads back as written
    fig = pictures.stages_figure(traces)
    drawn = _gids(fig, "stage:")
    for t in traces:
        for s in t.stages:
            lane = f"{t.title} {s.role}".strip()
            assert {f"stage:{lane}:{s.index}:bake", f"stage:{lane}:{s.index}:wait"} & drawn, (lane, s.index)
    lanes = [ax.get_yticklabels()[0].get_text() for ax in fig.axes]  # an axis per lane
    assert lanes == ["llama-8b", "llama-70b", "llama-405b", "llama-70b-pd", "llama-8b-pair decode",
                     "llama-8b-pair prefill", "qwen-7b", "qwen-7b (bad release)"]
    assert _gids(fig, "rollback") == {"rollback:qwen-7b (bad release)", "rollback-mark:qwen-7b (bad release)"}
    assert "stage:qwen-7b (bad release):1:wait" in drawn and "stage:qwen-7b (bad release):1:bake" in drawn
    # the manual gate the demo's promoter passed (before llama-70b's last stage) is the only hold: the
    # pair's decode role waiting for prefill, qwen-7b's controller moving on, are no gate
    assert [t.gated for t in traces if t.gated] == [[2]] and traces[1].name == "llama-70b"
    assert _gids(fig, "hold:") == {"hold:llama-70b:2"}
    # every lane on its own scale: llama-8b's 6 minutes are not squashed by qwen-7b's 238
    ends = {lane: ax.get_xlim()[1] for lane, ax in zip(lanes, fig.axes, strict=True)}
    assert ends["llama-8b"] < 8 and ends["qwen-7b"] > 238
    assert ends["llama-8b-pair decode"] == ends["llama-8b-pair prefill"] > 64  # one rollout: one scale
    assert len(fig.legends) == 1


def test_the_timeline_has_a_panel_per_rollout_with_its_events() -> None:
    traces = _traces()
    fig = pictures.timeline_figure(traces)
    lines = {f"groups:{t.title}:{r}" for t in traces for r in {s.role for s in t.stages}}
    assert lines == _gids(fig, "groups:")
    assert any("rolled back" in g for g in _gids(fig, "mark:qwen-7b (bad release):"))
    # the records keep the controller's repeats of the engine's Events: each drawn once
    for t, ax in zip(traces, [ax for ax in fig.axes if ax.get_ylabel() == "groups"], strict=True):
        labels = [a.get_text() for a in ax.texts + [c for c in ax.get_children() if hasattr(c, "get_text")]
                  if str(a.get_gid() or "").startswith("mark:")]
        words = " · ".join(dict.fromkeys(labels)).split(" · ")
        assert len(words) == len(set(words)) and "? passed" not in words, (t.title, words)
        own = max([t.ended or 0.0] + [s.ended for s in t.stages if s.ended is not None]) - (t.started or 0.0)
        assert ax.get_xlim()[1] < own / 60 * 1.05 + 3, t.title  # its own rollout, not the next one's start
    gpu_axes = [ax for ax in fig.axes if ax.get_ylabel() == "GPUs"]
    assert len(gpu_axes) == len(traces)  # every demo model asks for GPUs: a red right axis each
    assert all(ax.yaxis.label.get_color() == "tab:red" for ax in gpu_axes)
    assert len(fig.legends) == 1 and not any(ax.get_legend() for ax in fig.axes)
    assert pictures.png(fig)[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_demo_check_fails_without_the_records() -> None:
    traces = _traces()
    assert demo_pictures.checks(traces, MODELS, "qwen-7b") == {
        **{f"stages.png: {m}'s stages recorded and drawn": True for m in MODELS},
        "stages.png: qwen-7b's bad release failed a stage and was rolled back": True}
    for t in traces:
        if t.name == "llama-70b" or t.label.endswith("(bad release)"):
            t.stages, t.rollback = [], None
    found = demo_pictures.checks(traces, MODELS, "qwen-7b")
    assert [k for k, ok in found.items() if not ok] == [
        "stages.png: llama-70b's stages recorded and drawn",
        "stages.png: qwen-7b's bad release failed a stage and was rolled back"]
