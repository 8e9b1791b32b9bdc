"""Two ``lwsflow controller run --leader-elect`` processes on one Lease: kill the leader mid-stage.

The standby takes the Lease once it has seen no renewal for the lease duration (client-go's rule:
observed on its own clock, never comparing the holder's timestamps) and resumes the rollout in
flight from the target's annotations: the same rollout id, at the same stage, and a manual gate
ahead is still waited for (never skipped).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from lwsflow.cli import kubectl_plugin
from lwsflow.controller.kube.resources import LEASE, LWS, ROLLOUT_POLICY
from lwsflow.controller.rollout import gate, state
from reliability.incluster_env import policy, sync, wait_policy
from reliability.rollout_env import NS, Env, lws_manifest

BIN = Path(__file__).resolve().parents[3] / ".venv" / "bin" / "lwsflow"
LEASE_S = 3.0


def _holder(env: Env) -> str:
    try:
        return str(env.kube.get(LEASE, NS, "lwsflow-controller")["spec"].get("holderIdentity") or "")
    except Exception:
        return ""


def _wait(pred: object, timeout: float, what: str) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():  # type: ignore[operator]
            return
        time.sleep(0.05)
    raise AssertionError(f"not reached in {timeout}s: {what}")


def test_standby_takes_over_and_resumes_at_the_right_stage(env: Env, tmp_path: Path) -> None:
    env.create_ready(lws_manifest("l", replicas=4, partition=4))
    env.kube.create(ROLLOUT_POLICY, NS, policy("pl", "l", [{"groups": 1, "bake": "20m"},
                                                          {"groups": "100%", "pause": {}}]))
    cmd = [str(BIN), "controller", "run", "-n", NS, "--leader-elect", "--lease-namespace", NS,
           "--lease-duration", f"{LEASE_S:g}s", "--metrics-addr", "127.0.0.1:0", "--health-addr",
           "127.0.0.1:0", "--kubeconfig", str(env.kubeconfig), "--resync", "1s", "--cluster-clock"]
    procs: dict[int, subprocess.Popen[bytes]] = {}
    for i in range(2):
        log = (tmp_path / f"c{i}.log").open("wb")
        p = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        procs[p.pid] = p
    try:
        _wait(lambda: _holder(env), 30, "a leader")
        wait_policy(env, "pl", lambda s: bool(s.get("stableRevision")), timeout=30)
        sync(env, "l", "vllm:2")
        before = wait_policy(env, "pl", lambda s: s.get("phase") == "Progressing"
                             and s.get("currentStage") == 1 and bool(s.get("rolloutId")), timeout=30)
        _wait(lambda: gate.partition(env.kube.get(LWS, NS, "l")) == 3, 30, "stage 1 partition")
        leader = _holder(env)
        pid = int(leader.split("-")[-2])
        procs[pid].send_signal(signal.SIGKILL)
        procs[pid].wait(10)
        killed = time.monotonic()
        _wait(lambda: _holder(env) not in ("", leader), 4 * LEASE_S, "the standby took the lease")
        takeover = time.monotonic() - killed
        print(f"takeover after the leader's SIGKILL: {takeover:.2f}s (lease {LEASE_S:g}s)")
        assert takeover <= LEASE_S + 2 * LEASE_S / 5 + 0.5
        p = wait_policy(env, "pl", lambda s: s.get("phase") == "WaitingForPromotion", timeout=60)
        assert p["status"]["rolloutId"] == before["status"]["rolloutId"]  # resumed, not restarted
        lws = env.kube.get(LWS, NS, "l")
        assert state.RolloutState.from_object(lws).passed == 1 and gate.partition(lws) == 3
        assert kubectl_plugin.main(["promote", "pl", "-n", NS, "--kubeconfig", str(env.kubeconfig)]) == 0
        wait_policy(env, "pl", lambda s: s.get("phase") == "Succeeded", timeout=60)
        assert env.rec.partitions["l"] == [4, 3, 0, 4]  # no stage skipped, the gate held
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    proc.kill()


def test_lease_rules_on_the_observers_clock(env: Env) -> None:
    """client-go's rules: a candidate takes the Lease only after seeing no renewal for the lease
    duration on its own clock; the takeover bumps leaseTransitions; the old holder then stands by."""
    from lwsflow.controller.incluster.leader import LeaderElector

    now = [0.0]

    def elector(name: str) -> LeaderElector:
        return LeaderElector(env.kube, NS, "rules", name, lease_duration_s=3, renew_deadline_s=2,
                             retry_period_s=1, monotonic=lambda: now[0])

    a, b = elector("a"), elector("b")
    assert a.try_acquire_or_renew()  # creates the Lease
    assert not b.try_acquire_or_renew()  # held: b starts observing at t=0
    now[0] = 2.0
    assert a.try_acquire_or_renew()  # a renews
    assert not b.try_acquire_or_renew()  # b sees the renewal: its clock restarts at t=2
    now[0] = 4.9
    assert not b.try_acquire_or_renew()  # 2.9 s without renewal as b saw it: still held
    now[0] = 5.1
    assert b.try_acquire_or_renew()  # a stopped renewing: b takes over
    lease = env.kube.get(LEASE, NS, "rules")["spec"]
    assert lease["holderIdentity"] == "b" and lease["leaseTransitions"] == 1
    assert not a.try_acquire_or_renew()  # the old leader sees a new holder and stands by
    b.leader.set()
    b.stop(release=True)  # a graceful stop empties the holder: a takes over at once
    assert a.try_acquire_or_renew()
