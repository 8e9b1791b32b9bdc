"""The seeded soak (issue 36; ``reliability/soak.py``, ``bench/soak.py``): a short run with every fault
kind injected and every invariant checked, none violated; and the checker catching violations planted
on a live embedded cluster (a deposed leader's write, a stage passed on an unready group, a stage
skipped, a manual gate left without a promote, two groups taken at once)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from lwsflow.controller.kube.client import Kube
from lwsflow.controller.kube.resources import LEASE, LWS, POD
from lwsflow.controller.rollout import gate, state
from lwsflow.sim.apiserver import ApiFaults
from reliability.rollout_env import NS, Env, lws_manifest, make_env
from reliability.soak import FAULTS, INVARIANTS, Soak, run_soak
from reliability.soak_checks import AGENT, Checker


def test_short_soak_injects_every_fault_and_breaks_no_invariant() -> None:
    # seed 11 is the suite's; the long runs in the notes and docs use others
    # which watch resumes get a 410 is drawn in wall time: at 0.3 a short run saw none about once
    # in seventy; at 0.8 a dozen cut watches all resume cleanly about once in a billion
    # 500, 503 and 429 are answered in turn, so three injected errors show all of them: at 4 % of the
    # 300-odd requests of a short run, fewer than three is about one run in 10^4 (at 3 % and drawn at
    # random, a run without a 500 was one in fifty or so: seen once beside other work)
    soak = Soak(11, hours=1.0, policies=8, speed=300, error_rate=0.04, conflict_rate=0.05, gone_rate=0.8)
    violations = run_soak(soak)
    assert soak.checker.violations == [] and violations == 0
    assert {k for k in FAULTS if soak.counts[k] == 0} == set(), soak.counts
    assert {k for k in INVARIANTS if soak.checker.checks[k] == 0} == set(), soak.checker.checks
    # the first leader, then the standby after the kill; a Lease delay deposes the leader, but which
    # replica takes the expired Lease next is a race (the deposed one may win it back)
    assert soak.checker.transitions >= 2


@pytest.fixture
def watched(tmp_path: Path) -> Iterator[tuple[Env, Checker]]:
    checker = Checker("planted")
    env = make_env(tmp_path, faults=ApiFaults(request_hook=checker.on_request))
    env.cluster.store.subscribe(checker.on_event)
    try:
        yield env, checker
    finally:
        env.close()


def _as(env: Env, identity: str) -> Kube:
    kube = Kube.connect(str(env.kubeconfig))
    kube.api.user_agent = AGENT + identity
    return kube


def _lease(env: Env, holder: str) -> None:
    spec = {"holderIdentity": holder, "leaseDurationSeconds": 3}
    try:
        env.kube.merge_patch(LEASE, NS, "planted", {"spec": spec})
    except Exception:
        env.kube.create(LEASE, NS, {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                                    "metadata": {"name": "planted", "namespace": NS}, "spec": spec})


def test_checker_catches_a_deposed_leaders_write(watched: tuple[Env, Checker]) -> None:
    env, checker = watched
    a, b = _as(env, "a"), _as(env, "b")
    _lease(env, "a")
    a.create(LWS, NS, lws_manifest("w1", partition=4))  # the leader writes: fine
    _lease(env, "b")
    a.merge_patch(LWS, NS, "w1", {"metadata": {"labels": {"x": "1"}}})  # b has not written yet: in flight
    b.merge_patch(LWS, NS, "w1", {"metadata": {"labels": {"x": "2"}}})
    assert checker.violations == []
    a.merge_patch(LWS, NS, "w1", {"metadata": {"labels": {"x": "3"}}})  # after the new leader's write
    assert [v.split(":")[0] for v in checker.violations] == ["no-deposed-write"], checker.violations
    assert "a wrote patch leaderworkersets/w1" in checker.violations[0]


def _rollout(env: Env, name: str, *, partition: int, passed: int, promoted: str = "") -> None:
    """Plant what a broken controller would write: the new template, a partition, stages passed."""
    st = state.RolloutState(id="r1", phase=state.RUNNING, stages="1,2,100%", targets=[1, 2, 4], passed=passed)
    ann = {**st.annotations(), **({"rollout.lwsflow.io/promoted": promoted} if promoted else {})}
    env.kube.merge_patch(LWS, NS, name, {"metadata": {"annotations": ann}, "spec": {
        "rolloutStrategy": {"rollingUpdateConfiguration": {"partition": partition}},
        "leaderWorkerTemplate": {"workerTemplate": {"spec": {"containers": [
            {"name": "engine", "image": "vllm:2"}]}}}}})


def test_checker_catches_a_stage_passed_on_an_unready_group_and_skipped_gates(
        watched: tuple[Env, Checker]) -> None:
    env, checker = watched
    checker.gated["g"] = ("g", [2])  # a manual gate before stage 3
    for name in ("u", "g"):
        env.create_ready(lws_manifest(name, partition=4))
    _rollout(env, "u", partition=4, passed=0)
    assert checker.violations == []
    _rollout(env, "u", partition=4, passed=1)  # stage 1 "passed": group 3 is still on vllm:1
    _rollout(env, "u", partition=1, passed=1)  # partition of stage 3 with one stage passed
    _rollout(env, "g", partition=2, passed=2)  # at the gate: fine
    _rollout(env, "g", partition=0, passed=2)  # left it without a promote
    kinds = [v.split(":")[0] for v in checker.violations]
    assert kinds == ["stage-ready", "no-stage-skipped", "manual-gate"], checker.violations
    assert "stage 1 passed while groups [3] were not Ready on vllm:2" in checker.violations[0]
    assert gate.partition(env.kube.get(LWS, NS, "g")) == 0


def test_checker_catches_groups_below_the_floor_unless_a_fault_took_them(
        watched: tuple[Env, Checker]) -> None:
    env, checker = watched
    for name in ("f", "x"):
        env.create_ready(lws_manifest(name, partition=4))  # 4 groups, maxUnavailable 1: floor 3
    checker.hit([env.cluster.store.get("pods", NS, f"x-{g}") for g in (0, 1)])  # the soak's own fault
    for name in ("f", "x"):
        for group in (0, 1):  # two groups taken at once, as no rolling update may
            env.kube.delete(POD, NS, f"{name}-{group}")
    assert [v.split(" (")[0] for v in checker.violations] == [
        "availability-floor: f: 2 Ready groups of 4, floor 3"], checker.violations
