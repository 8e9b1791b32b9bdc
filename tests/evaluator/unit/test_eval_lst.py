"""Least-slack-time with preemption: smallest slack first, full-duration slack, no ping-pong."""

from __future__ import annotations

import random

from lwsflow.sim.evaluator.engine import RUNNING
from lwsflow.sim.evaluator.events import Event, JobCreate, LwsCreate, NodeCreate
from lwsflow.sim.policies import BasePolicy, get_policy, slack
from tests.evaluator.eval_helpers import HOUR, MIN, by_name, run


def test_full_duration_slack_cannot_ping_pong():
    """A (60 min, due at 100) runs; B (30 min, due at 65) arrives at 10 and preempts it (slack 25 < 30).

    With REMAINING-duration slack, at 30 min B (10 left: slack 25) would look worse than the waiting A
    (60 left: slack 10) and get preempted back. With the full duration B stays ahead: A's slack is
    always 5 minutes larger than B's.
    """
    events: list[Event] = [NodeCreate(0, "slot", 1),
                           JobCreate(0, "a", 60 * MIN, deadline=100 * MIN),
                           JobCreate(10 * MIN, "b", 30 * MIN, deadline=55 * MIN)]
    r = run(events, "least-slack-time")
    a, b = by_name(r)["a"], by_name(r)["b"]
    assert r.preemption_log == [(10 * MIN, "b", "a")]
    assert b.preempted == 0 and b.finished == 40 * MIN
    assert a.preempted == 1 and a.finished == 100 * MIN  # restarted at 40 from the beginning
    assert [k for _, _, k in a.segments] == ["pending", "lost", "pending", "run"]
    assert a.met_deadline and b.met_deadline


def test_preempted_job_restarts_from_the_beginning():
    events: list[Event] = [NodeCreate(0, "slot", 1),
                           JobCreate(0, "long", 50 * MIN, deadline=10 * HOUR),
                           JobCreate(40 * MIN, "urgent", 10 * MIN, deadline=15 * MIN)]
    jobs = by_name(run(events, "least-slack-time"))
    assert jobs["urgent"].finished == 50 * MIN
    assert jobs["long"].finished == 100 * MIN  # 40 minutes of work lost, all 50 run again
    assert jobs["long"].segments[1] == (0.0, 40 * MIN, "lost")


def test_no_ping_pong_and_every_preemption_lowers_slack_on_a_busy_pool():
    rng = random.Random(7)
    events: list[Event] = [NodeCreate(0, f"n{i}", 8) for i in range(4)]
    t = 0.0
    for i in range(300):
        t += rng.expovariate(1 / 300)
        duration = rng.uniform(5, 120) * MIN
        events.append(JobCreate(t, f"j{i}", duration, rng.choice([1, 1, 2]), rng.choice([1, 2, 4, 8]),
                                duration * rng.uniform(0.7, 1.3), duration * rng.uniform(1.2, 6)))
    r = run(events, "least-slack-time")
    jobs = by_name(r)
    assert r.preemptions > 20  # the pool is busy enough for preemption to matter
    pairs = {(p, v) for _, p, v in r.preemption_log}
    assert not any((v, p) in pairs for p, v in pairs)  # nobody preempts its own preemptor
    for when, p, v in r.preemption_log:
        assert slack(jobs[p], when) < slack(jobs[v], when)
    assert all(j.finished is not None for j in r.jobs)


def test_least_slack_beats_first_come_on_deadlines_at_moderate_load():
    """About 70 % offered load. (Far past 100 % LST collapses, the classic domino effect of
    deadline-first schedulers: it keeps serving already-late work; not what this policy is for.)"""
    rng = random.Random(3)
    events: list[Event] = [NodeCreate(0, f"n{i}", 8) for i in range(4)]
    t = 0.0
    for i in range(200):
        t += rng.expovariate(1 / 600)
        duration = rng.uniform(5, 90) * MIN
        events.append(JobCreate(t, f"j{i}", duration, 1, rng.choice([2, 4, 8]), None,
                                duration * rng.uniform(1.2, 4)))
    met = {p: sum(j.met_deadline for j in run(events, p).jobs) for p in ("default", "least-slack-time")}
    assert met["default"] < 195 and met["least-slack-time"] == 200


def test_serving_groups_are_never_preempted_and_jobs_without_deadline_yield():
    events: list[Event] = [NodeCreate(0, "a", 8), NodeCreate(0, "b", 8),
                           LwsCreate(0, "serve", replicas=1, size=1, gpus=8),
                           JobCreate(0, "best-effort", 5 * HOUR, 1, 8),
                           JobCreate(60, "best-effort-2", HOUR, 1, 8),
                           JobCreate(120, "due", HOUR, 1, 8, deadline=2 * HOUR)]
    r = run(events, "least-slack-time")
    jobs = by_name(r)
    assert jobs["serve/0"].state == RUNNING and jobs["serve/0"].preempted == 0
    assert r.preemption_log == [(120.0, "due", "best-effort")]  # no deadline: infinite slack
    assert jobs["best-effort-2"].preempted == 0  # equal (infinite) slack never preempts
    assert jobs["due"].met_deadline


def test_expected_duration_not_actual_drives_slack():
    """Slack uses the announced (expected) duration: the scheduler cannot know the real one."""
    events: list[Event] = [NodeCreate(0, "slot", 1),
                           JobCreate(0, "runs", 30 * MIN, deadline=HOUR),
                           # really 10 minutes, but announced as 50: slack 60-1-50 = 9 < 29, preempts
                           JobCreate(60, "claims-long", 10 * MIN, expected=50 * MIN, deadline=HOUR)]
    r = run(events, "least-slack-time")
    assert r.preemption_log == [(60.0, "claims-long", "runs")]


def test_victims_are_chosen_largest_slack_first_and_only_as_many_as_needed():
    policy = get_policy("least-slack-time")
    assert isinstance(policy, BasePolicy) and policy.preemptive
    events: list[Event] = [NodeCreate(0, f"n{i}", 1) for i in range(3)]
    events += [JobCreate(0, f"slack-{k}", HOUR, deadline=HOUR + k * HOUR) for k in (1, 2, 3)]
    events.append(JobCreate(60, "urgent", 10 * MIN, 1, 1, deadline=20 * MIN))
    r = run(events, "least-slack-time")
    assert r.preemption_log == [(60.0, "urgent", "slack-3")]
