"""The rollout pictures from what a cluster recorded: real rollouts on the embedded cluster (a good release
of two models, a bad one of the second, rolled back), the policy status the in-cluster controller would
write, then ``stages.png`` and ``timeline.png`` checked by the artists drawn (every stage of every rollout,
the rollback mark on the bad release), and no picture when the records are missing."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path

import pytest

from lwsflow import report as pictures
from lwsflow.cli import main
from lwsflow.controller.api.labels import ROLLOUT_PREFIX
from lwsflow.controller.kube.events import ROLLOUT_ID
from lwsflow.controller.kube.resources import EVENT, LWS, ROLLOUT_POLICY
from lwsflow.controller.policy import status as pstatus
from lwsflow.controller.policy.model import RolloutPolicySpec
from lwsflow.controller.rollout import state
from lwsflow.controller.rollout.engine import LwsRollout, RolloutOptions
from lwsflow.report import model, records
from lwsflow.report.records import Trace
from reliability.rollout_env import NS, Env, lws_manifest, make_env, new_release

STAGES = "1,50%,100%"


def _policy_status(env: Env, name: str) -> None:
    """What the in-cluster controller's status writer does after a rollout (policy/status.compute)."""
    pol = env.kube.get(ROLLOUT_POLICY, NS, name)
    spec = RolloutPolicySpec.model_validate(pol["spec"])
    obj = env.kube.get(LWS, NS, name)
    new = pstatus.compute(spec, obj, 1, pol.get("status") or {}, state.iso(env.clock().now()))
    env.kube.request("PUT", ROLLOUT_POLICY.path(NS, name) + "/status", body={**pol, "status": new})


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    env = make_env(tmp_path_factory.mktemp("pictures"))
    try:
        for name in ("alpha", "beta"):
            env.create_ready(lws_manifest(name, replicas=4))
        env.kube.create(ROLLOUT_POLICY, NS, {
            "apiVersion": "lwsflow.io/v1alpha1", "kind": "RolloutPolicy", "metadata": {"name": "beta"},
            "spec": {"targetRef": {"kind": "LeaderWorkerSet", "name": "beta"},
                     "stages": [{"groups": 1}, {"groups": "50%"}, {"groups": "100%"}]}})
        opts = RolloutOptions(stages=STAGES, deadline_s=120, bake_s=30)
        for name in ("alpha", "beta"):
            out = LwsRollout(env.kube, NS, name, opts, env.clock(),
                             manifest=new_release(lws_manifest(name, replicas=4))).run()
            assert out.result == "succeeded", out.message
        _policy_status(env, "beta")
        out = LwsRollout(env.kube, NS, "alpha", opts, env.clock(),  # no policy: its first one is in Events
                         manifest=new_release(lws_manifest("alpha", replicas=4), image="vllm:4")).run()
        assert out.result == "succeeded", out.message
        bad = new_release(lws_manifest("beta", replicas=4), image="vllm:3",
                          **{"sim.lwsflow.io/never-ready": "true"})
        out = LwsRollout(env.kube, NS, "beta", opts, env.clock(), manifest=bad).run()
        assert out.result == "rolled-back", out.message
        _policy_status(env, "beta")
        yield env
    finally:
        env.close()


def _by_gid(fig: object, prefix: str) -> dict[str, object]:
    found = fig.findobj(lambda a: str(a.get_gid() or "").startswith(prefix))  # type: ignore[attr-defined]
    return {str(a.get_gid()): a for a in found}


def _labelled(traces: list[Trace]) -> list[Trace]:
    for t in traces:
        t.label = f"{t.title} {'release' if t.name == 'alpha' else ''}".strip()
        t.label = "beta bad release" if t.outcome == "RolledBack" else t.label
    return traces


def test_the_stage_log_and_the_policy_history_record_every_stage(recorded: Env) -> None:
    traces = pictures.collect(recorded.kube, NS)
    summary = [(t.name, t.outcome, t.source, [(s.index, s.result) for s in t.stages]) for t in traces]
    assert summary == [
        ("alpha", "Succeeded", "events", [(1, "passed"), (2, "passed"), (3, "passed")]),
        ("beta", "Succeeded", "status", [(1, "passed"), (2, "passed"), (3, "passed")]),
        ("alpha", "Succeeded", "annotations", [(1, "passed"), (2, "passed"), (3, "passed")]),
        ("beta", "RolledBack", "status", [(1, "failed")]),
    ]
    assert [t.title for t in traces] == ["alpha #1", "beta #1", "alpha #2", "beta #2"]
    assert all(s.gate_passed is None for s in traces[0].stages)  # Events have no gate time
    for t in traces[1:]:
        for s in t.stages:  # the gate passed after the stage started (pods took time), the bake after
            assert s.started is not None and s.ended is not None
            if s.result == "passed":
                assert s.gate_passed is not None and s.started < s.gate_passed <= s.ended - 29.9
            assert s.min_ready is not None and s.min_ready >= 3  # the floor: 4 - maxUnavailable 1
    bad = traces[-1]
    assert bad.rollback is not None and bad.rollback[1] is not None
    assert bad.stages[0].ended <= bad.rollback[0] < bad.rollback[1]  # type: ignore[operator]
    assert {"StageFailed", "RollbackStarted", "RolledBack"} <= {r for _t, r, _m in bad.events}


