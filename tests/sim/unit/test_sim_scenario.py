"""Scenarios (`lwsflow sim run`): parsing, timed actions and faults, timeline, plot, CLI exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from lwsflow.cli import main
from lwsflow.controller.errors import InvalidInput
from lwsflow.sim.scenario import parse_duration, parse_scenario, run_scenario
from tests.sim.sim_helpers import make_lws

CLUSTER = {"pools": [{"name": "gpu", "count": 6, "gpus_per_node": 8,
                      "taints": [{"key": "nvidia.com/gpu", "value": "present"}]}],
           "timings": {"pull_gbps": 0.2, "image_gb": 12, "container_start_s": 5, "storage_gbps": 1,
                       "weight_gb": 100}}


def _scenario(**over: object) -> dict:
    lws = make_lws("demo", replicas=2, size=2, max_surge=1)
    base = {"name": "t", "cluster": CLUSTER, "objects": [lws],
            "actions": [{"at": "10m", "label": "v2", "patch": {"name": "demo", "patch": {"spec": {
                "leaderWorkerTemplate": {"workerTemplate": {"spec": {"containers": [
                    {"name": "engine", "image": "vllm:v2",
                     "resources": {"limits": {"nvidia.com/gpu": "8"}}}]}}}}}}},
                        {"at": 1500, "fault": {"kind": "crash", "pod": "demo-0-1"}}],
            "until": {"available": ["demo"], "timeout": "3h"}}
    base.update(over)
    return base


def test_scenario_runs_actions_and_records_timeline():
    result = run_scenario(parse_scenario(_scenario()))
    assert result.reached
    seq = result.timeline.series["lws/demo"]
    assert seq[0].t == 0 and seq[-1].ready == seq[-1].updated == seq[-1].replicas == 2
    assert max(s.replicas for s in seq) == 3  # the surge group shows up in the timeline
    assert max(s.gpus for s in seq) == 48
    assert [(m.t, m.label) for m in result.timeline.marks] == [(600, "v2"), (1500, "fault crash demo-0-1")]
    assert any(e["reason"] == "RecreateGroup" for e in result.cluster.store.list("events", "default")[0])
    assert "lws/demo" in result.timeline.render()


@pytest.mark.parametrize(("bad", "field"), [
    ({"actions": [{"at": "10 minutes", "fault": {"kind": "crash", "pod": "x"}}]}, "actions.0.at"),
    ({"actions": [{"at": 5}]}, "actions.0"),
    ({"until": {"available": ["nope"]}}, "until.available"),
    ({"cluster": {"pools": [{"name": "Bad_Name", "count": 1}]}}, "cluster.pools.0.name"),
])
def test_scenario_errors_name_the_field(bad: dict, field: str):
    with pytest.raises(InvalidInput) as exc:
        run_scenario(parse_scenario(_scenario(**bad)))
    assert exc.value.field == field


def test_invalid_lws_in_scenario_is_rejected():
    lws = make_lws("demo", replicas=2, size=0)
    with pytest.raises(InvalidInput) as exc:
        run_scenario(parse_scenario(_scenario(objects=[lws], actions=[])))
    assert "objects[0].spec.leaderWorkerTemplate.size" in str(exc.value)


def test_scenario_objects_need_their_namespace():
    """As the API (NamespaceLifecycle): an object in a namespace that does not exist is refused,
    naming the field; a Namespace object listed before it makes it work."""
    lws = make_lws("demo", replicas=1, size=1)
    lws["metadata"]["namespace"] = "team-a"
    with pytest.raises(InvalidInput) as exc:
        run_scenario(parse_scenario(_scenario(objects=[lws], actions=[], until={"timeout": "1m"})))
    assert exc.value.field == "objects[0].metadata.namespace"
    assert 'namespaces "team-a" not found' in str(exc.value)
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}}
    run_scenario(parse_scenario(_scenario(objects=[ns, lws], actions=[], until={"timeout": "1m"})))


def test_durations():
    """A scenario's durations are lwsflow's one grammar (controller/api/duration.py): compound terms,
    plain seconds; no spaces, weeks or signs."""
    assert parse_duration("90s") == 90 and parse_duration("1.5h") == 5400 and parse_duration(7) == 7.0
    assert parse_duration("1h30m") == 5400 and parse_duration("90") == 90
    for bad in ("soon", " 90s", "90 s", "1w", "-5", -5):
        with pytest.raises(ValueError):
            parse_duration(bad)


def test_cli_run_json_and_plot(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(_scenario()))
    png = tmp_path / "out.png"
    assert main(["sim", "run", str(path), "--json", "--plot", str(png)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["reached"] is True and out["series"]["lws/demo"][-1]["updated"] == 2
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000


def test_cli_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(_scenario(actions=[{"at": "x"}])))
    assert main(["sim", "run", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "actions.0.at" in err
    never = tmp_path / "never.yaml"
    cfg = dict(CLUSTER, never_ready_images=["vllm:v2"])
    never.write_text(yaml.safe_dump(_scenario(cluster=cfg, until={"available": ["demo"], "timeout": "2h"})))
    assert main(["sim", "run", str(never)]) == 1  # a bad release never becomes Available
    captured = capsys.readouterr()
    assert "NOT reached" in captured.out and captured.err.startswith("error: until-condition")


def test_example_scenarios_parse():
    folder = Path(__file__).resolve().parents[3] / "examples" / "scenarios"
    sc = parse_scenario(yaml.safe_load((folder / "staged-rollout-64-nodes.yaml").read_text()))
    assert sc.until.available == ["llama-405b"] and len(sc.actions) == 2
    sc = parse_scenario(yaml.safe_load((folder / "ds-6-2-prefill-decode.yaml").read_text()))
    assert sc.until.available == ["pd"]


def test_ds_scenario_marks_planner_steps():
    """§f: the DS example's 12 coordinated steps appear as stage marks in the timeline."""
    folder = Path(__file__).resolve().parents[3] / "examples" / "scenarios"
    result = run_scenario(parse_scenario(yaml.safe_load((folder / "ds-6-2-prefill-decode.yaml").read_text())))
    assert result.reached
    steps = [m.label for m in result.timeline.marks if "step" in m.label]
    assert len(steps) == 12 and steps[-1] == "pd/0 step 12: old 0:0 new 6:2"
