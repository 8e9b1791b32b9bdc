"""Drive one RolloutPolicy's rollout with the existing engine, honouring its manual gates.

The engine does the stages (gate, bake, checks, rollback) and persists progress on the target; the
driver only adds what a policy has on top: per-stage bake and checks (engine options) and manual
gates. A gated stage's partition is never lowered before its promotion mark is on the target
(:mod:`lwsflow.controller.policy.gates`), so a controller that takes over resumes at the right
stage without skipping a gate. ``chain_partitions`` is off when a policy has gates: the engine
would otherwise lower the next stage's partition in the write that passes the current one.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from lwsflow.controller.analysis.incluster import unavailable_hook
from lwsflow.controller.api import labels as L
from lwsflow.controller.api.duration import duration_seconds
from lwsflow.controller.api.wire import Obj
from lwsflow.controller.clock import Clock
from lwsflow.controller.kube import watch
from lwsflow.controller.kube.client import Kube
from lwsflow.controller.kube.resources import DS, LWS, Resource
from lwsflow.controller.pd import incluster as pd_gate
from lwsflow.controller.pd.compat import CompatProbe
from lwsflow.controller.pd.pair import ROLES, PairRollout, find_pair
from lwsflow.controller.policy import gates
from lwsflow.controller.policy.model import Check, RolloutPolicySpec, SmokeCheck
from lwsflow.controller.rollout import planner, state
from lwsflow.controller.rollout.engine import Outcome, Rollout, Wiring, finish
from lwsflow.controller.rollout.hooks import Hook, HookContext, HookResult, command_hook, http_probe, run_hook
from lwsflow.controller.rollout.options import RolloutOptions
from lwsflow.controller.rollout.session import budget_patch, capacity_preflight, engine_for
from lwsflow.controller.rollout.target import Follower

log = logging.getLogger("lwsflow.controller.driver")

Waiter = Callable[[Resource, str, str, Callable[[Obj], bool], threading.Event], "Obj | None"]
"""Blocks until a target satisfies a predicate (the controller's informer cache; None: watch it)."""

SmokeFactory = Callable[[SmokeCheck], Hook]
"""Makes the smoke-test hook (wired by the CLI: the controller must not import components)."""

KIND_TO_TARGET = {"LeaderWorkerSet": "lws", "DisaggregatedSet": "ds", "LeaderWorkerSetPair": "pair"}


def resource_of(kind: str) -> Resource:
    return DS if kind == "DisaggregatedSet" else LWS


def check_hook(check: Check, smoke: SmokeFactory | None, pair: str | None = None) -> Hook:
    """``pair``: the policy rolls this P/D pair (its smoke check is of the pair, see ``_of_pair``)."""
    if check.http is not None:
        return http_probe(check.http.url, float(check.http.timeoutSeconds))
    if check.command is not None:
        return command_hook(check.command.command, float(check.command.timeoutSeconds))
    if check.smoke is not None and smoke is not None:
        return _of_pair(smoke(check.smoke), pair) if pair else smoke(check.smoke)
    def unavailable(_ctx: object) -> bool:  # a smoke check without the smoke test wired: fail
        return False
    unavailable.__name__ = "smoke:unavailable"
    return unavailable


def _of_pair(hook: Hook, pair: str) -> Hook:
    """A pair's stages run one engine per role, each role's hooks after its own gate, seeing that
    role's LWS. The last role of a stage (prefill) gets the pair (kind LeaderWorkerSetPair, ``pair``):
    both roles are on the stage's revision then, so the smoke checks both and the prefill→decode
    hand-off, as `lwsflow rollout pair/NAME --smoke` does. The first (decode) smokes its own LWS:
    Git has synced prefill's template too, whose new leaders do not exist yet. A blue-green stage's
    context is already green's pair and is left as it is."""
    def smoke(ctx: HookContext) -> HookResult:
        role = ((ctx.obj.get("metadata") or {}).get("labels") or {}).get(L.ROLE)
        if ctx.kind != "LeaderWorkerSetPair" and role == ROLES[-1]:
            ctx = dataclasses.replace(ctx, kind="LeaderWorkerSetPair", name=pair)
        return run_hook(hook, ctx)
    smoke.__name__ = getattr(hook, "__name__", "smoke")
    return smoke


def _counted(hook: Hook, on_check: Callable[[str, bool], None]) -> Hook:
    def counted(ctx: HookContext) -> HookResult:
        res = run_hook(hook, ctx)
        on_check(res.detail, res.ok)
        return res
    counted.__name__ = getattr(hook, "__name__", "check")
    return counted


def options(spec: RolloutPolicySpec, *, retry: bool, smoke: SmokeFactory | None,
            on_check: Callable[[str, bool], None] | None = None,
            analysis: Hook | None = None) -> RolloutOptions:
    """The engine options of a policy (stages, per-stage bake and checks, deadline, onFailure);
    ``analysis`` runs after every stage's checks when the policy has an analysis."""
    gated = any(s.pause is not None for s in spec.stages)
    pair = spec.targetRef.name if spec.targetRef.kind == "LeaderWorkerSetPair" else None
    report = on_check or (lambda _d, _ok: None)
    after: list[Hook] = []
    if spec.analysis is not None:
        after = [analysis if analysis is not None else unavailable_hook()]
    return RolloutOptions(
        stages=spec.stages_text(), deadline_s=duration_seconds(spec.progressDeadline),
        no_rollback=spec.onFailure == "hold", retry=retry, chain_partitions=not gated,
        stage_bakes=[duration_seconds(s.bake) for s in spec.stages],
        stage_hooks=[[*(_counted(check_hook(c, smoke, pair), report) for c in s.checks), *after]
                     for s in spec.stages])


@dataclass(frozen=True)
class DriverDeps:
    """What a driver is handed besides its job: the connection and clock, and the hooks wired in by the
    controller (metrics, its informer cache) and the CLI (smoke test, analysis, P/D probe)."""

    kube: Kube  # the rollout's own view: fenced on ``stop``, counting its requests
    clock: Clock
    smoke: SmokeFactory | None = None
    stop: threading.Event | None = None  # set: stop where it is (policy deleted, controller stopping)
    on_gate: Callable[[int, float], None] | None = None  # (stage, wall seconds waited at a manual gate)
    on_check: Callable[[str, bool], None] | None = None  # each check's (detail, passed)
    analysis: Hook | None = None  # the policy's analysis, run after every stage's checks
    pd_probe: CompatProbe | None = None  # the policy's pdProbe (pd/incluster.py)
    on_probe: pd_gate.OnProbe | None = None  # records the probe's verdict on the policy
    waiter: Waiter | None = None  # manual gates wait on the controller's cache (None: watch the target)
    follower: Follower | None = None  # the engine's gate waits on the controller's cache (None: watches)


@dataclass(frozen=True)
class Job:
    """One rollout to drive: the policy's target and what the controller saw when it decided."""

    namespace: str
    spec: RolloutPolicySpec
    retry: bool = False  # the retry of a failed release (`kubectl lwsflow retry`)
    generation: int = 0  # the policy generation it runs under
    probed: Obj | None = None  # the policy's last pdProbe record
    # the target as the controller's cache showed it when it decided to start: a fresh rollout's
    # capacity check and first write act on it, so a start costs one request (a conditional write:
    # a stale copy gets a 409 and is read again)
    seen: Obj | None = None


@dataclass
class GateWait:
    """A manual gate a driver waits at (for metrics and notifications)."""

    stage: int  # 0-based
    since_wall: float


class Driver:
    """Runs one rollout of one policy's target to an outcome (or until ``stop`` is set)."""

    def __init__(self, deps: DriverDeps, job: Job) -> None:
        self.kube, self.clock, self.ns, self.spec = deps.kube, deps.clock, job.namespace, job.spec
        self.opts = options(job.spec, retry=job.retry, smoke=deps.smoke, on_check=deps.on_check,
                            analysis=deps.analysis)
        self.stop = deps.stop or threading.Event()
        self.on_gate = deps.on_gate or (lambda _k, _s: None)
        self.ref = job.spec.targetRef
        self.pd_probe, self.generation, self.last_probe = deps.pd_probe, job.generation, job.probed
        self.on_probe = deps.on_probe or (lambda _r: None)
        self.waiter, self.seen, self.follower = deps.waiter, job.seen, deps.follower

    def run(self) -> Outcome | None:
        """The rollout's outcome; None when stopped before it ended."""
        if self.ref.kind == "LeaderWorkerSetPair":
            opts = self.opts
            live = find_pair(self.kube, self.ns, self.ref.name)
            fresh = not state.any_active(live.values())
            if fresh and pd_gate.enabled(self.spec):  # before anything of the pair mixes revisions
                probed = pd_gate.guard(self.kube, self.clock, self.ns, self.spec, self.opts, self.pd_probe,
                                       live, self.generation, self.on_probe, self.last_probe)
                if probed is None:  # refused: nothing written to the pair, the verdict is on the policy
                    return None
                opts = probed
            elif not fresh and pd_gate.enabled(self.spec):
                opts = pd_gate.resumed(opts, live)
            if fresh and not opts.together:  # `lwsflow rollout`'s check: a surge that cannot fit is refused
                checked = capacity_preflight(self.kube, "pair", self.ns, live, auto_budget=False,
                                             log=log.info, skip_gpu_free=True,
                                             on_quota_shortage=self._on_quota_shortage, stages=opts.stages)
                for role, obj in checked.items():
                    if obj is not live[role]:  # quota.onShortage inPlace: the budget goes on the target
                        self.kube.merge_patch(LWS, self.ns, obj["metadata"]["name"],
                                              budget_patch(live[role], obj, False),
                                              field_manager=L.FIELD_MANAGER)
            return PairRollout(self.kube, self.ns, self.ref.name, opts, self.clock,
                               before_stage=self._pair_gate, follower=self.follower).run()
        kind = KIND_TO_TARGET[self.ref.kind]
        res = resource_of(self.ref.kind)
        seen = self.seen if self.seen is not None and not state.RolloutState.from_object(self.seen).active \
            else None
        live = seen if seen is not None else self.kube.get(res, self.ns, self.ref.name)
        # `lwsflow rollout`'s capacity check, before anything is written: a surge that cannot fit is
        # refused up front (InvalidInput: the policy's status says why), not stalled until the deadline
        checked = capacity_preflight(self.kube, kind, self.ns, {"": live}, auto_budget=False, log=log.info,
                                     skip_gpu_free=True, on_quota_shortage=self._on_quota_shortage,
                                     stages=self.opts.stages)[""]
        if checked is not live:  # quota.onShortage inPlace: the budget the quota admits, on the target
            live = self.kube.merge_patch(res, self.ns, self.ref.name,
                                         budget_patch(live, checked, kind == "ds"),
                                         field_manager=L.FIELD_MANAGER)
        eng = engine_for(kind)(self.kube, self.ns, self.ref.name, self.opts, self.clock,
                               wiring=Wiring(follower=self.follower))
        eng.t.checkpoint("begin")
        first: Obj | None = live  # just read: the first decision needs no second GET
        while not self.stop.is_set():
            obj = first if first is not None else self.kube.get(res, self.ns, self.ref.name)
            first = None
            eng.t.fresh = obj  # the engine's step acts on this read too: one GET per step, not two
            st = state.RolloutState.from_object(obj)
            if st.active:
                gate_k = gates.next_gate(self.spec, st, gates.promoted_stage(obj, st.id))
            else:  # a new rollout: nothing promoted yet
                gate_k = gates.next_gate(self.spec, state.RolloutState(), 0)
            until = gate_k - 1 if gate_k is not None else None
            out = eng.step_retrying(until_stage=until)
            if out is not None:
                return finish(out, self.clock, self.kube, eng.events)
            now_st = state.RolloutState.from_object(eng.obj)
            if gate_k is not None and self._blocked(eng, now_st, gate_k):
                self._wait_for_promotion(res, now_st, gate_k)
        return None

    @property
    def _on_quota_shortage(self) -> str:
        return self.spec.quota.onShortage if self.spec.quota is not None else "refuse"

    def _pair_gate(self, k: int) -> None:
        """A pair's manual gate before stage ``k`` (> 0): the marks live on the decode LWS, the role
        each stage moves first; both roles have passed stage ``k - 1`` when this is called."""
        if self.spec.stages[k].pause is None:
            return
        while not self.stop.is_set():
            obj = find_pair(self.kube, self.ns, self.ref.name)["decode"]
            st = state.RolloutState.from_object(obj)
            if not st.active or st.paused or st.abort or st.passed > k or \
                    gates.promoted_stage(obj, st.id) >= k + 1:
                return
            self._wait_for_promotion(LWS, st, k, name=obj["metadata"]["name"])

    @staticmethod
    def _blocked(eng: Rollout, st: state.RolloutState, gate_k: int) -> bool:
        """The engine stopped at the gate (rather than having made a step)."""
        if not st.active or st.passed < gate_k:
            return False
        act = planner.next_action(st, eng.obj, partitioned=eng.strategy.has_partition)
        return act.kind in (planner.SET_PARTITION, planner.GATE, planner.DONE)

    def _wait_for_promotion(self, res: Resource, st: state.RolloutState, gate_k: int, *,
                            name: str = "") -> None:
        """Follow the target until stage ``gate_k`` is promoted, or anything else needs a replan."""
        t0 = time.monotonic()
        name = name or self.ref.name
        log.info("%s/%s: rollout %s waits for promotion of stage %d", self.ns, name, st.id, gate_k + 1)
        try:
            if self.waiter is not None:  # the controller's cache: woken by its events, no request
                while not self.stop.is_set():
                    obj = self.waiter(res, self.ns, name, lambda o: self._gate_moved(o, st, gate_k),
                                      self.stop)
                    if obj is None or self._gate_moved(obj, st, gate_k):
                        return  # deleted (the engine's next read says so) or moved
                return
            while not self.stop.is_set():
                for obj in watch.follow(self.kube, res, self.ns, name, wall_budget=1.0):
                    if self._gate_moved(obj, st, gate_k):
                        return
                    if self.stop.is_set():
                        return
        finally:
            self.on_gate(gate_k, time.monotonic() - t0)

    @staticmethod
    def _gate_moved(obj: Obj, st: state.RolloutState, gate_k: int) -> bool:
        now = state.RolloutState.from_object(obj)
        if gates.promoted_stage(obj, st.id) >= gate_k + 1:
            return True
        # abort, pause, a superseding template or a finished rollout: the engine decides next
        changed = state.template_hash(state.template_of(obj)) != st.target_hash
        return now.id != st.id or now.abort or now.paused or not now.active or changed
