"""Blue-green of a P/D pair, a DisaggregatedSet or an LWS, the executor: the I/O around
:mod:`plan`.

``lwsflow rollout pair/NAME|ds/NAME|lws/NAME --strategy blue-green --manifest FILE [--weights ...]``;
what differs between the kinds (find blue, green objects, readiness, delete) is in
:mod:`kinds`:

1. find blue (the pair, the DS or the LWS), the InferencePool selecting its pods and the HTTPRoute sending
   traffic to it; check that green fits beside blue (GPUs per node pool, or refuse naming what is
   missing); narrow the blue pool to the blue pods;
2. one route write: the state (phase ``Starting``) and the green pool's backendRef at weight 0;
3. create green (a second pair, DS or LWS) and its pool (a rerun finds them and goes on) and wait for
   its readiness equality (every group of every role updated and ready) within ``--deadline``;
4. per weight stage: write the weights (blue ``100 - w``, green ``w``) together with the previous
   stage's pass, bake ``--bake`` of cluster time with green staying ready, run the checks (analysis of
   green against blue, smoke, hooks);
5. the last pass drops the blue backendRef (phase ``Finishing``); then blue and its pool are deleted.
   With ``fold_back`` (the in-cluster controller, a pair: Git owns the blue pair's names), the end instead
   rolls the blue pair in place to the new template (it carries no traffic), moves the route back to the
   blue pool in one write, deletes green, and restores the blue pool's selector, the route and the blue
   partition to what Git has (:meth:`BlueGreenRollout._fold_back`).

A failed stage (deadline, check) shifts every request back to blue and removes green's backendRef in
one write (``RollingBack``), then deletes green and its pool. Every write re-reads the route and
carries its resourceVersion; a restarted controller asks the planner again and goes on from the
persisted state (a stage's checks run again; a stage's weights are never written twice).

Waits (green's readiness, the bake, a pause, the fold-back's roll) re-read what they judge every
``poll_s``; given ``cache`` (the in-cluster controller's informers), those reads come from it and send
no request, as the partition engine's gates follow the cache (``rollout/target.Follower``). A cached
copy older than what this rollout last wrote or read of the object is not used (read-your-writes):
the API is asked instead. Reads that decide a write still go to the API.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from typing import Protocol

from lwsflow.controller.api import labels as L
from lwsflow.controller.api.wire import Obj
from lwsflow.controller.bluegreen import plan as P
from lwsflow.controller.bluegreen.kinds import BlueGreenKind, PairBlueGreen, delete_if_present, exists
from lwsflow.controller.clock import Clock
from lwsflow.controller.errors import AlreadyExists, Conflict, InvalidInput, NotFound, OperationFailed
from lwsflow.controller.kube.client import Kube
from lwsflow.controller.kube.events import EventRecorder
from lwsflow.controller.kube.resources import HTTP_ROUTE, INFERENCE_POOL, LWS, NODE, POD, Resource
from lwsflow.controller.rollout import capacity, drain, gate, state
from lwsflow.controller.rollout.engine import finish
from lwsflow.controller.rollout.hooks import HookContext, run_hook
from lwsflow.controller.rollout.options import RolloutOptions
from lwsflow.controller.rollout.outcome import FAILED, ROLLED_BACK, SUCCEEDED, Outcome, StageFailed
from lwsflow.controller.rollout.patches import merge_diff
from lwsflow.controller.rollout.report import RolloutReport

# cluster seconds between taking a pool's last traffic away and deleting its pods: requests the gateway
# sent just before the route write finish first (a Pod's grace period does this on a real cluster too)
DRAIN_S = 30.0
ABORT = P.PREFIX + "abort"  # the id of the blue-green `kubectl lwsflow abort` asked to abort
ABORTED = "aborted (kubectl lwsflow abort)"
PAUSE = P.PREFIX + "pause"  # the id of the blue-green `kubectl lwsflow pause` holds at its weights


class Cached(Protocol):
    """The in-cluster controller's cache, as a blue-green's waits read it (``bluegreen/incluster.py``)."""

    def cached(self, res: Resource, namespace: str, name: str) -> Obj | None:
        """The cached copy (None: not cached, not served or not synced yet; the API is asked)."""
        ...


def _rv(obj: Obj) -> int:
    """A resourceVersion as a number (-1 when opaque: a cached copy then never counts as new enough)."""
    raw = str((obj.get("metadata") or {}).get("resourceVersion") or "")
    return int(raw) if raw.isdigit() else -1


def find_pool_and_route(kube: Kube, namespace: str, leaders: list[dict[str, str]], blue: str
                        ) -> tuple[Obj, Obj]:
    """The one InferencePool selecting the blue leaders of every role (``leaders``: their labels, one
    map per role) and the one HTTPRoute using it; ``blue`` names them in a refusal."""
    pools = [p for p in kube.list(INFERENCE_POOL, namespace)[0] if all(P.selects(p, lb) for lb in leaders)]
    if len(pools) != 1:
        raise InvalidInput(f"blue-green needs exactly one InferencePool in {namespace} selecting the leader "
                           f"pods of {blue}; found "
                           f"{sorted(p['metadata']['name'] for p in pools) or 'none'}", field="target")
    name = pools[0]["metadata"]["name"]
    routes = [r for r in kube.list(HTTP_ROUTE, namespace)[0] if P.references(r, name)]
    if len(routes) != 1:
        raise InvalidInput(f"blue-green needs exactly one HTTPRoute in {namespace} with a backendRef to "
                           f"InferencePool {name}; found "
                           f"{sorted(r['metadata']['name'] for r in routes) or 'none'}",
                           field="target")
    return pools[0], routes[0]


def request(kube: Kube, namespace: str, pair: str, *, abort: bool = False,
            paused: bool | None = None) -> P.BlueGreenState:
    """Ask the in-cluster controller to abort (weights back to blue, green deleted, blue's template
    restored), pause (hold the weights before the next shift) or resume the blue-green of ``pair``:
    the running id in an annotation on its HTTPRoute (null: resumed)."""
    route = route_of(kube, namespace, pair)
    st = P.BlueGreenState.from_route(route) if route is not None else P.BlueGreenState()
    if route is None or not st.active:
        raise InvalidInput(f"pair {namespace}/{pair}: no blue-green in progress (last: {st.phase or 'none'})",
                           field="policy")
    ann: dict[str, str | None] = {ABORT: st.id} if abort else {}
    if paused is not None:
        ann[PAUSE] = st.id if paused else None
    kube.merge_patch(HTTP_ROUTE, namespace, route["metadata"]["name"],
                     {"metadata": {"annotations": ann}}, field_manager=L.FIELD_MANAGER)
    return st


def route_of(kube: Kube, namespace: str, pair: str, kind: str = "pair") -> Obj | None:
    """The HTTPRoute whose blue-green state names ``pair`` as blue (``kind``: ``pair``, ``ds`` or ``lws``;
    the last one, done or not)."""
    for r in kube.list(HTTP_ROUTE, namespace)[0]:
        st = P.BlueGreenState.from_route(r)
        if st.blue is not None and st.blue.pair == pair and st.blue.kind == kind:
            return r
    return None


class BlueGreenRollout:
    """Drives one blue-green from its persisted state (see the module docstring).

    ``pair`` is blue's name (the pair label, or the DS's or LWS's name); ``kind`` the kind-specific part
    (default: a pair)."""

    def __init__(self, kube: Kube, namespace: str, pair: str, opts: RolloutOptions, clock: Clock, *,
                 weights: list[int], manifests: dict[str, Obj] | None = None,
                 on_step: Callable[[str], None] | None = None,
                 log: Callable[[str], None] = lambda _m: None, kind: BlueGreenKind | None = None,
                 fold_back: bool = False, cache: Cached | None = None) -> None:
        # a 429's Retry-After is honoured in full while it fits the current stage's deadline
        kube = kube.with_deadline(self._stage_time_left)
        self.kube, self.ns, self.pair, self.opts, self.clock = kube, namespace, pair, opts, clock
        # a new rollout folds green back into the blue pair at the end (a resumed one: as persisted)
        self.fold_back = fold_back
        self.weights, self.manifests = weights, manifests or {}
        self.on_step, self.log = on_step, log
        self.k: BlueGreenKind = kind or PairBlueGreen(kube, namespace)
        self.cache = cache
        # (plural, name) -> the resourceVersion this rollout last wrote or read: no older cached copy
        self._seen: dict[tuple[str, str], int] = {}
        if cache is not None:
            self.k.read = self._read
        self.events = EventRecorder(kube, clock.now)
        self.report = RolloutReport(self.k.kind, namespace, pair, stages_spec=",".join(map(str, weights)),
                                    targets=list(weights))
        self.report.started = clock.now()
        self.route: Obj = {}
        # poll every 0.1 s of wall time at least, and no more often than every 2 cluster seconds
        self.poll_s = max(2.0, 0.1 / max(clock.wall(1.0), 1e-9))

    def _stage_time_left(self) -> float:
        """Wall seconds a server-directed wait may take: until the current weight stage's deadline
        (bake included); outside a stage (starting, rolling back) the client's own window."""
        st = P.BlueGreenState.from_route(self.route) if self.route else P.BlueGreenState()
        if not st.active or st.phase == P.ROLLING_BACK or st.stage_started <= 0:
            return self.kube.retry_window_s
        return self.clock.wall(st.stage_started + st.bake_s + st.deadline_s - self.clock.now())

    # -- entry ---------------------------------------------------------------------------------------
    def run(self) -> Outcome:
        route = route_of(self.kube, self.ns, self.pair, self.k.target)
        st = P.BlueGreenState.from_route(route) if route is not None else P.BlueGreenState()
        mhash = state.template_hash({r: state.template_of(m) for r, m in self.manifests.items()}) \
            if self.manifests else ""
        if route is not None and (st.active or st.manifest_hash == mhash or not mhash):
            if mhash and st.manifest_hash != mhash:
                raise InvalidInput(f"blue-green {st.id} of another manifest is in progress on "
                                   f"{self.k.target} {self.pair} "
                                   f"({st.phase}); let it finish or roll back first", field="manifest")
            if not st.active and self.opts.retry and st.phase != P.SUCCEEDED and mhash:
                return self._start(mhash)
            self.route = route
            self.report.rollout_id = st.id
            return self._drive(st)
        if not self.manifests:
            raise InvalidInput("a blue-green rollout needs --manifest (the new revision of every role)",
                               field="manifest")
        return self._start(mhash)

    def _start(self, mhash: str) -> Outcome:
        blue = self.k.find_blue(self.pair)
        for role, obj in blue.items():
            st_lws = state.RolloutState.from_object(obj)
            if st_lws.active:
                raise InvalidInput(f"{obj['metadata']['name']}{f' ({role})' if role else ''} has partition "
                                   f"rollout {st_lws.id} in progress ({st_lws.phase}); resume or abort it "
                                   "first", field="strategy")
        pool, route = find_pool_and_route(self.kube, self.ns, self.k.leader_labels(blue),
                                          ", ".join(o["metadata"]["name"] for o in blue.values()))
        rev = self.k.revision(self.manifests)
        if self.k.blue_revision(blue) == rev:
            raise InvalidInput(f"{self.k.target} {self.pair} already runs revision {rev}", field="manifest")
        green = self.k.green_side(self.pair, blue, rev, self.manifests)
        match = self.k.narrowed_selector(pool, self.pair, blue)  # refuses before anything is written
        objs = self.k.green_objects(self.manifests, green, rev)
        nodes, _ = self.kube.list(NODE)
        pods, _ = self.kube.list(POD, field_selector="status.phase!=Succeeded,status.phase!=Failed")
        cap = capacity.check_beside(self.k.capacity_objs(
            [o for res, o in objs if not self._exists(res, o["metadata"]["name"])]), nodes, pods)
        if not cap.fits:
            raise InvalidInput(cap.message, field="strategy")
        self.log(f"capacity blue-green: {cap.message}")
        if match != ((pool.get("spec") or {}).get("selector") or {}).get("matchLabels"):
            self.kube.merge_patch(INFERENCE_POOL, self.ns, pool["metadata"]["name"],
                                  {"spec": {"selector": {"matchLabels": match}}},
                                  field_manager=L.FIELD_MANAGER)
        blue_side = self.k.blue_side(self.pair, pool["metadata"]["name"], blue)
        st = P.BlueGreenState(uuid.uuid4().hex[:12], P.STARTING, blue_side, green, list(self.weights),
                              manifest_hash=mhash, stage_started=self.clock.now(), bake_s=self.opts.bake_s,
                              deadline_s=self.opts.deadline_s,
                              fold_back=_origin(route, pool, self.manifests) if self.fold_back else "")
        self.route = route
        self._write(st, P.rules_with(route, blue_side.pool, green.pool, 0))
        self.report.rollout_id = st.id
        self._event("BlueGreenStarted", f"blue-green {st.id}: green {self.k.target} {green.pair} (pool "
                    f"{green.pool}) beside blue {self.pair} (pool {blue_side.pool}); weights {st.weights}")
        self._step("started")
        return self._drive(st)

    # -- the loop ------------------------------------------------------------------------------------
    def _drive(self, st: P.BlueGreenState) -> Outcome:
        while True:
            act = P.next_action(st)
            if act.kind in ("await-green", "check", "shift") and (why := self._interrupted(st)):
                act = P.Action("rollback")
                st.reason = why
            try:
                if act.kind == "report":
                    return self._end(st)
                if act.kind == "rollback":
                    return self._rollback(st, st.reason)
                if act.kind == "finish":
                    return self._finish(st)
                if act.kind == "await-green":
                    self._await_green(st)
                    self._shift(st, 0)
                elif act.kind == "shift":
                    self._shift(st, act.stage)
                else:
                    self._check(st, act.stage)
            except StageFailed as exc:
                return self._rollback(st, str(exc))
            except Conflict:  # someone wrote the route: re-read and re-plan
                self.route = self._get(HTTP_ROUTE, self.route["metadata"]["name"])
                st = P.BlueGreenState.from_route(self.route)

    def _await_green(self, st: P.BlueGreenState) -> None:
        assert st.green is not None and st.blue is not None
        self._ensure_green(st)
        until = st.stage_started + st.deadline_s
        while True:
            checks = self.k.ready(st.green)
            if all(c.passed for c in checks.values()):
                self._step("green-ready")
                self.log(f"  green {st.green.pair} ready: " + "; ".join(
                    f"{r} {c.detail}" for r, c in checks.items()))
                return
            if self.clock.now() >= until:
                raise StageFailed(f"green {st.green.pair} not ready within the deadline "
                                  f"({st.deadline_s:g}s): "
                                  + "; ".join(f"{r} failing {','.join(c.failing())} ({c.detail})"
                                              for r, c in checks.items() if not c.passed))
            self.clock.sleep(self.poll_s)

    def _ensure_green(self, st: P.BlueGreenState) -> None:
        """Create green (a pair, DS or LWS) and its pool; ones a crashed run created are adopted."""
        assert st.green is not None and st.blue is not None
        rev = st.green.pair.rsplit("-", 1)[-1]
        if not self.manifests:
            if self.k.exists(st.green) and self._exists(INFERENCE_POOL, st.green.pool):
                return
            raise InvalidInput(f"blue-green {st.id} was interrupted before its green objects existed; run it "
                               "again with the same --manifest", field="manifest")
        pool = self._get(INFERENCE_POOL, st.blue.pool)
        for res, obj in [*self.k.green_objects(self.manifests, st.green, rev),
                         (INFERENCE_POOL, self.k.green_pool(pool, st.green, rev))]:
            try:
                self.kube.create(res, self.ns, obj)
            except AlreadyExists:
                live = self._get(res, obj["metadata"]["name"])
                if (live["metadata"].get("labels") or {}).get(L.REVISION) != rev:
                    raise InvalidInput(f"{obj['kind']} {obj['metadata']['name']} exists and is not revision "
                                       f"{rev}'s; delete it or pick another manifest",
                                       field="manifest") from None

    def _shift(self, st: P.BlueGreenState, k: int) -> None:
        """Write stage ``k``'s weights (and, in the same write, that stage ``k - 1`` passed)."""
        assert st.green is not None and st.blue is not None
        route = self._get(HTTP_ROUTE, self.route["metadata"]["name"])
        self.route = route
        w = st.weights[k]
        nxt = P.BlueGreenState(**{**st.__dict__, "phase": P.SHIFTING, "stage": k, "passed": k,
                                  "stage_started": self.clock.now()})
        self._write(nxt, P.rules_with(route, st.blue.pool, st.green.pool, w))
        st.__dict__.update(nxt.__dict__)
        rec = self.report.stage(k + 1, w, 0)
        rec.started = self.clock.now()
        self._event("WeightsShifted", f"stage {k + 1}/{len(st.weights)}: blue {st.blue.pool} {100 - w}, "
                    f"green {st.green.pool} {w}")
        self.log(f"  stage-{k + 1}: weights {st.blue.pool}={100 - w} {st.green.pool}={w}")
        self._step(f"stage-{k + 1}-shifted")

    def _check(self, st: P.BlueGreenState, k: int) -> None:
        """Bake (green stays ready), then the checks; the pass is written with the next stage."""
        assert st.green is not None and st.blue is not None
        rec = self.report.stage(k + 1, st.weights[k], 0)
        rec.resumed = rec.started is None
        if rec.started is None:
            rec.started = self.clock.now()
        bake = self.opts.stage_bakes[k] if self.opts.stage_bakes else st.bake_s  # a policy's own per stage
        deadline = st.stage_started + bake + st.deadline_s
        while True:
            if why := self._interrupted(st):  # an abort does not wait for the bake to end
                raise StageFailed(why)
            now = self.clock.now()
            checks = self.k.ready(st.green)
            ready = all(c.passed for c in checks.values())
            rec.gate = {f"{r}:{n}": v for r, c in checks.items() for n, v in c.checks.items()}
            if ready and now >= st.stage_started + bake:
                break
            if now >= deadline:
                raise StageFailed(f"stage {k + 1}: green not ready at the deadline: " + "; ".join(
                    f"{r} failing {','.join(c.failing())}" for r, c in checks.items() if not c.passed))
            self.clock.sleep(min(self.poll_s, max(0.0, st.stage_started + bake - now)) or self.poll_s)
        rec.gate_passed = self.clock.now()
        obj, compare = self.k.hook_context(st)
        ctx = HookContext(self.k.kind, self.ns, st.green.pair, k + 1, len(st.weights), st.weights[k], obj,
                          compare=compare)
        stage_hooks = self.opts.stage_hooks[k] if self.opts.stage_hooks else []
        for hook in [*self.opts.hooks, *stage_hooks]:
            res = run_hook(hook, ctx)
            rec.hooks.append(res.detail)
            rec.analysis.extend(res.records)
            if not res.ok:
                rec.result, rec.ended = "failed", self.clock.now()
                raise StageFailed(f"stage {k + 1} (green {st.weights[k]}%): readiness gate passed (green "
                                  f"ready, baked {bake:g}s), then {res.detail}")
        rec.result, rec.ended = "passed", self.clock.now()
        self._step(f"stage-{k + 1}-passed")
        self._hold(st)
        if k + 1 < len(st.weights):
            self._shift(st, k + 1)
        else:
            route = self._get(HTTP_ROUTE, self.route["metadata"]["name"])
            self.route = route
            nxt = P.BlueGreenState(**{**st.__dict__, "phase": P.FINISHING, "passed": k + 1})
            self._write(nxt, P.rules_with(route, st.blue.pool, st.green.pool, 100, drop_blue=True))
            st.__dict__.update(nxt.__dict__)

    # -- ends ----------------------------------------------------------------------------------------
    def _finish(self, st: P.BlueGreenState) -> Outcome:
        assert st.green is not None and st.blue is not None
        if st.fold_back:
            return self._fold_back(st)
        self._drain(st.blue.pool)
        self.k.delete(st.blue)
        self._delete(INFERENCE_POOL, st.blue.pool)
        self._step("blue-deleted")
        return self._succeed(st, f"every request on green {st.green.pair}; blue {st.blue.pair} and pool "
                             f"{st.blue.pool} deleted")

    def _rollback(self, st: P.BlueGreenState, reason: str) -> Outcome:
        assert st.green is not None and st.blue is not None
        if st.phase != P.ROLLING_BACK:
            route = self._get(HTTP_ROUTE, self.route["metadata"]["name"])
            self.route = route
            nxt = P.BlueGreenState(**{**st.__dict__, "phase": P.ROLLING_BACK, "reason": reason})
            self._write(nxt, P.rules_with(route, st.blue.pool, st.green.pool, None))
            st.__dict__.update(nxt.__dict__)
            self.report.rollbacks.append({"reason": reason, "started": self.clock.now()})
            self._event("BlueGreenRollback", f"blue-green {st.id}: {reason}; every request back on blue "
                        f"{st.blue.pool}", warning=True)
            self._step("rollback-applied")
        if self.opts.no_rollback:
            self._write_phase(st, P.FAILED, f"{reason} (green kept for inspection: --no-rollback)")
            return self._end(st)
        self._drain(st.green.pool)
        self.k.delete(st.green)
        self._delete(INFERENCE_POOL, st.green.pool)
        self._step("green-deleted")
        rules = None
        if st.fold_back:  # GitOps: the blue pair, its pool and the route as Git has them
            self._restore_blue(st)
            rules = json.loads(st.fold_back)["rules"]
        self._write_phase(st, P.ROLLED_BACK, reason, rules)
        return self._end(st)

    def _succeed(self, st: P.BlueGreenState, how: str) -> Outcome:
        """Every request on the revision that stays (``how``: which, and what was deleted)."""
        self._write_phase(st, P.SUCCEEDED, "")
        self._event("BlueGreenSucceeded", f"blue-green {st.id}: {how}")
        return self._end(st)

    def _end(self, st: P.BlueGreenState) -> Outcome:
        assert st.green is not None
        result = {P.SUCCEEDED: SUCCEEDED, P.ROLLED_BACK: ROLLED_BACK}.get(st.phase, FAILED)
        on = st.blue.pair if st.fold_back and st.blue is not None else st.green.pair
        msg = {SUCCEEDED: f"blue-green {st.id} succeeded: traffic on {self.k.target}/{on}",
               ROLLED_BACK: f"blue-green {st.id} rolled back: {st.reason}"}.get(
                   result, f"blue-green {st.id} failed: {st.reason}")
        return finish(Outcome(result, msg, self.report), self.clock, self.kube, self.events)

    # -- GitOps ends (in-cluster controller) ----------------------------------------------------------
    def _fold_back(self, st: P.BlueGreenState) -> Outcome:
        """Every request is on green: roll the idle blue pair in place to the new template (all groups
        at once), move the route back to the blue pool in one write, drain and delete green, then put
        the blue pool's selector, the route and the blue partitions back to what Git has. Each step is
        idempotent, so a restarted controller runs the whole fold-back again from ``Finishing``."""
        assert st.green is not None and st.blue is not None
        origin = json.loads(st.fold_back)
        if self._superseded(st, live=True):
            return self._fold_failed(st, "the blue pair's template is no longer the one green runs (Git "
                                     "changed it during the rollout)")
        for r in P.ROLES:
            if gate.partition(self._get(LWS, st.blue.lws[r])) != 0:
                self._partition(st.blue.lws[r], 0)
        self._step("blue-rolling")
        until = self.clock.now() + st.deadline_s
        while True:
            checks = {r: gate.lws_fully_rolled(self._read(LWS, st.blue.lws[r])) for r in P.ROLES}
            if all(c.passed for c in checks.values()):
                break
            if self.clock.now() >= until:
                return self._fold_failed(st, f"blue {st.blue.pair} not ready on the new template within the "
                                         f"deadline ({st.deadline_s:g}s): " + "; ".join(
                                             f"{r} failing {','.join(c.failing())}"
                                             for r, c in checks.items() if not c.passed))
            self.clock.sleep(self.poll_s)
        self._step("blue-ready")
        for _ in range(8):  # the route back to blue in one write: Git's rules, with the state
            route = self._get(HTTP_ROUTE, self.route["metadata"]["name"])
            self.route = route
            try:
                self._write(st, origin["rules"])
                break
            except Conflict:
                time.sleep(0.05)
        else:
            raise OperationFailed(f"HTTPRoute {self.route['metadata']['name']} kept changing under the "
                                  "rollout")
        self._event("WeightsShifted", f"every request back on blue {st.blue.pool} (folded back, on the new "
                    "template)")
        self._step("route-restored")
        self._drain(st.green.pool)
        for role in reversed(P.ROLES):
            self._delete(LWS, st.green.lws[role])
        self._delete(INFERENCE_POOL, st.green.pool)
        self._step("green-deleted")
        self._restore_selector(st)
        for r in P.ROLES:  # frozen again for the next sync; the new template is now the stable one
            obj = self._get(LWS, st.blue.lws[r])
            good = state.RolloutState(last_good=state.pack(state.template_of(obj)))
            self._partition(st.blue.lws[r], gate.replicas(obj), good.annotations(("last_good",)))
        self._step("blue-frozen")
        return self._succeed(st, f"blue {st.blue.pair} runs the new template and serves every request; green "
                             f"{st.green.pair} and pool {st.green.pool} deleted")

    def _fold_failed(self, st: P.BlueGreenState, reason: str) -> Outcome:
        """The fold-back cannot go on: green (the tested revision) keeps every request; a human decides."""
        assert st.green is not None
        why = f"fold-back: {reason}; every request stays on green {st.green.pair}"
        self._event("BlueGreenFoldBackFailed", f"blue-green {st.id}: {why}", warning=True)
        self._write_phase(st, P.FAILED, why)
        return self._end(st)

    def _interrupted(self, st: P.BlueGreenState) -> str:
        """Why the in-cluster controller's blue-green must roll back now ("": it goes on): an abort
        asked on the route (``kubectl lwsflow abort``) or a newer template Git synced onto blue."""
        if not st.fold_back:
            return ""
        ann = (self._read(HTTP_ROUTE, self.route["metadata"]["name"])["metadata"].get("annotations") or {})
        if ann.get(ABORT) == st.id:
            return ABORTED
        if self._superseded(st):  # that template gets its own run once this one has rolled back
            return "superseded: Git synced another template onto the blue pair"
        return ""

    def _hold(self, st: P.BlueGreenState) -> None:
        """While ``kubectl lwsflow pause`` holds this blue-green: the weights stay where they are (the
        stage passed; the pass is written with the next shift, so a restart checks it again)."""
        if not st.fold_back:
            return
        held = False
        while (self._read(HTTP_ROUTE, self.route["metadata"]["name"])["metadata"].get("annotations")
               or {}).get(PAUSE) == st.id:
            if why := self._interrupted(st):
                raise StageFailed(why)
            if not held:
                held = True
                self._event("BlueGreenPaused", f"blue-green {st.id}: held at green {st.weights[st.stage]}% "
                            "until `kubectl lwsflow resume`")
                self._step("paused")
            self.clock.sleep(self.poll_s)

    def _superseded(self, st: P.BlueGreenState, *, live: bool = False) -> bool:
        """The blue pair's templates are no longer the ones green runs (GitOps: a newer sync); ``live``:
        read from the API (what decides a write to the blue pair), else as a wait reads."""
        assert st.blue is not None
        read = self._get if live else self._read
        blue = {r: read(LWS, st.blue.lws[r]) for r in P.ROLES}
        return state.template_hash({r: state.template_of(o) for r, o in blue.items()}) != st.manifest_hash

    def _restore_blue(self, st: P.BlueGreenState) -> None:
        """After a rollback: the blue pool's selector as Git has it, and the blue pair's template back to
        its last good one, as a partition rollback restores it (no group moved: the partition stayed at
        replicas). A template Git synced since (not the one that failed) is left for its own run."""
        assert st.blue is not None
        self._restore_selector(st)
        if self._superseded(st, live=True):
            return
        for r in P.ROLES:
            obj = self._get(LWS, st.blue.lws[r])
            good = state.RolloutState.from_object(obj).last_good
            if not good or state.template_hash(state.unpack(good)) == state.template_hash(
                    state.template_of(obj)):
                continue
            self._saw(LWS, self.kube.merge_patch(LWS, self.ns, st.blue.lws[r], {
                "metadata": {"resourceVersion": obj["metadata"]["resourceVersion"]},
                "spec": merge_diff(state.template_of(obj), state.unpack(good))},
                field_manager=L.FIELD_MANAGER))
        self._step("blue-restored")

    def _restore_selector(self, st: P.BlueGreenState) -> None:
        assert st.blue is not None
        match = json.loads(st.fold_back)["selector"]
        self.kube.merge_patch(INFERENCE_POOL, self.ns, st.blue.pool,
                              {"spec": {"selector": {"matchLabels": {L.PD_PAIR: None, **match}}}},
                              field_manager=L.FIELD_MANAGER)

    def _partition(self, name: str, value: int, annotations: dict[str, str | None] | None = None) -> None:
        patch: Obj = {"spec": {"rolloutStrategy": {"rollingUpdateConfiguration": {"partition": value}}}}
        if annotations:
            patch["metadata"] = {"annotations": annotations}
        self._saw(LWS, self.kube.merge_patch(LWS, self.ns, name, patch, field_manager=L.FIELD_MANAGER))

    # -- I/O helpers ---------------------------------------------------------------------------------
    def _drain(self, pool: str) -> None:
        """``DRAIN_S`` cluster seconds, then until the engines behind ``pool`` (no traffic any more)
        have finished the requests they took (``drain.py``)."""
        self.clock.sleep(DRAIN_S)
        try:
            urls = drain.serving_urls(self.kube, self.ns, pool)
        except NotFound:
            return
        busy = drain.wait_idle(urls)
        if busy:
            self._event("DrainIncomplete", f"pool {pool}: {sum(busy.values()):g} request(s) still in flight "
                        f"after {drain.WALL_LIMIT_S:g}s of drain; deleting anyway", warning=True)

    def _write(self, st: P.BlueGreenState, rules: list[Obj] | None) -> None:
        self.route = self._saw(HTTP_ROUTE, self.kube.merge_patch(
            HTTP_ROUTE, self.ns, self.route["metadata"]["name"], P.route_patch(self.route, st, rules),
            field_manager=L.FIELD_MANAGER))

    def _write_phase(self, st: P.BlueGreenState, phase: str, reason: str,
                     rules: list[Obj] | None = None) -> None:
        for _ in range(8):
            self.route = self._get(HTTP_ROUTE, self.route["metadata"]["name"])
            nxt = P.BlueGreenState(**{**st.__dict__, "phase": phase, "reason": reason})
            try:
                self._write(nxt, rules)
            except Conflict:
                time.sleep(0.05)
                continue
            st.__dict__.update(nxt.__dict__)
            return
        raise OperationFailed(f"HTTPRoute {self.route['metadata']['name']} kept changing under the rollout")

    def _get(self, res: Resource, name: str) -> Obj:
        return self._saw(res, self.kube.get(res, self.ns, name))

    def _read(self, res: Resource, name: str) -> Obj:
        """What a wait judges: the cached copy when the cache holds one at least as new as this rollout's
        last write or read of the object, else a GET (NotFound when it is gone)."""
        obj = self.cache.cached(res, self.ns, name) if self.cache is not None else None
        if obj is not None and _rv(obj) >= self._seen.get((res.plural, name), 0):
            return obj
        return self._get(res, name)

    def _saw(self, res: Resource, obj: Obj) -> Obj:
        """Remember the copy just written or read (a later cached read is never older)."""
        key = (res.plural, str(obj["metadata"]["name"]))
        self._seen[key] = max(self._seen.get(key, 0), _rv(obj))
        return obj

    def _exists(self, res: Resource, name: str) -> bool:
        return exists(self.kube, res, self.ns, name)

    def _delete(self, res: Resource, name: str) -> None:
        delete_if_present(self.kube, res, self.ns, name)

    def _event(self, reason: str, message: str, *, warning: bool = False) -> None:
        self.events.emit(self.route, reason, message, warning=warning)

    def _step(self, name: str) -> None:
        if self.on_step is not None:
            self.on_step(name)


def _origin(route: Obj, pool: Obj, manifests: dict[str, Obj]) -> str:
    """What Git has for the route's rules and the blue pool's selector, before the rollout touches them,
    and each role's template hash of the release (the policy status names a release by its decode
    template, as a partition rollout of the pair does)."""
    templates = {r: state.template_hash(state.template_of(m)) for r, m in manifests.items()}
    return json.dumps({"rules": (route.get("spec") or {}).get("rules") or [],
                       "selector": ((pool.get("spec") or {}).get("selector") or {}).get("matchLabels") or {},
                       "templates": templates}, sort_keys=True, separators=(",", ":"))
