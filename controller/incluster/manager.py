"""The reconcile of ``lwsflow controller run``: one policy at a time, decided from the cluster alone.

Level-triggered: per policy, it reads the target and decides from what is on the cluster (the rollout
annotations): start or resume a driver thread, adopt a first template as stable, mirror the status.
The decision is a pure function (``incluster/decide.py``); this module is its supervisor: it gathers
what the decision needs, applies the answer (writes, driver threads, timers, rechecks) and writes
the status. The informer loop (``incluster/core.py``) feeds it: informer caches and a de-duplicating
work queue, only the policies a change concerns are reconciled, from the cache. Each target's rollout
runs in its own thread (the engine blocks on its waits), so one slow gate never holds another target.

The whole life of a policy (docs/controller.md "Lifecycle"): a deleted policy's driver is stopped and
its writes fenced, the target held where it is (partition and rollout annotations as they are); a
spec edited mid-rollout applies from the next rollout (the status says so with ``SpecApplied``
False); a second policy naming an owned target gets a ``TargetOwned`` condition naming the owner and
nothing is written to the target; a status that would not change is never written again.

Superseding: when Git syncs a newer template mid-rollout, the engine sees a template that is not its
target (planner FOREIGN), marks the rollout Aborted without writing anything else, and the next pass
starts a rollout of the new template from where the groups are: the overlay keeps the partition at
replicas, so groups not yet updated keep serving and the floor holds.

Blue-green (``strategy: blue-green``, a pair): the synced template is not rolled in place but run as a
green pair beside the blue one, traffic moved by HTTPRoute weights, then folded back into the Git-named
pair (``bluegreen/incluster.py``, ``bluegreen/executor.py``); the status is the HTTPRoute's state.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from pydantic import ValidationError

from lwsflow.controller.analysis.incluster import AnalysisFactory, AnalysisRecorder, recorded_hook
from lwsflow.controller.api import labels as L
from lwsflow.controller.api.phases import PolicyPhase
from lwsflow.controller.api.wire import Obj
from lwsflow.controller.bluegreen import incluster as bg
from lwsflow.controller.bluegreen import status as bgstatus
from lwsflow.controller.bluegreen.executor import BlueGreenRollout
from lwsflow.controller.bluegreen.plan import BlueGreenState
from lwsflow.controller.clock import Clock
from lwsflow.controller.errors import InvalidInput, NotFound
from lwsflow.controller.incluster import adoption, announce, cache, decide, lifecycle
from lwsflow.controller.incluster.cache import Caches
from lwsflow.controller.incluster.core import InformerLoop
from lwsflow.controller.incluster.driver import Driver, DriverDeps, Job, SmokeFactory, options, resource_of
from lwsflow.controller.incluster.leader import LeaderElector
from lwsflow.controller.incluster.metrics import Metrics
from lwsflow.controller.incluster.notify import Notifier
from lwsflow.controller.incluster.workers import Workers
from lwsflow.controller.kube.client import Kube
from lwsflow.controller.kube.events import EventRecorder
from lwsflow.controller.kube.resources import LWS, ROLLOUT_POLICY
from lwsflow.controller.pd import incluster as pd_gate
from lwsflow.controller.pd.compat import CompatContext, CompatProbe, CompatResult
from lwsflow.controller.pd.pair import find_pair
from lwsflow.controller.policy import gates, problems
from lwsflow.controller.policy import status as pstatus
from lwsflow.controller.policy.model import RolloutPolicySpec
from lwsflow.controller.rollout import state
from lwsflow.controller.rollout.hooks import Hook, HookContext
from lwsflow.controller.rollout.outcome import Outcome

log = logging.getLogger("lwsflow.controller")

@dataclass
class Controller:
    kube: Kube
    clock: Clock
    namespace: str | None = None  # None: all namespaces
    leader: LeaderElector | None = None
    metrics: Metrics = field(default_factory=Metrics)
    notifier: Notifier | None = None
    smoke: SmokeFactory | None = None
    analysis: AnalysisFactory | None = None  # the policies' analysis hook (wired by the CLI)
    pd_probe: CompatProbe | None = None  # the policies' cross-revision P/D probe (wired by the CLI)
    resync_s: float = 300.0  # a safety net: every policy is looked at again this often
    worker_count: int = 4  # reconcile workers
    stall_s: float = 120.0  # /healthz fails when a reconcile has been stuck this long (wall seconds)
    stop: threading.Event = field(default_factory=threading.Event)
    settling: dict[str, tuple[str, float]] = field(default_factory=dict)  # policy -> (pair hash, since)
    synced: bool = False  # every policy enqueued once (readiness)
    series: dict[str, tuple[str, str, str]] = field(default_factory=dict)  # policy -> its metric labels

    def __post_init__(self) -> None:
        if self.leader is not None:  # every write of this replica is fenced on its leadership
            self.kube = self.kube.view(fence=self.leader.write_fence)
            if self.notifier is not None:  # its webhook posts too: a deposed leader announces nothing
                self.notifier.fence = self.kube.fenced
        self.events = EventRecorder(self.kube, self.clock.now)
        self.workers = Workers(self.kube, self.metrics, self.wake_policy)  # the rollout threads
        self.cache: Caches | None = None
        self.loop: InformerLoop | None = None

    # -- loop --------------------------------------------------------------------------------------
    def run(self) -> None:
        """Reconcile until ``stop`` (blocking)."""
        try:
            self.loop = InformerLoop(self)
            self.loop.run()
        finally:
            self.workers.stop_all()

    def healthy(self) -> bool:
        """/healthz: False when the loop has made no progress for ``stall_s`` (the kubelet restarts
        a hung replica)."""
        return self.loop is None or self.loop.healthy()  # not running yet: nothing is stuck

    def wake_policy(self, key: str) -> None:
        """Reconcile ``key`` soon (a driver ended, a blue-green step the route watch does not see)."""
        if self.loop is not None:
            self.loop.queue.add(key)

    def recheck_after(self, key: str, delay_s: float) -> None:
        """Look at ``key`` again in ``delay_s`` wall seconds (a settle window, a retry window)."""
        if self.loop is not None:
            self.loop.queue.add_after(key, delay_s)

    def is_ready(self) -> bool:
        """Ready when a pass has completed (leader) or it stands by (so a Service never routes to a
        replica that cannot answer): both replicas are Ready; only the leader acts."""
        return self.synced or (self.leader is not None and not self.leader.is_leader())

    # -- one policy --------------------------------------------------------------------------------
    def reconcile_key(self, key: str) -> None:
        """The informer engine's reconcile of one policy key, from the cache (gone: forgotten)."""
        assert self.cache is not None
        ns, name = key.split("/", 1)
        policy = self.cache.policies.get(ns, name)
        if policy is None:
            self.forget(key)
            return
        self.reconcile(policy)

    def reconcile(self, policy: Obj) -> None:
        """Observe one policy (its targets from the cache), ask :mod:`decide`, apply the answer."""
        meta = policy["metadata"]
        ns, name = meta["namespace"], meta["name"]
        key = f"{ns}/{name}"
        old: Obj = policy.get("status") or {}
        gen = int(meta.get("generation", 0))
        spec: RolloutPolicySpec | None = None
        invalid: ValidationError | None = None
        try:
            spec = RolloutPolicySpec.model_validate(policy.get("spec") or {})
        except ValidationError as exc:  # admitted, yet refused: say why as the user counts (stage 2)
            invalid = exc
        owner: Obj | None = None
        objs: list[Obj] = []
        missing: str | None = None
        caught_up = True
        if spec is not None:
            self._track_series(key, spec)
            owner = self._owner(policy)
            if owner is None:
                try:
                    objs = self._targets(ns, spec)
                except (NotFound, InvalidInput) as exc:
                    missing = str(exc)
                else:
                    caught_up = self._caught_up(key, policy, spec, objs)
        verdict = decide.classify(invalid=spec is None, owned_by_other=owner is not None,
                                  target_missing=missing is not None,
                                  blue_green=spec is not None and spec.strategy == "blue-green",
                                  caught_up=caught_up)
        if verdict is decide.Verdict.INVALID:
            assert invalid is not None
            self._write_once(policy, {**pstatus.derived(old), "phase": PolicyPhase.FAILED.value,
                                      "message": problems.describe(invalid, policy.get("spec") or {}),
                                      "observedGeneration": meta.get("generation", 0)})
            return
        assert spec is not None
        if verdict is decide.Verdict.NOT_OWNER:  # another policy owns the target: nothing is written to it
            assert owner is not None
            self._write_once(policy, lifecycle.not_owner(old, spec, owner, gen, state.iso(self.clock.now())))
        elif verdict is decide.Verdict.TARGET_MISSING:
            assert missing is not None
            status = lifecycle.target_missing(old, spec, missing, ns, gen, state.iso(self.clock.now()))
            if decide.announce_missing(old):
                self.events.emit(policy, lifecycle.TARGET_NOT_FOUND, status["message"], warning=True)
            self._write_once(policy, status)
        elif verdict is decide.Verdict.BLUE_GREEN:
            self._reconcile_blue_green(policy, spec, objs, False)
        elif verdict is decide.Verdict.ROLL:
            self._reconcile_rollout(policy, spec, objs)
        # STALE: the cache has not seen the last rollout's last writes: their events re-enqueue us

    def _reconcile_rollout(self, policy: Obj, spec: RolloutPolicySpec, objs: list[Obj]) -> None:
        """A partition rollout's policy (an LWS, a DisaggregatedSet, a pair rolled in place)."""
        meta = policy["metadata"]
        ns, name = meta["namespace"], meta["name"]
        key = f"{ns}/{name}"
        old: Obj = policy.get("status") or {}
        gen, probed = int(meta.get("generation", 0)), pd_gate.enabled(spec)
        if self.workers.idle(key):
            self._apply(key, policy, spec, objs, decide.decide_rollout(decide.Observed(
                objs=objs, generation=gen, retry_asked=(meta.get("annotations") or {}).get(gates.RETRY),
                kind=spec.targetRef.kind, probed=probed,
                held=pd_gate.holds(old, objs, gen, self.clock.now()) if probed else None,
                refused=self.workers.refused.get(key), settling=self.settling.get(key),
                pair_hash=bg.pair_hash(objs) if probed else "", template_key=pd_gate.template_key(objs),
                now=time.monotonic(), fully_rolled=lambda o: adoption.fully_rolled(self.kube, spec, o))))
            if self.cache is not None:  # an adoption just stored its answer in the cache
                objs = self._targets(ns, spec)
        obj = objs[0]
        running = self.workers.alive(key)
        if running is not None:  # the rollout's own spec and generation
            spec, gen = running.spec, running.generation
        new = pstatus.compute(spec, obj, gen, old, state.iso(self.clock.now()), others=objs[1:])
        if probed:  # a refused (held) template or a probe in flight shows on the status
            new = pd_gate.overlay(new, old, objs, gen, self.clock.now())
        self.metrics.stage.labels(namespace=ns, policy=name, target=spec.targetRef.name).set(
            new["currentStage"])
        new = lifecycle.spec_applied(new, old, int(meta.get("generation", 0)), gen,
                                     state.iso(self.clock.now()))
        why = self._refusal(key, objs, gen)
        if why is not None and not state.any_active(objs):
            new = lifecycle.refused(new, old, why, state.iso(self.clock.now()))
        new = lifecycle.target_found(new, old, spec, state.iso(self.clock.now()))
        if not pstatus.same(old, new):
            if not pd_gate.overlaid(new):  # the probe announced its own verdict (pd_gate.recorder)
                self._transitions(policy, spec, old, new)
            self._write_status(policy, new)

    def _reconcile_blue_green(self, policy: Obj, spec: RolloutPolicySpec, objs: list[Obj],
                              live: bool) -> None:
        meta = policy["metadata"]
        ns, name, key = meta["namespace"], meta["name"], f"{meta['namespace']}/{meta['name']}"
        old: Obj = policy.get("status") or {}
        route, st = bg.route_state(self.kube, ns, spec.targetRef.name)
        refusals = self.workers.refusals
        if self.workers.idle(key):
            adopted = False
            for obj in objs:
                if not st.active and adoption.adopt_first_sight(self.kube, self.cache, spec, obj):
                    adopted = True
            if adopted:
                objs = self._targets(ns, spec, live=True)
            retry = bg.decide(policy, objs, st)
            if retry is None:
                refusals.pop(key, None)  # nothing to roll (any more)
            elif st.active or self._settled(key, bg.pair_hash(objs)):
                if self.cache is not None and not live:  # a second pair is made: act on the API's copies
                    objs = self._targets(ns, spec, live=True)
                    retry = bg.decide(policy, objs, st)
                    if retry is None:
                        return
                self._start_blue_green(key, policy, spec, objs, st, retry)
        new = bgstatus.compute(spec, st, route, objs, int(meta.get("generation", 0)), old,
                               state.iso(self.clock.now()))
        new = lifecycle.target_found(new, old, spec, state.iso(self.clock.now()))
        if st.active:
            refusals.pop(key, None)
        elif key in refusals:
            new["message"] = f"blue-green refused: {refusals[key]}"[:500]
        self.metrics.stage.labels(namespace=ns, policy=name, target=spec.targetRef.name).set(
            new["currentStage"])
        if not pstatus.same(old, new):
            self._transitions(policy, spec, old, new)
            self._write_status(policy, new)

    def _refusal(self, key: str, objs: list[Obj], generation: int) -> str | None:
        """Why this policy's rollout of these templates was refused up front, while that holds (the
        same templates and generation, within REFUSAL_RETRY_S); None: nothing holds it."""
        check = decide.refusal(self.workers.refused.get(key), pd_gate.template_key(objs), generation,
                               time.monotonic())
        if check.expired:
            del self.workers.refused[key]
        if check.recheck_s is not None:
            self.recheck_after(key, check.recheck_s)
        return check.why

    def _caught_up(self, key: str, policy: Obj, spec: RolloutPolicySpec, objs: list[Obj]) -> bool:
        """Whether the cached policy and targets are at least as new as the last writes of this policy's
        ended rollout (read-your-writes: a decision on an older copy could start a finished rollout
        again or probe a pair twice)."""
        worker = self.workers.get(key)
        if self.cache is None or worker is None or worker.thread.is_alive() or not worker.kube.written:
            return True
        res = LWS if spec.targetRef.kind == "LeaderWorkerSetPair" else resource_of(spec.targetRef.kind)
        seen = [(ROLLOUT_POLICY, policy), *((res, o) for o in objs)]
        for r, o in seen:
            meta = o["metadata"]
            wrote = worker.kube.written.get(r.path(meta.get("namespace"), meta["name"]), "")
            have = str(meta.get("resourceVersion") or "")
            if wrote.isdigit() and have.isdigit() and int(have) < int(wrote):
                return False
        return True

    def _settled(self, key: str, pair_hash: str) -> bool:
        """Whether the pair's templates have been ``pair_hash`` for SETTLE_S (the next pass looks again)."""
        check = decide.settle(self.settling.get(key), pair_hash, time.monotonic())
        self.settling[key] = check.record
        if check.recheck_s is not None:
            self.recheck_after(key, check.recheck_s)
        return check.settled

    def _start_blue_green(self, key: str, policy: Obj, spec: RolloutPolicySpec, objs: list[Obj],
                          st: BlueGreenState, retry: bool) -> None:
        ns, pair = policy["metadata"]["namespace"], spec.targetRef.name

        def make(kube: Kube, _stop: threading.Event) -> Callable[[], Outcome | None]:
            analysis = self._analysis_hook(policy, spec, rollout_id=bg.rollout_id(kube, ns, pair),
                                           kube=kube)
            opts = options(spec, retry=retry, smoke=self.smoke, on_check=self._count_check, analysis=analysis)
            return BlueGreenRollout(kube, ns, pair, opts, self.clock,  # the route is not watched: on_step
                                    weights=[s.weight or 0 for s in spec.stages],
                                    manifests=bg.green_manifests(objs, st), fold_back=True,
                                    log=lambda m: log.info("%s: %s", key, m.strip()),
                                    on_step=lambda _step: self.wake_policy(key),
                                    cache=bg.cache_reads(self.cache)).run
        self.workers.spawn(key, int(policy["metadata"].get("generation", 0)), spec, make)

    def _targets(self, ns: str, spec: RolloutPolicySpec, *, live: bool = False) -> list[Obj]:
        """The target's objects (a pair: decode first, it carries the promotion marks): from the cache,
        or with ``live`` from the API."""
        ref = spec.targetRef
        if self.cache is not None and not live:
            return self.cache.targets(ref.kind, ns, ref.name)
        if ref.kind == "LeaderWorkerSetPair":
            pair = find_pair(self.kube, ns, ref.name)
            return [pair["decode"], pair["prefill"]]  # decode first: it carries the promotion marks
        return [self.kube.get(resource_of(ref.kind), ns, ref.name)]

    def _apply(self, key: str, policy: Obj, spec: RolloutPolicySpec, objs: list[Obj],
               d: decide.Decision) -> None:
        """Carry out an idle policy's decision: its writes in order, its timers, its rechecks, its driver."""
        for effect in d.effects:
            if effect.kind is decide.EffectKind.ADOPT:
                adoption.adopt(self.kube, self.cache, spec, objs[effect.index])
            elif effect.template is not None:
                msg = adoption.reapply_failed(self.kube, self.cache, objs[effect.index], effect.template)
                log.info("%s: %s", key, msg)
                self.events.emit(policy, "RetryReapplied", msg)
                self.wake_policy(key)
        if d.refusal_expired:
            self.workers.refused.pop(key, None)
        if d.settling is not None:
            self.settling[key] = d.settling
        for delay in d.rechecks:
            self.recheck_after(key, delay)
        if d.start is not None:
            self._start_worker(key, policy, spec, objs, d.start)

    def _start_worker(self, key: str, policy: Obj, spec: RolloutPolicySpec, objs: list[Obj],
                      retry: bool) -> None:
        ns = policy["metadata"]["namespace"]

        def on_gate(stage: int, waited: float) -> None:
            self.metrics.gate_wait.labels(gate="manual").observe(waited)

        def notify(text: str) -> None:
            if self.notifier is not None:
                self.notifier.send(ns, spec.notifications.webhooks if spec.notifications else [],
                                   f"[lwsflow {policy['metadata']['name']}] {text}")

        hold = (pd_gate.template_key(objs), int(policy["metadata"].get("generation", 0)))

        def make(kube: Kube, stop: threading.Event) -> Callable[[], Outcome | None]:
            deps = DriverDeps(kube, self.clock, smoke=self.smoke, stop=stop, on_gate=on_gate,
                              on_check=self._count_check,
                              analysis=self._analysis_hook(policy, spec, kube=kube),
                              pd_probe=self._fenced_probe(),
                              on_probe=pd_gate.recorder(kube, self.events, policy, notify),
                              waiter=self.loop.wait_target if self.loop is not None else None,
                              follower=self.loop.follow if self.loop is not None else None)
            job = Job(ns, spec, retry=retry, generation=int(policy["metadata"].get("generation", 0)),
                      probed=(policy.get("status") or {}).get("pdProbe"),
                      seen=objs[0] if self.cache is not None and len(objs) == 1 else None)
            return Driver(deps, job).run
        self.workers.spawn(key, int(policy["metadata"].get("generation", 0)), spec, make, hold=hold)

    def _analysis_hook(self, policy: Obj, spec: RolloutPolicySpec,
                       rollout_id: Callable[[HookContext], str] | None = None, *,
                       kube: Kube | None = None) -> Hook | None:
        """The policy's analysis as a stage hook recording into its status (None: no analysis)."""
        if spec.analysis is None or self.analysis is None:
            return None
        rec = AnalysisRecorder(kube or self.kube, self.events, policy, spec.analysis, self.clock.now,
                               rollout_id=rollout_id)
        return recorded_hook(self.analysis, rec)

    def _fenced_probe(self) -> CompatProbe | None:
        """The P/D probe on this controller's connection, fenced on its leadership: its canaries'
        creates and deletes are refused once this replica cannot prove it leads, whatever
        connection the probe was built with."""
        probe = self.pd_probe
        if probe is None:
            return None

        def fenced(ctx: CompatContext) -> CompatResult:
            return probe(replace(ctx, kube=self.kube))
        fenced.__name__ = getattr(probe, "__name__", "pd-probe")
        return fenced

    def _count_check(self, detail: str, ok: bool) -> None:
        self.metrics.checks.labels(result="passed" if ok else "failed").inc()

    # -- the life of a policy ----------------------------------------------------------------------
    def forget(self, key: str) -> None:
        """A deleted policy: stop its rollout (its writes fenced from now on; the target is held where
        it is) and drop its metric series and memory."""
        if self.workers.stop(key):
            log.info("%s: policy deleted; its rollout is stopped and the target held where it is", key)
        labels = self.series.pop(key, None)
        if labels is not None:
            self.metrics.forget(*labels)
        self.settling.pop(key, None)

    def _track_series(self, key: str, spec: RolloutPolicySpec) -> None:
        ns, name = key.split("/", 1)
        labels = (ns, name, spec.targetRef.name)
        before = self.series.get(key)
        if before is not None and before != labels:  # retargeted: the old series goes
            self.metrics.forget(*before)
        self.series[key] = labels

    def _owner(self, policy: Obj) -> Obj | None:
        """The policy owning this one's target when it is another (the oldest naming it), else None."""
        assert self.cache is not None  # the informer loop's: reconciles run on it
        rivals = self.cache.rivals(policy)
        older = [p for p in rivals if cache.owner_order(p) < cache.owner_order(policy)]
        return min(older, key=cache.owner_order) if older else None

    # -- status, events, notifications -------------------------------------------------------------
    def _write_once(self, policy: Obj, status: Obj) -> None:
        """Write a status unless it is what the policy already shows (an orphaned or invalid policy
        is written once, not on every pass)."""
        if not pstatus.same(policy.get("status") or {}, status):
            self._write_status(policy, status)

    def _write_status(self, policy: Obj, status: Obj) -> None:
        meta = policy["metadata"]
        out = self.kube.merge_patch(ROLLOUT_POLICY, meta["namespace"], meta["name"], {"status": status},
                                    field_manager=L.FIELD_MANAGER, subresource="status")
        policy["status"] = status
        if self.cache is not None:  # the next reconcile must not act on the status this replaced
            self.cache.policies.store(out)

    def _transitions(self, policy: Obj, spec: RolloutPolicySpec, old: Obj, new: Obj) -> None:
        """Events and notifications for what changed (derived from the persisted status, so a new
        leader does not repeat what the old one already announced)."""
        name = policy["metadata"]["name"]
        hooks = spec.notifications.webhooks if spec.notifications else []
        for note in announce.notes(f"{spec.targetRef.kind}/{spec.targetRef.name}", old, new):
            self.events.emit(policy, note.reason, note.message, warning=note.warning)
            if self.notifier is not None and note.notify:
                self.notifier.send(policy["metadata"]["namespace"], hooks, f"[lwsflow {name}] {note.message}")
