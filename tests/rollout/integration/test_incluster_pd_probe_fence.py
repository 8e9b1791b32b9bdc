"""A leader deposed in the middle of a RolloutPolicy's P/D probe: its canaries' writes are fenced too.

Two controllers run in this process, each with its own connections and User-Agent, wired as
`lwsflow controller run` wires them (a probe built on the replica's own, unfenced connection). The
embedded API's ``request_hook`` holds the leader's probe while its canaries come up, hangs its Lease
renewals until the standby has taken over, and records, server side, every write by identity.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from lwsflow.components.pd_probe import pd_probe
from lwsflow.controller.incluster.manager import Controller
from lwsflow.sim.apiserver.faults import RequestInfo
from reliability.incluster_env import running, wait_policy
from reliability.rollout_env import LAYOUTS, NS, SAME_LAYOUT, Env, make_env
from tests.rollout.integration import test_incluster_fencing as fencing
from tests.rollout.integration.test_incluster_leader import _wait
from tests.rollout.integration.test_incluster_pd_probe import _pair, _policy, _sync_pair

WRITES = {"create", "patch", "update", "delete"}
LEASE_NAME = "probe-fence"


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Env]:
    e = make_env(tmp_path, images=LAYOUTS)  # stand-in engines: the probe hands KV off between them
    try:
        yield e
    finally:
        e.close()


def _replica(env: Env, name: str) -> Controller:
    """A replica wired as `lwsflow controller run` wires it: the probe built on its own connection."""
    return fencing._replica(env, name, LEASE_NAME,
                            pd_probe=pd_probe(fencing._kube(env, f"lwsflow-controller/{name}")))


def _holder(env: Env) -> str:
    return fencing._holder(env, LEASE_NAME)


def test_a_leader_deposed_mid_probe_makes_no_write_after_the_standbys_first(env: Env) -> None:
    """a's probe has created its canaries and is looking for them when its renewals start to hang; b
    takes over, probes and rolls the pair itself. Then a's probe goes on: deleting its canaries is its
    next write, refused by the fence, so on the server a sends nothing after b's first write."""
    writes: list[tuple[float, str, str, str]] = []  # (time, agent, verb, resource), Leases apart
    lock = threading.Lock()
    hang = threading.Event()  # a's Lease requests hang: past its renew deadline and the lease duration
    let_go = threading.Event()  # ...until the test is done with the takeover
    probing = threading.Event()  # a has created a canary
    release = threading.Event()  # a's probe may see its canaries

    def hook(req: RequestInfo) -> None:
        if req.user_agent == "lease/a" and hang.is_set():
            let_go.wait(30)
        if req.user_agent == "lwsflow-controller/a" and req.resource == "pods" and probing.is_set():
            release.wait(30)  # a's probe waits for its canaries here (listing their pods)
        if req.verb in WRITES and req.resource != "leases":
            with lock:
                writes.append((time.monotonic(), req.user_agent, req.verb, req.resource))
            if req.user_agent == "lwsflow-controller/a" and req.verb == "create" \
                    and req.resource == "leaderworkersets":
                probing.set()

    env.sim.api.faults.request_hook = hook
    _pair(env)
    _policy(env)
    a = _replica(env, "a")
    try:
        with running(a):
            _wait(lambda: _holder(env) == "a", 20, "a leads")
            b = _replica(env, "b")
            with running(b):
                wait_policy(env, "pp", lambda s: bool(s.get("stableRevision")))
                _sync_pair(env, SAME_LAYOUT)
                assert probing.wait(30), "a never created its canaries"
                hang.set()
                _wait(lambda: _holder(env) == "b", 20, "the standby took over")
                _wait(lambda: any(agent == "lwsflow-controller/b" for _t, agent, _v, _r in list(writes)), 20,
                       "b wrote")
                release.set()  # a's probe goes on: its canaries, the hand-offs, then their removal
                worker = a.workers.get(f"{NS}/pp")
                assert worker is not None, "a's rollout never started"
                worker.thread.join(60)
                assert not worker.thread.is_alive(), "a's probe did not end"
                with lock:
                    by_b = [t for t, agent, _v, _r in writes if agent == "lwsflow-controller/b"]
                    late_a = [(round(t - by_b[0], 3), verb, res) for t, agent, verb, res in writes
                              if agent == "lwsflow-controller/a" and t >= by_b[0]]
                    early_a = [res for t, agent, _v, res in writes
                               if agent == "lwsflow-controller/a" and t < by_b[0]]
                assert "leaderworkersets" in early_a, "a never wrote its canaries: it was not probing"
                assert late_a == [], f"the deposed leader wrote after the standby's first write: {late_a}"
                p = wait_policy(env, "pp", lambda s: s.get("phase") == "Succeeded", timeout=120)
                hang.clear()
                let_go.set()  # before a stops: its renewal must return for its loop to end
    finally:
        let_go.set()
    assert p["status"]["pdProbe"]["verdict"] == "Compatible"
