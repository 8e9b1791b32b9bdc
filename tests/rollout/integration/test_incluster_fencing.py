"""Safe leadership: a leader that cannot prove it holds the Lease stops writing before a standby can
take over (``incluster/leader.py`` write fence), and /healthz fails while the loop makes no progress.

Two controllers run in this process, each with its own connections and User-Agent; the embedded API's
``request_hook`` delays the first one's Lease requests (its renewals hang past the renew deadline and
the lease duration) and records, server side, every write by identity.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest

from lwsflow.controller.errors import Fenced, NotFound
from lwsflow.controller.incluster.leader import LeaderElector
from lwsflow.controller.incluster.manager import Controller
from lwsflow.controller.incluster.metrics import Endpoints, Metrics
from lwsflow.controller.incluster.notify import Notifier
from lwsflow.controller.kube.client import Kube
from lwsflow.controller.kube.informer import Informer
from lwsflow.controller.kube.ratelimit import TokenBucket
from lwsflow.controller.kube.resources import LEASE, LWS, ROLLOUT_POLICY, SECRET
from lwsflow.controller.policy.model import Webhook
from lwsflow.sim.apiserver.faults import RequestInfo
from reliability.incluster_env import policy, running, sync, wait_policy
from reliability.rollout_env import NS, Env, lws_manifest
from reliability.skip_clock import SkipClock
from tests.rollout.integration.test_incluster_queue import FakeTime

WRITES = {"create", "patch", "update", "delete"}


def _kube(env: Env, agent: str) -> Kube:
    kube = Kube.connect(str(env.kubeconfig))
    kube.api.user_agent = agent
    return kube


def _replica(env: Env, name: str, lease: str = "fence", **controller: Any) -> Controller:
    """A leader-electing controller replica on ``lease``, its Lease and its writes on connections of their
    own (User-Agents ``lease/NAME`` and ``lwsflow-controller/NAME``); ``controller``: more arguments."""
    stop = threading.Event()
    leader = LeaderElector(_kube(env, f"lease/{name}"), NS, lease, name, lease_duration_s=3.0,
                           renew_deadline_s=2.0, retry_period_s=0.5, on_lost=stop.set)
    threading.Thread(target=leader.run, daemon=True).start()
    return Controller(_kube(env, f"lwsflow-controller/{name}"), SkipClock(env.cluster, env.sim.speed),
                      namespace=NS, leader=leader, stop=stop, **controller)


def _until(cond: Callable[[], bool], what: str, timeout: float = 20.0) -> None:
    end = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < end, f"not reached in {timeout}s: {what}"
        time.sleep(0.02)


def _holder(env: Env, lease: str = "fence") -> str:
    try:
        return str(env.kube.get(LEASE, NS, lease)["spec"].get("holderIdentity") or "")
    except Exception:
        return ""


def test_a_deposed_leader_makes_no_write_after_the_standbys_first(env: Env) -> None:
    writes: list[tuple[float, str, str]] = []  # (time, agent, resource) of every write but the Lease's
    hang = threading.Event()
    let_go = threading.Event()
    lock = threading.Lock()

    def hook(req: RequestInfo) -> None:
        if req.user_agent == "lease/a" and hang.is_set():
            let_go.wait(30)  # a's renewals hang: past its renew deadline and the lease duration, till done
        if req.verb in WRITES and req.resource != "leases":
            with lock:
                writes.append((time.monotonic(), req.user_agent, req.resource))

    env.sim.api.faults.request_hook = hook
    for name in ("f1", "f2"):
        env.create_ready(lws_manifest(name, replicas=4, partition=4))
        # f1 bakes stage 1 for 20 virtual minutes (6 s here): a's driver is in flight at the takeover
        bake = "20m" if name == "f1" else "1m"
        env.kube.create(ROLLOUT_POLICY, NS, policy(f"p{name}", name, [{"groups": 1, "bake": bake},
                                                                      {"groups": "100%"}],
                                                   progressDeadline="60m"))  # outlasts the skipped bake
    a = _replica(env, "a")
    try:
        with running(a):
            end = time.monotonic() + 20
            while _holder(env) != "a" and time.monotonic() < end:
                time.sleep(0.05)
            assert _holder(env) == "a"
            b = _replica(env, "b")
            with running(b):
                for name in ("f1", "f2"):
                    wait_policy(env, f"p{name}", lambda s: bool(s.get("stableRevision")))
                sync(env, "f1", "vllm:2")  # a is rolling f1 when its renewals start to hang
                wait_policy(env, "pf1", lambda s: s.get("phase") == "Progressing")
                hang.set()
                end = time.monotonic() + 20
                while _holder(env) != "b" and time.monotonic() < end:
                    time.sleep(0.05)
                assert _holder(env) == "b", "the standby did not take over"
                assert a.kube.fenced() is not None  # a knows it cannot prove its lease: every write refused
                _until(lambda: f"{NS}/pf1" in b.workers, "b resumed f1's rollout")
                env.cluster.advance(20 * 60)  # what is left of f1's bake, skipped (both drivers see it)
                sync(env, "f2", "vllm:2")  # something new to act on: only b may
                for name in ("f1", "f2"):
                    wait_policy(env, f"p{name}", lambda s: s.get("phase") == "Succeeded", timeout=90)
                hang.clear()
                let_go.set()  # before a stops: its renewal must return for its loop to end
    finally:
        let_go.set()
    with lock:
        by_b = [t for t, agent, _ in writes if agent == "lwsflow-controller/b"]
        assert by_b, "the standby never wrote"
        late_a = [(round(t - by_b[0], 3), res) for t, agent, res in writes
                  if agent == "lwsflow-controller/a" and t >= by_b[0]]
        early_a = [t for t, agent, _ in writes if agent == "lwsflow-controller/a" and t < by_b[0]]
    assert early_a, "a never wrote: the test did not exercise a leader"
    assert late_a == [], f"the deposed leader wrote after the standby's first write: {late_a}"


@contextmanager
def served_healthz(env: Env, **kw: Any) -> Iterator[str]:
    """A running controller with its health endpoint, synced and healthy: its /healthz URL."""
    metrics = Metrics()
    ctl = Controller(env.kube, env.clock(), namespace=NS, metrics=metrics, **kw)
    ep = Endpoints(0, metrics, ready=ctl.is_ready, healthy=ctl.healthy).start()
    url = f"http://127.0.0.1:{ep.port}/healthz"
    try:
        with running(ctl):
            _until(lambda: ctl.synced, "the controller's caches synced")
            assert httpx.get(url).status_code == 200
            yield url
    finally:
        ep.stop()


def test_healthz_fails_while_a_reconcile_makes_no_progress(env: Env) -> None:
    """A reconcile stuck in one request (its status write hangs until /healthz has failed, past
    ``stall_s``) fails /healthz; once it returns, /healthz passes again."""
    stall = threading.Event()
    unstuck = threading.Event()

    def hook(req: RequestInfo) -> None:
        if req.resource == "rolloutpolicies/status" and stall.is_set():
            unstuck.wait(30)

    env.sim.api.faults.request_hook = hook
    env.create_ready(lws_manifest("h", replicas=2, partition=2))
    try:
        with served_healthz(env, stall_s=1.0) as url:
            stall.set()
            env.kube.create(ROLLOUT_POLICY, NS, policy("ph", "h", [{"groups": 1}, {"groups": "100%"}]))
            codes = []
            end = time.monotonic() + 20
            while 500 not in codes and time.monotonic() < end:
                codes.append(httpx.get(url).status_code)
                time.sleep(0.1)
            stall.clear()
            unstuck.set()
            assert 500 in codes, codes
            wait_policy(env, "ph", lambda s: bool(s.get("stableRevision")))
            _until(lambda: httpx.get(url).status_code == 200, "/healthz passes again")
    finally:
        unstuck.set()


def test_a_write_held_in_the_token_bucket_past_the_renew_deadline_is_not_sent(env: Env) -> None:
    """The fence is checked after the client's rate-limit wait, right before the request goes out: a
    write that waits in the token bucket until the renew deadline has passed is refused and never
    reaches the server. One injected clock drives the elector and the bucket."""
    sent: list[str] = []  # the secrets writes the server saw

    def hook(req: RequestInfo) -> None:
        if req.verb in WRITES and req.resource == "secrets":
            sent.append(req.verb)

    env.sim.api.faults.request_hook = hook
    clock = FakeTime()
    leader = LeaderElector(env.kube, NS, "bucket", "me", lease_duration_s=15.0, renew_deadline_s=10.0,
                           retry_period_s=2.0, monotonic=clock)
    assert leader.step() and leader.write_fence() is None  # leader, renewed at t=0
    kube = Kube(env.kube.api)
    kube.limiter = TokenBucket(0.05, 1, monotonic=clock, sleep=clock.sleep)  # one now, then one per 20 s
    fenced = kube.view(fence=leader.write_fence)

    def secret(name: str) -> dict:
        return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name}, "data": {}}

    fenced.create(SECRET, NS, secret("first"))  # the bucket's one token: sent at once
    clock.t = 5.0  # well within the renew deadline when the write is asked for...
    with pytest.raises(Fenced, match="renew deadline"):
        fenced.create(SECRET, NS, secret("second"))  # ...past it once its token is due (t=20)
    assert clock.slept == [15.0]  # it did wait in the bucket
    assert sent == ["create"]  # the server never saw the second
    assert env.kube.get(SECRET, NS, "first")
    with pytest.raises(NotFound):
        env.kube.get(SECRET, NS, "second")


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")  # the crash itself
def test_healthz_fails_once_an_informer_thread_has_died(env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    """An informer thread killed by an error its loop does not handle (a bug) leaves its cache stale
    for good: /healthz fails so that the kubelet restarts the replica."""
    crash = threading.Event()
    watch = Informer._watch

    def crashing_lws_watch(self: Informer) -> None:
        if self.res == LWS:  # listed (synced) already; its watch dies when the test says so
            crash.wait(30)
            raise RuntimeError("a bug in the LWS informer's loop")
        watch(self)

    monkeypatch.setattr(Informer, "_watch", crashing_lws_watch)
    with served_healthz(env) as url:
        crash.set()
        codes = []
        end = time.monotonic() + 5
        while time.monotonic() < end and 500 not in codes:
            codes.append(httpx.get(url).status_code)
            time.sleep(0.05)
        assert codes[-1] == 500, codes
        assert httpx.get(url).status_code == 500  # for good: nothing restarts the thread


def test_a_leader_that_cannot_prove_its_lease_posts_no_webhook(env: Env) -> None:
    """A webhook post is a write too: the controller fences its notifier on its leadership, checked
    right before each post, so a message queued by a leader is dropped once it is past its renew
    deadline (the standby announces what it does itself)."""
    env.kube.create(SECRET, NS, {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "hook"},
                                 "data": {"url": "aHR0cDovL2hvb2suZXhhbXBsZQ=="}})  # http://hook.example
    posted: list[str] = []

    def post(_url: str, body: dict[str, str]) -> int:
        posted.append(body["text"])
        return 200

    clock = FakeTime()
    leader = LeaderElector(env.kube, NS, "notify", "me", lease_duration_s=15.0, renew_deadline_s=10.0,
                           retry_period_s=2.0, monotonic=clock)
    assert leader.step()
    notifier = Notifier(env.kube, attempts=1, post=post)
    Controller(env.kube, env.clock(), namespace=NS, leader=leader, notifier=notifier)  # wires the fence
    hooks = [Webhook.model_validate({"secretKeyRef": {"name": "hook", "key": "url"}})]

    def delivered(what: Callable[[], int]) -> None:
        end = time.monotonic() + 10
        while not what() and time.monotonic() < end:
            time.sleep(0.02)

    notifier.send(NS, hooks, "while leading")
    delivered(lambda: notifier.sent)
    clock.t = 10.0  # the renew deadline has passed: nothing is posted from now on
    notifier.send(NS, hooks, "past the renew deadline")
    delivered(lambda: notifier.dropped)
    notifier.close()
    assert (posted, notifier.sent, notifier.dropped) == (["while leading"], 1, 1)