def test_stages_picture_draws_every_stage_and_the_rollback(recorded: Env) -> None:
    traces = _labelled(pictures.collect(recorded.kube, NS))
    fig = pictures.stages_figure(traces)
    bars = _by_gid(fig, "stage:")
    for t in traces:
        for s in t.stages:
            if s.gate_passed is None and s.result == "passed":  # from Events: the stage as one bar
                bake = bars[f"stage:{t.label}:{s.index}:bake"]
                assert bake.get_width() * 60 == pytest.approx(s.ended - s.started, abs=1.0)  # type: ignore[attr-defined,operator]
            elif s.result == "passed":  # bake: 30 s of cluster time, after a wait for the gate
                bake = bars[f"stage:{t.label}:{s.index}:bake"]
                assert bake.get_width() * 60 == pytest.approx(s.ended - s.gate_passed, abs=0.5)  # type: ignore[attr-defined,operator]
                assert bake.get_facecolor()[:3] == pytest.approx((0.18, 0.49, 0.20), abs=0.01)  # type: ignore[attr-defined]
                assert f"stage:{t.label}:{s.index}:wait" in bars
            else:  # the bad release's stage 1: waited for a gate that never passed, in red, to its end
                wait = bars[f"stage:{t.label}:{s.index}:wait"]
                assert f"stage:{t.label}:{s.index}:bake" not in bars
                assert wait.get_facecolor()[:3] == pytest.approx((0.776, 0.157, 0.157), abs=0.01)  # type: ignore[attr-defined]
                assert (wait.get_x() + wait.get_width()) * 60 == pytest.approx(  # type: ignore[attr-defined]
                    s.ended - t.started, abs=0.5)  # type: ignore[operator]
    # alpha #1 (from Events): one bar per stage, no wait; the others: wait + bake per passed stage
    assert len([g for g in bars if g.endswith(":bake")]) == 9 and len(bars) == 9 + 6 + 1
    rollback = _by_gid(fig, "rollback")
    assert set(rollback) == {"rollback:beta bad release", "rollback-mark:beta bad release"}
    assert len(fig.legends) == 1 and not any(ax.get_legend() for ax in fig.axes)  # one legend
    assert [ax.get_yticklabels()[0].get_text() for ax in fig.axes] == [t.label for t in traces]


def test_timeline_picture_draws_groups_gpus_and_labelled_events(recorded: Env) -> None:
    traces = _labelled(pictures.collect(recorded.kube, NS))
    fig = pictures.timeline_figure(traces)
    lines = _by_gid(fig, "groups:")
    assert max(lines["groups:alpha #2 release:"].get_ydata()) == 4  # type: ignore[attr-defined]
    assert list(lines["groups:beta bad release:"].get_ydata())[-1] == 0  # type: ignore[attr-defined]
    marks = [g.split(":", 2)[2] for g in _by_gid(fig, "mark:beta bad release:")]
    assert any("1 FAILED" in m for m in marks) and any("rolled back" in m for m in marks)
    marks = [g.split(":", 2)[2] for g in _by_gid(fig, "mark:alpha #2 release:")]
    assert any("3 passed" in m for m in marks)
    assert len(fig.legends) == 1 and not any(ax.get_legend() for ax in fig.axes)
    title = fig._suptitle  # the title sits above every panel (no overlap with the markers)
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    renderer = FigureCanvasAgg(fig).get_renderer()
    top = max(ax.get_tightbbox(renderer).y1 for ax in fig.axes)
    assert title is not None and title.get_window_extent(renderer).y0 >= top - 1


