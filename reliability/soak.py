"""The seeded soak (issue 36): hours of virtual time on one embedded cluster, everything at once.

RolloutPolicies over LWS (staged, some behind a manual gate), P/D pairs and DisaggregatedSets; two
`lwsflow controller run --leader-elect` processes on one Lease (``leader_kill_campaign``'s command),
each one that dies replaced at once, as its Deployment would. A seeded schedule over virtual time
injects: GitOps syncs of good, slow and failing (never Ready) releases; policy edits and deletions
(recreated later); SIGKILLs of the leader and Lease delays (its renewals hang past the lease); slow
answers; node failures (recovered later) and pod crashes; throughout, the API server answers a share
of requests 500/503/429 (Retry-After), 409 on writes, cuts watches and answers 410 on resumes
(``ApiFaults``). Manual gates are promoted a while after a rollout reaches them.
``soak_checks.Checker`` judges every change as it happens; at the end the faults stop, the last
rollouts drain, and every policy must have an outcome.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import logging
import os
import random
import signal
import subprocess
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from lwsflow.controller.api import labels as L
from lwsflow.controller.errors import ApiError, InvalidInput, NotFound
from lwsflow.controller.kube.resources import DS, ROLLOUT_POLICY
from lwsflow.controller.policy import actions as policy_actions
from lwsflow.sim.apiserver import ApiFaults
from lwsflow.sim.apiserver.faults import RequestInfo
from lwsflow.sim.faults import Fault, inject
from reliability.fault_helpers import _Paused
from reliability.fault_trials import NEVER_READY
from reliability.incluster_env import policy, sync
from reliability.leader_kill_campaign import controller_command
from reliability.rollout_env import NS, Env, ds_manifest, lws_manifest, make_env, new_release
from reliability.soak_checks import INVARIANTS, Checker

LEASE = "lwsflow-controller"
SHAPES = ("lws", "gate", "pair", "ds")  # drawn in this mix, one policy each
MIX = (0.45, 0.2, 0.2, 0.15)
# scheduled faults per virtual hour per policy (kills, delays, nodes: per hour for the whole cluster)
PER_POLICY_HOUR = {"release-good": 0.5, "release-slow": 0.12, "release-failing": 0.12, "policy-edit": 0.08,
                   "policy-delete": 0.04, "pod-crash": 0.15}
# a leader fault costs about 10 wall s (lease, restart, the new standby reading the Lease): an hour
# of virtual time at x300, so about one an hour can land
PER_HOUR = {"leader-kill": 0.6, "lease-delay": 0.3, "node-failure": 1.0, "slow-answers": 1.5}
# the order each kind first fires in: the two leader faults far apart, each needing a standby up
SCHEDULED = ("lease-delay", *PER_POLICY_HOUR, "node-failure", "slow-answers", "leader-kill")
API_KINDS = {500: "api-500", 503: "api-503", 429: "api-429-retry-after", 409: "api-409", 410: "api-410-gone"}
FAULTS = (*SCHEDULED, "controller-restart", "promote", *API_KINDS.values(), "watch-cut")
SLOW = {"sim.lwsflow.io/load-seconds": "600"}  # a release whose pods take 10 virtual minutes to load
GOOD = {"sim.lwsflow.io/load-seconds": "20", **{k: "false" for k in NEVER_READY}}


class CountingFaults(ApiFaults):
    """``ApiFaults`` that also counts the watch streams it cuts."""

    cuts = 0

    def watch_cut_after(self) -> float | None:
        after = super().watch_cut_after()
        self.cuts += after is not None
        return after


@dataclass
class Target:
    policy: str
    shape: str
    lws: list[str]  # the LWS the checker sees (a DS's children are found by their labels)
    stages: list[dict]
    deleted: bool = False


@dataclass
class Soak:
    seed: int
    hours: float
    policies: int = 100
    speed: float = 300.0  # virtual seconds per wall second
    lease_s: float = 3.0  # wall seconds
    error_rate: float = 0.01  # share of requests answered 500/503/429
    conflict_rate: float = 0.01  # share of writes answered 409
    gone_rate: float = 0.3  # share of watch resumes answered 410 Gone (the informer relists)
    progress: Callable[[str], None] = lambda _line: None
    counts: Counter[str] = field(default_factory=Counter)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)  # the schedule and its targets
        self.human = random.Random(self.seed + 1)  # when a person promotes
        self.net = random.Random(self.seed + 2)  # which answers are slow (request threads)
        self.checker = Checker(LEASE)
        self.targets: list[Target] = []
        self.procs: list[subprocess.Popen[bytes]] = []
        self.started: dict[int, float] = {}  # pid -> time.monotonic() it was started
        self.slow_until = 0.0  # wall time the slow answers stop
        self.delayed: tuple[str, float] = ("", 0.0)  # (identity, wall time) whose Lease requests hang
        self.waiting: dict[str, float] = {}  # policy -> virtual time to promote it
        self.releases = 0
        self.lag = 0.0  # the most virtual seconds a scheduled fault fired late (the driver's lag)

    # -- set-up ----------------------------------------------------------------------------------------
    def _faults(self) -> CountingFaults:
        faults = CountingFaults(seed=self.seed, error_rate=self.error_rate, error_statuses=(500, 503, 429),
                                retry_after_s=1, conflict_rate=self.conflict_rate, watch_cut_mean_s=30.0,
                                gone_on_resume_rate=self.gone_rate)
        faults.request_hook = self._hook
        return faults

    def _hook(self, req: RequestInfo) -> None:
        self.checker.on_request(req)  # judged before any delay: the time it reached the server
        now = time.monotonic()
        ident, until = self.delayed
        if req.resource.startswith("leases") and ident and req.user_agent.endswith(ident) and now < until:
            self.counts["lease-delay-requests"] += 1
            time.sleep(self.lease_s * 1.2)  # past the renew deadline: the leader must step down
        elif now < self.slow_until and req.verb in ("get", "list") and self.net.random() < 0.2:
            self.counts["slow-answer-requests"] += 1
            time.sleep(self.net.uniform(0.05, 0.4))

    def _build(self, env: Env) -> None:
        for i in range(self.policies):
            shape = SHAPES[i] if i < len(SHAPES) else self.rng.choices(SHAPES, MIX)[0]  # each at least once
            name = f"{shape}{i}"
            if shape in ("lws", "gate"):
                env.create(lws_manifest(name, partition=4))
                stages: list[dict] = [{"groups": 1, "bake": "5m"}, {"groups": "50%", "bake": "5m"},
                                      {"groups": "100%"}]
                if shape == "gate":
                    stages[2]["pause"] = {}
                    self.checker.gated[name] = (name, [2])
                t = Target(f"p-{name}", shape, [name], stages)
            elif shape == "pair":
                for role, n in (("prefill", 4), ("decode", 2)):
                    env.create(lws_manifest(f"{name}-{role}", replicas=n, size=1, partition=n,
                                            labels={L.PD_PAIR: name, L.ROLE: role}))
                t = Target(f"p-{name}", shape, [f"{name}-prefill", f"{name}-decode"],
                           [{"groups": 1, "bake": "5m"}, {"groups": "100%"}])
            else:
                env.create(ds_manifest(name))
                t = Target(f"p-{name}", shape, [], [{"groups": "100%"}])
            self.targets.append(t)
            self._create_policy(env, t)

    def _create_policy(self, env: Env, t: Target) -> None:
        kind = {"pair": "LeaderWorkerSetPair", "ds": "DisaggregatedSet"}.get(t.shape, "LeaderWorkerSet")
        p = policy(t.policy, t.policy[2:], t.stages, progressDeadline="30m")
        p["spec"]["targetRef"]["kind"] = kind
        _retry(lambda: env.kube.create(ROLLOUT_POLICY, NS, p))

    def _spawn(self, env: Env, tmp: Path) -> None:
        log = tmp / f"controller-{len(self.procs)}.log"
        with log.open("wb") as fh:
            self.procs.append(subprocess.Popen(controller_command(env.kubeconfig, self.lease_s, "30s"),
                                               stdout=fh, stderr=subprocess.STDOUT))
        self.started[self.procs[-1].pid] = time.monotonic()

    def _standby_up(self) -> bool:
        """A live replica other than the holder, started long enough ago to have read the Lease."""
        now = time.monotonic()
        return any(p.poll() is None and p.pid != _pid(self.checker.holder) and
                   now - self.started[p.pid] > 2 * self.lease_s for p in self.procs)

    def _supervise(self, env: Env, tmp: Path) -> None:
        """Two replicas at all times: one that exited (killed, or lost the lease) is replaced."""
        alive = [p for p in self.procs if p.poll() is None]
        for _ in range(2 - len(alive)):
            self._spawn(env, tmp)
            self.counts["controller-restart"] += 1

    # -- the schedule ----------------------------------------------------------------------------------
    def schedule(self, start: float) -> list[tuple[float, str, int]]:
        """(virtual time, fault kind, target index or -1: drawn when it fires), seeded. Every kind at
        least once, spread over the run, after a good release of one policy of each shape."""
        span = self.hours * 3600
        firsts = {t.shape: i for i, t in reversed(list(enumerate(self.targets)))}
        out = [(start + 60.0 * n, "release-good", i) for n, i in enumerate(firsts.values())]
        out += [(start + span * (i + 0.5) / len(SCHEDULED) * 0.8, k, -1) for i, k in enumerate(SCHEDULED)]
        rates = {k: r * self.policies for k, r in PER_POLICY_HOUR.items()} | PER_HOUR
        for kind, per_hour in rates.items():
            n = max(0, round(per_hour * self.hours * self.rng.uniform(0.8, 1.2)) - 1)
            out += [(start + self.rng.uniform(0, span * 0.9), kind, -1) for _ in range(n)]
        return sorted(out)

    def _fire(self, env: Env, kind: str, target: int = -1) -> bool:
        """Inject ``kind`` now; False when it cannot be now (no live leader yet): it is tried later."""
        t = self.targets[target] if target >= 0 else \
            self.rng.choice([t for t in self.targets if not t.deleted] or self.targets)
        if kind.startswith("release-"):
            ann = {"release-good": GOOD, "release-slow": {**GOOD, **SLOW},
                   "release-failing": {**GOOD, **NEVER_READY}}[kind]
            self.releases += 1
            self._release(env, t, f"vllm:r{self.releases}", ann)
        elif kind == "policy-edit":
            stages = copy.deepcopy(t.stages)
            stages[0]["bake"] = self.rng.choice(["1m", "5m", "10m"])
            _retry(lambda: _gone_ok(  # Git may restore a deleted policy before the soak recreated it
                lambda: env.kube.merge_patch(ROLLOUT_POLICY, NS, t.policy, {"spec": {"stages": stages}})))
        elif kind == "policy-delete":
            t.deleted = True
            _retry(lambda: _gone_ok(lambda: env.kube.delete(ROLLOUT_POLICY, NS, t.policy)))
            back = env.cluster.now() + self.rng.uniform(600, 3600)  # Git restores it
            env.cluster.at(back, lambda: setattr(t, "deleted", False))
        elif kind in ("leader-kill", "lease-delay") and (time.monotonic() < self.delayed[1]
                                                         or not self._standby_up()):
            # one leader fault at a time (a kill now would hide the delay's step-down), and a standby
            # up to take over: else it measures a cold start, as leader_kill_campaign says
            return False
        elif kind == "leader-kill":
            pid = _pid(self.checker.holder)
            proc = next((p for p in self.procs if p.pid == pid and p.poll() is None), None)
            if proc is None:
                return False
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(10)
        elif kind == "lease-delay":
            if not any(p.pid == _pid(self.checker.holder) and p.poll() is None for p in self.procs):
                return False
            self.delayed = (self.checker.holder, time.monotonic() + self.lease_s * 3)
        elif kind == "slow-answers":
            self.slow_until = time.monotonic() + self.rng.uniform(1.0, 4.0)
        elif kind == "node-failure":
            node = self.rng.choice(sorted(env.cluster.scheduler.nodes))
            self._in_loop(env, lambda: self.checker.hit(self.checker.pods_on(node)),
                          Fault(kind="node-failure", node=node))
            env.cluster.at(env.cluster.now() + self.rng.uniform(300, 1800),
                           lambda: inject(env.cluster, Fault(kind="node-recovery", node=node)))
        elif kind == "pod-crash":
            pods = sorted((owner, n) for owner, live in list(self.checker.pods.items())
                          for (_ns, n) in list(live))
            if not pods:
                return False
            owner, pod = self.rng.choice(pods)
            self._in_loop(env, lambda: self.checker.hit(
                [p for p in self.checker.pods.get(owner, {}).values() if p["metadata"]["name"] == pod]),
                Fault(kind="crash", pod=pod))
        self.counts[kind] += 1
        return True

    def _in_loop(self, env: Env, before: Callable[[], None], fault: Fault) -> None:
        """Inject on the cluster's loop at the current virtual time, the checker told first."""
        def fire() -> None:
            with env.cluster.store.lock:
                before()
                with contextlib.suppress(Exception):  # the pod went away meanwhile: nothing to crash
                    inject(env.cluster, fault)
        env.cluster.at(env.cluster.now(), fire)

    def _release(self, env: Env, t: Target, image: str, ann: dict[str, str]) -> None:
        """What Argo CD applies for a new overlay (a pair: both roles, one after the other)."""
        if t.shape == "ds":
            def apply() -> None:
                live = env.kube.get(DS, NS, t.policy[2:])
                env.kube.merge_patch(DS, NS, t.policy[2:], {"spec": {"roles": new_release(
                    live, image, **ann)["spec"]["roles"]}})
            _retry(apply)
            return
        for name in t.lws:
            _retry(functools.partial(sync, env, name, image, **ann))

    def _promote(self, env: Env) -> None:
        """A person promotes a rollout a while (5-30 virtual minutes) after it reached its gate."""
        now = env.cluster.now()
        for name, st in list(self.checker.phases.items()):
            if st.get("phase") != "WaitingForPromotion":
                self.waiting.pop(name, None)
                continue
            due = self.waiting.setdefault(name, now + self.human.uniform(300, 1800))
            if now >= due:
                # the status was behind: the rollout moved on meanwhile (superseded, aborted)
                with contextlib.suppress(ApiError, InvalidInput):
                    policy_actions.promote(env.kube, NS, name)
                    self.counts["promote"] += 1
                self.waiting.pop(name, None)

    # -- the run ---------------------------------------------------------------------------------------
    def run(self, tmp: Path) -> int:
        """The whole soak; returns the number of violations."""
        logging.getLogger("lwsflow").setLevel(logging.CRITICAL)  # injected faults log as they should
        faults = self._faults()
        env = make_env(tmp, faults=faults, speed=self.speed)
        env.rec.store.stop()  # the tests' recorder keeps every change: a day of them is gigabytes
        env.cluster.store.subscribe(self.checker.on_event)
        try:
            with _Paused(faults):
                self._build(env)
            self._spawn(env, tmp)
            self._spawn(env, tmp)
            self._warm_up(env)
            start = env.cluster.now()
            plan = self.schedule(start)
            end = start + self.hours * 3600
            next_line, shown = time.monotonic() + 30, 0
            while env.cluster.now() < end or plan:  # a driver that fell behind fires late, never skips
                while plan and plan[0][0] <= env.cluster.now():
                    due, kind, target = plan.pop(0)
                    self.lag = max(self.lag, env.cluster.now() - due)
                    fired = self._fire(env, kind, target)
                    if not fired and env.cluster.now() < end + 3600:
                        plan.append((env.cluster.now() + 120, kind, target))
                        plan.sort()
                    elif not fired:  # an hour past the end and still no standby up to take over: say so
                        self.counts["not-fired"] += 1
                        self.progress(f"{kind}: not fired (an hour past the end, no standby up or another "
                                      "leader fault still running)")
                for v in self.checker.violations[shown:]:
                    self.progress(f"VIOLATION {v}")
                shown = len(self.checker.violations)
                self._supervise(env, tmp)
                self._recreate(env)
                self._promote(env)
                if time.monotonic() >= next_line:
                    next_line += 30
                    self.progress(self.progress_line(env, start))
                time.sleep(0.05)
            self._drain(env, tmp, faults)
        finally:
            for p in self.procs:
                if p.poll() is None:
                    p.send_signal(signal.SIGTERM)
            for p in self.procs:
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()
            for status, n in faults.injected.items():
                self.counts[API_KINDS.get(status, f"api-{status}")] += n
            self.counts["watch-cut"] += faults.cuts
            env.close()
        return len(self.checker.violations)

    def _warm_up(self, env: Env) -> None:
        """Every group Ready and every policy adopted its target's template before the first fault."""
        t0 = time.monotonic()
        deadline = t0 + 120 + 2 * self.policies
        while self._unfinished() and time.monotonic() < deadline:
            time.sleep(0.1)
        self.progress(f"warm-up: {len(self.targets) - len(self._unfinished())} of {len(self.targets)} "
                      f"policies adopted their target in {time.monotonic() - t0:.0f} s wall")

    def _recreate(self, env: Env) -> None:
        """A deleted policy comes back (Git restores it) once its time is up."""
        for t in self.targets:
            if not t.deleted and t.policy not in self.checker.phases:
                self._create_policy(env, t)
                self.counts["policy-recreate"] += 1

    def _drain(self, env: Env, tmp: Path, faults: ApiFaults) -> None:
        """Faults stop; gates are promoted; every policy must reach an outcome within 3 virtual hours."""
        self.delayed, self.slow_until = ("", 0.0), 0.0
        faults.error_rate = faults.conflict_rate = faults.watch_cut_mean_s = faults.gone_on_resume_rate = 0.0
        for t in self.targets:
            t.deleted = False
        deadline = env.cluster.now() + 3 * 3600
        while env.cluster.now() < deadline:
            self._supervise(env, tmp)
            self._recreate(env)
            self.waiting = {k: 0.0 for k in self.waiting}
            self._promote(env)
            if not self._unfinished():
                break
            time.sleep(0.1)
        left = self._unfinished()
        self.checker.checks["policy-outcome"] += len(self.targets)
        for name, phase in left.items():
            self.checker.violate("policy-outcome", f"{name} left {phase}: "
                                 f"{self.checker.phases.get(name, {}).get('message', '')}")

    def _unfinished(self) -> dict[str, str]:
        out = {}
        for t in self.targets:
            st = self.checker.phases.get(t.policy)
            if st is None:
                out[t.policy] = "deleted"
            elif st.get("phase") in ("Progressing", "WaitingForPromotion") or not st.get("stableRevision"):
                out[t.policy] = str(st.get("phase") or "without a stable revision")
        return out

    def progress_line(self, env: Env, start: float) -> str:
        active = sum(st.get("phase") in ("Progressing", "WaitingForPromotion")
                     for st in list(self.checker.phases.values()))
        return (f"virtual {(env.cluster.now() - start) / 3600:5.2f} h of {self.hours:g}: {active} rollouts "
                f"active, {sum(self.counts.values())} faults, {sum(self.checker.checks.values())} checks, "
                f"{len(self.checker.violations)} violations, driver lag up to {self.lag:.0f} s")


def _retry(fn: Callable[[], object], attempts: int = 8) -> object:
    """The soak's own writes (Argo CD, a person) retry injected errors, as theirs do."""
    for i in range(attempts):
        try:
            return fn()
        except ApiError:
            if i == attempts - 1:
                raise
            time.sleep(0.05 * (i + 1))
    return None


def _gone_ok(fn: Callable[[], object]) -> None:
    with contextlib.suppress(NotFound):
        fn()


def _pid(identity: str) -> int:
    """The process id in a replica's identity (``host-PID-suffix``)."""
    try:
        return int(identity.split("-")[-2])
    except (IndexError, ValueError):
        return -1


def run_soak(soak: Soak) -> int:
    with tempfile.TemporaryDirectory(prefix="lwsflow-soak-") as tmp:
        return soak.run(Path(tmp))


__all__ = ["FAULTS", "INVARIANTS", "Soak", "run_soak"]
