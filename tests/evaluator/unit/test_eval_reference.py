"""The shipped reference scenario ``deadlines``: first come first served misses, least-slack-time does not."""

from __future__ import annotations

import json

import pytest

from lwsflow.cli import main
from lwsflow.sim.evaluator import metrics
from lwsflow.sim.evaluator.engine import Engine
from lwsflow.sim.evaluator.scenario import Scenario
from lwsflow.sim.policies import get_policy
from tests.evaluator.eval_helpers import MIN, by_name


def test_reference_shape(deadlines: Scenario):
    """10 single-slot nodes; 10 x 30 min due in 60, then 10 x 15 min due in 25, then 10 x 5 min due in 10."""
    r = Engine(deadlines, get_policy("default")).run()
    assert len(r.jobs) == 30
    assert sum(len(j.ran_on) == 1 for j in r.jobs) == 30
    groups = {(j.group, j.duration, j.deadline - j.submitted) for j in r.jobs}
    assert groups == {("long", 30 * MIN, 60 * MIN), ("mid", 15 * MIN, 25 * MIN), ("short", 5 * MIN, 10 * MIN)}


def test_default_misses_the_later_shorter_jobs(deadlines: Scenario):
    s = metrics.summarize(Engine(deadlines, get_policy("default")).run())
    assert (s["jobs"], s["deadlines_met"], s["missed"], s["preemptions"]) == (30, 10, 20, 0)
    assert s["classes"] == {"long": {"jobs": 10, "met": 10, "missed": 0},
                            "mid": {"jobs": 10, "met": 0, "missed": 10},
                            "short": {"jobs": 10, "met": 0, "missed": 10}}


def test_least_slack_time_meets_every_deadline(deadlines: Scenario):
    r = Engine(deadlines, get_policy("least-slack-time")).run()
    s = metrics.summarize(r)
    assert (s["jobs"], s["deadlines_met"], s["missed"]) == (30, 30, 0)
    jobs = by_name(r)
    # shorts preempt the mids at 2 min, which had preempted the longs at 1 min: 20 preemptions
    assert s["preemptions"] == 20
    assert jobs["short-3"].finished == 7 * MIN
    assert jobs["mid-3"].finished == 22 * MIN  # restarted at 7 min from the beginning: 15 more minutes
    long = jobs["long-3"]
    assert long.preempted == 1 and [k for _, _, k in long.segments] == ["pending", "lost", "pending", "run"]
    assert long.finished == 52 * MIN  # 22 min + the FULL 30 min, not the 29 remaining
    assert long.met_deadline


def test_cli_json_per_policy(capsys: pytest.CaptureFixture[str]):
    assert main(["sim", "evaluate", "deadlines", "--policy", "default", "--policy", "least-slack-time",
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["scenario"] == "deadlines"
    got = {p: (v["jobs"], v["deadlines_met"], v["missed"]) for p, v in out["policies"].items()}
    assert got == {"default": (30, 10, 20), "least-slack-time": (30, 30, 0)}
    util = out["policies"]["default"]["utilization"]
    assert util[0] == [0.0, 1.0] and all(0.0 <= u <= 1.0 for _, u in util)


def test_cli_tables_side_by_side(capsys: pytest.CaptureFixture[str]):
    assert main(["sim", "evaluate", "deadlines", "-p", "default", "-p", "least-slack-time"]) == 0
    lines = capsys.readouterr().out.splitlines()
    header = next(line for line in lines if "default" in line)
    assert header.split() == ["default", "least-slack-time"]
    rows = {line.split("  ")[0].strip(): line.split()[-2:] for line in lines
            if line.startswith(("missed", "met: "))}
    assert rows["missed"] == ["20", "0"]
    assert rows["met: short"] == ["0/10", "10/10"]


def test_cli_plot_writes_a_gantt_png(tmp_path, capsys: pytest.CaptureFixture[str]):
    out = tmp_path / "deadlines.png"
    assert main(["sim", "evaluate", "deadlines", "-p", "default", "-p", "least-slack-time",
                 "--plot", str(out)]) == 0
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000
    assert f"wrote {out}" in capsys.readouterr().out