def test_nothing_drawn_without_the_records(recorded: Env, tmp_path: Path) -> None:
    """Events only (no stage log, no history): stages without gate times; nothing at all: no picture."""
    traces = pictures.collect(recorded.kube, NS)
    events_only = copy.deepcopy(traces)
    for t in events_only:
        t.stages, t.rollback = [], None
        pictures.records._from_events(t)
    assert [t.source for t in events_only] == ["events"] * 4
    assert [[(s.index, s.result) for s in t.stages] for t in events_only] == \
        [[(s.index, s.result) for s in t.stages] for t in traces]
    assert all(s.gate_passed is None for t in events_only for s in t.stages)
    assert events_only[-1].rollback is not None and events_only[-2].rollback is None
    bare = copy.deepcopy(traces)
    for t in bare:
        t.stages, t.rollback, t.events = [], None, []
    with pytest.raises(pictures.NothingToDraw):
        pictures.render(bare, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_report_cli_draws_from_the_cluster_and_fails_on_an_empty_one(
        recorded: Env, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "pics"
    assert main(["report", "--kubeconfig", str(recorded.kubeconfig), "-n", NS, "--out", str(out)]) == 0
    said = capsys.readouterr().out
    assert f"{NS}/beta rollout" in said and "RolledBack, 0/1 stage records passed, rolled back" in said
    for name in ("stages.png", "timeline.png"):
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    empty = tmp_path / "empty"
    assert main(["report", "--kubeconfig", str(recorded.kubeconfig), "-n", "nowhere", "--out",
                 str(empty)]) == 1
    assert capsys.readouterr().err.startswith("error: nothing to draw in namespace nowhere")
    assert not empty.exists()
    assert main(["report", "x/y/z", "--kubeconfig", str(recorded.kubeconfig)]) == 2
    # a policy's target by its kind/name, or the policy by its name: the same two rollouts
    for only in (["lws/beta"], ["beta"]):
        traces = pictures.collect(recorded.kube, NS, only)
        assert [(t.name, t.outcome) for t in traces] == [("beta", "Succeeded"), ("beta", "RolledBack")]


def test_records_survive_only_in_the_cluster(recorded: Env) -> None:
    """The stage log is an annotation of the target and the history a field of the policy status: what a
    fresh reader (``lwsflow report`` later, on another machine) finds."""
    obj = recorded.kube.get(LWS, NS, "alpha")
    assert ROLLOUT_PREFIX + "stage-log" in obj["metadata"]["annotations"]
    hist = recorded.kube.get(ROLLOUT_POLICY, NS, "beta")["status"]["history"]
    assert [len(h["stages"]) for h in hist] == [3, 1] and hist[1]["rollbackFinished"]
    events, _ = recorded.kube.list(EVENT, NS)
    assert any(e["reason"] == "StagePassed" for e in events)


def test_the_demo_draws_nothing_and_says_so_on_a_cluster_without_records(tmp_path: Path) -> None:
    """A cluster whose workloads were never rolled out by lwsflow: no picture (an older one is removed),
    the reason, and every model's check false (the demo fails)."""
    from lwsflow.rehearsal import demo_pictures

    env = make_env(tmp_path / "cluster")
    try:
        env.create_ready(lws_manifest("m", replicas=2))
        out = tmp_path / "demo"
        out.mkdir()
        (out / "stages.png").write_bytes(b"an older run's picture")
        paths, found, empty = demo_pictures.draw(env.kubeconfig, out, ["m"], "m")
    finally:
        env.close()
    assert paths == [] and "no rollout recorded a stage" in empty
    assert found == {"stages.png: m's stages recorded and drawn": False,
                     "stages.png: m's bad release failed a stage and was rolled back": False}
    assert sorted(p.name for p in out.iterdir()) == ["records.json"]


def test_every_rollout_event_names_its_rollout(recorded: Env) -> None:
    """The engine's Events carry the rollout id (the target's ``rollout.lwsflow.io/id``): each trace gets
    the Events of its own rollout, and each timeline panel ends with its rollout, not the next one."""
    traces = pictures.collect(recorded.kube, NS)
    events, _ = recorded.kube.list(EVENT, NS)
    mine = [e for e in events if e["reason"] in records.MARKED]
    named = {e["metadata"].get("annotations", {}).get(ROLLOUT_ID) for e in mine}
    assert named == {t.rollout_id for t in traces}
    for t in traces:
        ids = {(e["metadata"]["annotations"][ROLLOUT_ID], e["reason"], e["message"]) for e in mine
               if e["involvedObject"]["name"] == t.name}
        assert {(t.rollout_id, r, m) for _at, r, m in t.events} <= ids, t.title
        assert sum(1 for _at, r, _m in t.events if r == "RolloutStarted") == 1, t.title
    for panel in model.panels(traces):
        t = panel.trace
        assert t.started is not None
        last = max([t.ended or 0.0] + [at for at, _r, _m in t.events])  # a rollback settles after its end
        assert panel.xmax * 60 <= last - t.started + 2.0, t.title
        later = [u.started or 0.0 for u in traces if u.name == t.name and (u.started or 0.0) > t.started]
        if later:  # the axis stops before the target's next rollout started
            assert t.started + panel.xmax * 60 < min(later), t.title
