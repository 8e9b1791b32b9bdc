"""The pictures of a recorded demo run (``tests/data/pictures/demo-records.json``: the ``records.json`` a
real ``lwsflow demo`` wrote, every rollout driven by the in-cluster controller): every stage of every model
drawn, both roles of the P/D pair, the bad release's failed stage and rollback mark, the holds at the
manual gates; the demo's check fails when the records lose their stages."""

from __future__ import annotations

import json
from pathlib import Path

from lwsflow.pipelines import demo_pictures, pictures
from lwsflow.pipelines.pictures.records import Trace, dump, load

RECORDED = Path(__file__).parents[1] / "data" / "pictures" / "demo-records.json"
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
    lanes = [tick.get_text() for tick in fig.axes[0].get_yticklabels()]
    assert lanes == ["llama-8b", "llama-70b", "llama-405b", "llama-70b-pd", "llama-8b-pair decode",
                     "llama-8b-pair prefill", "qwen-7b", "qwen-7b (bad release)"]
    assert _gids(fig, "rollback") == {"rollback:qwen-7b (bad release)", "rollback-mark:qwen-7b (bad release)"}
    assert "stage:qwen-7b (bad release):1:wait" in drawn and "stage:qwen-7b (bad release):1:bake" in drawn
    # the manual gates the demo's promoter passed: held before llama-70b's and the pair's last stage
    assert {"hold:llama-70b:2", "hold:llama-8b-pair decode:2"} <= _gids(fig, "hold:")
    assert len(fig.legends) == 1


def test_the_timeline_has_a_panel_per_rollout_with_its_events() -> None:
    traces = _traces()
    fig = pictures.timeline_figure(traces)
    lines = {f"groups:{t.title}:{r}" for t in traces for r in {s.role for s in t.stages}}
    assert lines == _gids(fig, "groups:")
    assert any("rolled back" in g for g in _gids(fig, "mark:qwen-7b (bad release):"))
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
