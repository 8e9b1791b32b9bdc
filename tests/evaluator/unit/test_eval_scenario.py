"""Scenario sources (YAML, generators, shipped names), their validation, and the CLI's one-line errors."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from lwsflow.cli import main
from lwsflow.controller.errors import InvalidInput
from lwsflow.sim import policies
from lwsflow.sim.evaluator import events as ev
from lwsflow.sim.evaluator import scenario
from tests.evaluator.eval_helpers import HOUR, MIN, by_name, run

REPO = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize(("text", "seconds"), [(90, 90.0), ("90", 90.0), ("30m", 1800.0),
                                                ("1h30m", 5400.0), ("2d", 172800.0), ("7d", 604800.0),
                                                ("1h30m15s", 5415.0)])
def test_durations(text: object, seconds: float):
    assert policies.parse_duration(text) == seconds


# weeks and spaces are not in lwsflow's one duration grammar (controller/api/duration.py)
@pytest.mark.parametrize("bad", ["soon", "5 parsecs", "-5", "1h-3m", True, "nan", "1w", "1h 30m", " 30m"])
def test_bad_durations_name_the_field(bad: object):
    with pytest.raises(InvalidInput, match=r"jobs\.0\.duration"):
        policies.parse_duration(bad, "jobs.0.duration")


def test_yaml_expands_counts_gaps_annotations_and_deletes(tmp_path: Path):
    f = tmp_path / "s.yaml"
    f.write_text(f"""
name: small
nodes: [{{name: n, count: 2, gpus: 4}}]
jobs:
  - {{name: batch, count: 3, at: 1m, every: 2m, duration: 10m, gpus: 2}}
  - name: tagged
    duration: 1h
    annotations: {{{policies.EXPECTED_DURATION}: 50m, {policies.DEADLINE}: 2h}}
lws: [{{name: serve, replicas: 2, size: 1, gpus: 4, at: 0, delete_at: 3h}}]
deletes: [{{at: 30m, kind: node, name: n-1}}]
""")
    sc = scenario.load(str(f))
    assert sc.name == "small"
    creates = [e for e in sc.events if isinstance(e, ev.JobCreate)]
    assert [(e.name, e.at) for e in creates[:3]] == [("batch-0", 60.0), ("batch-1", 180.0),
                                                     ("batch-2", 300.0)]
    assert (creates[3].expected, creates[3].deadline) == (50 * MIN, 2 * HOUR)
    assert ev.LwsDelete(3 * HOUR, "serve") in sc.events and ev.NodeDelete(30 * MIN, "n-1") in sc.events
    r = run(sc.events, "gang")
    assert r.evictions == 1 and all(j.finished is not None for j in r.jobs if j.kind == "job")


@pytest.mark.parametrize(("body", "field"), [
    ("nodes: []", "nodes"),
    ("nodes: [{name: n, gpus: 8}]\njobs: [{name: j, duration: soon}]", "jobs.0.duration"),
    ("nodes: [{name: n, gpus: 8}]\njobs: [{name: j, duration: 1h, gpus: 9}]", "jobs.0.gpus"),
    ("nodes: [{name: n, gpus: 8, colour: red}]", "nodes.0.colour"),
    ("nodes: [{name: N_1, gpus: 8}]", "nodes.0.name"),
    ("cluster: {pools: []}\nobjects: []", "cluster"),
])
def test_yaml_errors_are_one_line_naming_the_field(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                   body: str, field: str):
    f = tmp_path / "bad.yaml"
    f.write_text(body + "\n")
    assert main(["sim", "evaluate", str(f)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and f"{f}: {field}: " in err


def test_generator_by_module_and_by_file_is_seeded():
    a = scenario.load("lwsflow.sim.evaluator.generators:gang_contention", seed=1)
    b = scenario.load("gang-contention", seed=1)
    c = scenario.load("gang-contention", seed=2)
    assert a.events == b.events != c.events
    mixed = scenario.load(f"{REPO}/examples/scenarios/mixed_pool.py:mixed_pool", seed=7)
    assert mixed.name == "mixed-pool"
    assert sum(isinstance(e, ev.NodeCreate) for e in mixed.events) == 16
    jobs = by_name(run(mixed.events, "least-slack-time"))
    assert jobs["llama-405b/0"].state == "deleted" and jobs["llama-405b/0"].first_start is not None


@pytest.mark.parametrize(("ref", "message"), [
    ("nope", "no such file or shipped scenario 'nope'"),
    ("no.such.module:fn", "cannot import 'no.such.module'"),
    ("lwsflow.sim.evaluator.generators:nothing", "has no function 'nothing'"),
    ("lwsflow.sim.evaluator.generators:", "expected module:function"),
    ("missing.py:fn", "no such file"),
    ("staged-rollout-64-nodes", "no such file or shipped scenario"),  # a `sim run` rehearsal, not ours
])
def test_bad_scenario_refs(ref: str, message: str, capsys: pytest.CaptureFixture[str]):
    assert main(["sim", "evaluate", ref]) == 2
    assert message in capsys.readouterr().err


def test_generator_yielding_junk_and_duplicates_are_input_errors():
    with pytest.raises(InvalidInput, match="not a scenario event"):
        scenario.load(f"{__file__}:_junk")
    dup = [ev.NodeCreate(0, "n", 8), ev.NodeCreate(5, "n", 8)]
    with pytest.raises(InvalidInput, match="node 'n' created twice"):
        run(dup, "default")


def _junk(rng: random.Random) -> list[object]:
    return [ev.NodeCreate(0, "n", 8), {"at": 0}]


def test_cli_rejects_unknown_policy_and_bad_plot(capsys: pytest.CaptureFixture[str], tmp_path: Path):
    assert main(["sim", "evaluate", "deadlines", "--policy", "sjf"]) == 2
    assert "--policy: unknown policy 'sjf'" in capsys.readouterr().err
    assert main(["sim", "evaluate", "deadlines", "--plot", str(tmp_path / "x.gif")]) == 2
    assert "--plot: expected a .png" in capsys.readouterr().err


def test_policy_for_embedded_scoring():
    assert policies.for_scoring("binpack").name == "binpack-fragmentation"
    assert policies.for_scoring("spread").name == "default"
    with pytest.raises(InvalidInput, match="scoring: unknown policy"):
        policies.for_scoring("random")
