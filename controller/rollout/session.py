"""The library behind ``lwsflow rollout``: targets, manifests, the capacity check, pause/resume/abort.

The CLI (``cli/rollout.py``) only parses arguments and prints; everything it does is a
function here, usable from a pipeline step or a test.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from lwsflow.controller.api import labels as L
from lwsflow.controller.api.wire import Obj
from lwsflow.controller.clock import Clock, ClusterClock, WallClock
from lwsflow.controller.errors import Forbidden, InvalidInput, NotFound
from lwsflow.controller.kube.client import Kube
from lwsflow.controller.kube.resources import BY_KIND, LWS, NODE, POD, Resource
from lwsflow.controller.pd.guard import guard_ds, guard_pair
from lwsflow.controller.pd.pair import ROLES, PairRollout, find_pair
from lwsflow.controller.rollout import capacity, gate, quota, state
from lwsflow.controller.rollout.ds import DsKind, ds_rollout, refuse_pause
from lwsflow.controller.rollout.engine import Outcome, Rollout, RolloutOptions, Wiring
from lwsflow.controller.rollout.stages import resolve_stages
from lwsflow.controller.yamlio import load_yaml_documents

if TYPE_CHECKING:
    from lwsflow.controller.bluegreen.plan import BlueGreenState

# used with fullmatch: a "$" would let "lws/x\n" through as lws/x
_DNS_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_TARGET = re.compile(rf"(lws|pair|ds)/({_DNS_LABEL})")
_NAMESPACE = re.compile(_DNS_LABEL)
_CLOCK_PATH = "/lwsflow/v1/clock"  # the embedded cluster's virtual clock
KIND_OF = {"lws": "LeaderWorkerSet", "ds": "DisaggregatedSet", "pair": "LeaderWorkerSet"}


@dataclass(frozen=True)
class Target:
    """``lws/NAME``, ``pair/NAME`` or ``ds/NAME`` in a namespace."""

    kind: str
    name: str
    namespace: str

    def __str__(self) -> str:
        return f"{self.kind}/{self.name} -n {self.namespace}"

    @property
    def resource(self) -> Resource:
        """The API resource of the target's object(s)."""
        return BY_KIND[KIND_OF[self.kind]]


def parse_target(text: str, namespace: str) -> Target:
    m = _TARGET.fullmatch(text or "")
    if not m:
        raise InvalidInput(f"{text!r} is not lws/NAME, pair/NAME or ds/NAME (NAME a DNS label)",
                           field="target")
    if not _NAMESPACE.fullmatch(namespace or ""):
        raise InvalidInput(f"{namespace!r} is not a namespace name", field="namespace")
    return Target(m.group(1), m.group(2), namespace)


def clock_for(kube: Kube) -> Clock:
    """The embedded cluster's virtual clock when the server offers one, else wall time."""
    try:
        first = kube.get_json(_CLOCK_PATH)
    except (NotFound, Forbidden):  # a real cluster: no such path (403 when RBAC guards it)
        return WallClock()
    return ClusterClock(lambda: kube.get_json(_CLOCK_PATH), first=first)


def cluster_clock(kube: Kube) -> Clock:
    """The embedded cluster's virtual clock; refused (``--cluster-clock``) when the server has none."""
    try:
        first = kube.get_json(_CLOCK_PATH)
    except (NotFound, Forbidden) as exc:
        raise InvalidInput(f"the cluster serves no {_CLOCK_PATH} (only the embedded cluster has a "
                           "virtual clock)", field="cluster-clock") from exc
    return ClusterClock(lambda: kube.get_json(_CLOCK_PATH), first=first)


# the suffix a blue-green gives a pair's name (bluegreen/plan.revision: 8 hex)
_REV_SUFFIX = re.compile(r"-[0-9a-f]{8}$")


def load_manifests(path: str | Path, target: Target) -> dict[str, Obj]:
    """The target's documents from ``--manifest``: {"": obj} or, for a pair, {"decode": .., "prefill": ..}."""
    p = Path(path)
    if not p.is_file():
        raise InvalidInput(f"{path}: no such file", field="manifest")
    docs = [d for d in load_yaml_documents(p) if isinstance(d, dict)]
    kind = KIND_OF[target.kind]
    out: dict[str, Obj] = {}
    # a blue-green renames a pair <base>-<rev>; Git's manifest keeps the pair's first name, which the
    # next blue-green of pair/<base>-<rev> takes too (an exact match wins)
    names = [target.name, *([base] if (base := _REV_SUFFIX.sub("", target.name)) != target.name else [])]
    for name in names if target.kind == "pair" else [target.name]:
        for d in docs:
            meta = d.get("metadata") or {}
            if d.get("kind") != kind or meta.get("namespace") not in (None, target.namespace):
                continue
            if target.kind == "pair":
                labels = meta.get("labels") or {}
                if labels.get(L.PD_PAIR) == name and labels.get(L.ROLE) in ROLES:
                    out.setdefault(labels[L.ROLE], d)
            elif meta.get("name") == name:
                out[""] = d
    want = set(ROLES) if target.kind == "pair" else {""}
    if set(out) != want:
        raise InvalidInput(f"no {kind} for {target} in the file" + (
            f" (need {L.ROLE}=prefill and =decode labelled {L.PD_PAIR}={target.name})"
            if target.kind == "pair" else ""), field="manifest", source=str(path))
    return out


def _refuse(rep: capacity.CapacityReport, fitting: str | None, *, auto_budget: bool,
            ds: bool) -> InvalidInput:
    surge_short = rep.groups_that_fit < rep.surge_groups
    what = capacity.refusal_hint(rep, fitting, auto_budget=auto_budget, ds=ds)
    return InvalidInput(f"{rep.message}; free GPUs per eligible node {rep.per_node_free or '{}'}; "
                        f"{what}", field="maxSurge" if surge_short else "leaderWorkerTemplate")


def _cluster(kube: Kube) -> tuple[list[Obj], list[Obj]]:
    nodes, _ = kube.list(NODE)
    pods, _ = kube.list(POD, field_selector="status.phase!=Succeeded,status.phase!=Failed")
    return nodes, pods


def check_capacity(kube: Kube, lws: Obj, auto_budget: bool, namespace: str | None = None
                   ) -> tuple[Obj, str]:
    """Refuse (InvalidInput, with the numbers) a rollout of ``lws``'s (new) template that the node
    pool cannot place, or with ``auto_budget`` return it with the first budget that fits."""
    nodes, pods = _cluster(kube)
    rep = capacity.check(lws, nodes, pods, namespace=namespace)
    if rep.fits:
        return lws, rep.message
    chosen = capacity.choose_budget(lws, nodes, pods, namespace)
    if chosen is None or not auto_budget:
        raise _refuse(rep, str(chosen[0]) if chosen else None, auto_budget=auto_budget, ds=False)
    budget, ok = chosen
    return capacity.with_budget(lws, budget), (
        f"--auto-budget: {rep.message}; rolling with {budget} instead: {ok.message}")


def check_ds_capacity(kube: Kube, ds: Obj, auto_budget: bool, namespace: str | None = None
                      ) -> tuple[Obj, str]:
    """The same per role for a DisaggregatedSet (DS planner defaults: maxSurge 1, maxUnavailable 0)."""
    nodes, pods = _cluster(kube)
    rep = capacity.check_ds(ds, nodes, pods, namespace=namespace)
    if rep.fits:
        return ds, rep.message
    chosen = capacity.choose_ds_budgets(ds, nodes, pods, namespace)
    text = ", ".join(f"{r}: {b}" for r, b in chosen[0].items()) if chosen else None
    if chosen is None or not auto_budget:
        raise _refuse(rep, text, auto_budget=auto_budget, ds=True)
    budgets, ok = chosen
    return capacity.ds_with_budgets(ds, budgets), (
        f"--auto-budget: {rep.message}; rolling with {text} instead: {ok.message}")


def _staged_surge(kind: str, objs: dict[str, Obj], stages: str | None, on_shortage: str,
                  log: Callable[[str], None]) -> dict[str, Obj]:
    """A queue-managed LWS rolled in partition stages: no more surge than Kueue gives Workloads to
    (quota.staged_surge_limit); more is refused, or with ``inPlace`` lowered to what it admits."""
    if kind == "ds" or stages is None:  # a DS moves in one step: Kueue sees a plain surge
        return objs
    out = dict(objs)
    for key, obj in objs.items():
        q = quota.queue_of(obj)
        if q is None or capacity.gpus_requested(obj) == 0:
            continue
        replicas, surge = gate.replicas(obj), gate.max_surge(obj)
        limit = quota.staged_surge_limit(replicas, resolve_stages(stages, replicas))
        if limit is None or surge <= limit:
            continue
        why = (f"LeaderWorkerSet {obj['metadata']['name']} (LocalQueue {q}): maxSurge {surge} in stages "
               f"{stages} of {replicas} groups: Kueue makes a Workload for a surge group only while "
               f"updatedReplicas < replicas, and a surge group counts as updated, so at most {limit} surge "
               "group(s) get one; the others would stay gated and the stage never pass")
        if on_shortage != "inPlace":
            raise InvalidInput(f"{why}; lower maxSurge to {limit}, or roll within what Kueue admits "
                               "(--on-quota-shortage inPlace; a RolloutPolicy's quota.onShortage: inPlace)",
                               field="maxSurge")
        budget = capacity.Budget(surge, gate.max_unavailable(obj))
        out[key] = capacity.with_budget(obj, _within(budget, limit))
        log(f"quota: {why}; onShortage inPlace: rolling with maxSurge {limit}")
    return out


def _quota_check(kube: Kube, kind: str, namespace: str, objs: dict[str, Obj], on_shortage: str,
                 log: Callable[[str], None]) -> dict[str, Obj]:
    """Kueue's quota for the surge groups of the objects whose LWS (or DS roles) carry the queue label
    (rollout/quota.py): admitted -> unchanged; not -> refused, or with ``inPlace`` rolled with the surge
    the quota admits (none: in place, maxUnavailable at least 1)."""
    needs: dict[str, list[tuple[str, quota.SurgeNeed]]] = {}  # queue -> (object key, need)
    for key, obj in objs.items():
        if kind == "ds":
            roles = {r["name"]: r for r in (obj.get("spec") or {}).get("roles") or []}
            for need in quota.ds_surge(obj):
                q = quota.queue_of(roles[need.role])
                if q is not None and need.groups and need.gpus_per_group:
                    needs.setdefault(q, []).append((key, need))
            continue
        q = quota.queue_of(obj)
        if q is None or capacity.gpus_requested(obj) == 0:
            continue
        name = obj["metadata"]["name"]
        pods, _ = kube.list(POD, namespace, label_selector=f"{L.NAME}={name}")
        present = len(capacity.lws_plan(obj, pods, namespace=namespace).surge_present)
        need = quota.lws_surge(obj, present, key)
        if need.groups:
            needs.setdefault(q, []).append((key, need))
    out = dict(objs)
    for q, items in needs.items():
        rep = quota.admit(quota.read_queue(kube, namespace, q, "metadata.labels"), [n for _k, n in items])
        if rep.fits:
            log(f"quota: {rep.message}")
            continue
        if on_shortage != "inPlace":
            short = next(n for _k, n in items if rep.admitted[n.role] < n.groups)
            raise InvalidInput(
                f"{rep.message}: Kueue would hold the surge groups' pods gated and the rollout would stall; "
                f"lower maxSurge{f' of role {short.role}' if short.role else ''} to "
                f"{rep.admitted[short.role]}, free quota in ClusterQueue {rep.queue.cluster_queue}, or roll "
                "within the quota (--on-quota-shortage inPlace; a RolloutPolicy's quota.onShortage: inPlace)",
                field="maxSurge")
        for key, n in items:
            obj = out[key]
            if kind == "ds":
                role = next(r for r in obj["spec"]["roles"] if r["name"] == n.role)
                b = capacity.role_budget(role)
                out[key] = capacity.ds_with_budgets(obj, {n.role: _within(b, rep.admitted[n.role])})
            else:
                b = capacity.Budget(gate.max_surge(obj), gate.max_unavailable(obj))
                out[key] = capacity.with_budget(obj, _within(b, rep.admitted[n.role]))
        log(f"quota: {rep.message}; onShortage inPlace: rolling with the surge the quota admits")
    return out


def _within(b: capacity.Budget, admitted: int) -> capacity.Budget:
    """``b`` with no more surge than the quota admits (none: one group down at a time, at least)."""
    surge = min(b.max_surge, admitted)
    return capacity.Budget(surge, b.max_unavailable if surge else max(1, b.max_unavailable))


def capacity_preflight(kube: Kube, kind: str, namespace: str, objs: dict[str, Obj], *, auto_budget: bool,
                       log: Callable[[str], None] = lambda _m: None,
                       skip_gpu_free: bool = False, live: dict[str, Obj] | None = None,
                       on_quota_shortage: str = "refuse", stages: str | None = None) -> dict[str, Obj]:
    """The capacity check before a fresh rollout, one path for ``lwsflow rollout`` and the in-cluster
    controller: per object (``objs``: {"": obj}, or a pair's {role: obj}), those with no rollout in
    progress are checked against Kueue's quota when they carry its queue label (``on_quota_shortage``:
    ``refuse`` or ``inPlace``, rollout/quota.py), then against the node pool; returns the objects to roll
    (with the quota's or ``auto_budget``'s choice where it changed the budget), or raises InvalidInput
    naming what does not fit. ``live``: the objects as they run, when ``objs`` are a manifest's: a
    template change Kueue's webhook would refuse on a queue-managed LWS is refused first. ``stages``:
    the partition stages it rolls through (a queue-managed LWS's surge is also held to what Kueue
    gives Workloads to in them).
    ``skip_gpu_free``: a template that asks for no GPUs cannot be refused, so it is not checked (the
    controller, starting many rollouts at once, then sends no LIST of the cluster's nodes and pods)."""
    quota.check_on_shortage(on_quota_shortage)
    fresh = {role: obj for role, obj in objs.items() if not state.RolloutState.from_object(obj).active}
    if kind != "ds":
        for role, obj in fresh.items():
            if live is not None and role in live:
                quota.refuse_immutable(live[role], obj, role)
    fresh = _staged_surge(kind, fresh, stages, on_quota_shortage, log)
    objs = {**objs, **_quota_check(kube, kind, namespace, fresh, on_quota_shortage, log)}
    out: dict[str, Obj] = {}
    for role, obj in objs.items():
        if role not in fresh:  # resumed: its capacity was checked at its start
            out[role] = obj
            continue
        if skip_gpu_free and capacity.gpus_requested(obj) == 0:
            out[role] = obj
            continue
        check = check_ds_capacity if kind == "ds" else check_capacity
        checked, msg = check(kube, obj, auto_budget, namespace)
        log(f"capacity {role}: {msg}" if role else f"capacity: {msg}")
        out[role] = checked
    return out


def engine_for(kind: str) -> Callable[..., Rollout]:
    """The partition executor of a target kind (``lws``, ``ds``; a pair's roles are LWS)."""
    return ds_rollout if kind == "ds" else Rollout


def _refuse_other_manifest(live: Obj, doc: Obj | None) -> None:
    """A rollout in progress is resumed, never silently swapped for another manifest."""
    st = state.RolloutState.from_object(live)
    if st.active and doc is not None and st.manifest_hash != state.manifest_hash(doc, live):
        raise InvalidInput(f"rollout {st.id} of another manifest is in progress on "
                           f"{live['metadata']['name']} ({st.phase}, {st.passed}/{len(st.targets)} "
                           "stages); resume or abort it first", field="manifest")


STRATEGIES = ("partition", "blue-green")


def check_strategy(strategy: str, target: Target) -> None:
    """``partition`` (stages of groups in place) or ``blue-green`` (a second LWS, pair or DS, traffic by
    weights)."""
    if strategy not in STRATEGIES:
        raise InvalidInput(f"{strategy!r} is not one of {', '.join(STRATEGIES)}", field="strategy")


def run(kube: Kube, clock: Clock, target: Target, opts: RolloutOptions, *,
        manifest: str | Path | None = None, auto_budget: bool = False,
        on_step: Callable[[str], None] | None = None, log: Callable[[str], None] = lambda _m: None,
        strategy: str = "partition", weights: list[int] | None = None,
        on_quota_shortage: str = "refuse") -> Outcome:
    """Roll ``target`` out (or resume its rollout) and return the outcome."""
    check_strategy(strategy, target)
    quota.check_on_shortage(on_quota_shortage)
    kube = kube.view()  # this rollout's own request counter: its report counts its requests only
    docs = load_manifests(manifest, target) if manifest else {}
    if strategy != "blue-green":
        bg = blue_green_state(kube, target)
        if bg is not None and bg.active:
            raise InvalidInput(f"blue-green {bg.id} of {target.kind} {target.name} is in progress "
                               f"({bg.phase}); run it again with --strategy blue-green to resume it",
                               field="strategy")
    if strategy == "blue-green":
        from lwsflow.controller.bluegreen.executor import BlueGreenRollout
        from lwsflow.controller.bluegreen.kinds import kind_for
        from lwsflow.controller.bluegreen.plan import DEFAULT_WEIGHTS, parse_weights

        return BlueGreenRollout(kube, target.namespace, target.name, opts, clock,
                                weights=weights or parse_weights(DEFAULT_WEIGHTS), manifests=docs or None,
                                on_step=on_step, log=log,
                                kind=kind_for(target.kind, kube, target.namespace)).run()
    if target.kind == "pair":
        live = find_pair(kube, target.namespace, target.name)
        check_stages(opts.stages, [docs.get(r) or live[r] for r in ROLES])
        for role in ROLES:
            _refuse_other_manifest(live[role], docs.get(role))
        switched = False
        fresh = not state.any_active(live[r] for r in ROLES)
        if fresh and opts.pd_probe is not None:  # before anything mixes revisions (pd/guard.py)
            opts, switched = guard_pair(kube, clock, target.namespace, target.name, opts, docs, live, log)
        if not switched:
            current = {r: docs.get(r) or live[r] for r in ROLES}
            checked = capacity_preflight(kube, "pair", target.namespace, current, auto_budget=auto_budget,
                                         log=log, live=live, on_quota_shortage=on_quota_shortage,
                                         stages=opts.stages)
            docs.update({r: o for r, o in checked.items() if o is not current[r]})
        return PairRollout(kube, target.namespace, target.name, opts, clock, manifests=docs or None,
                           on_step=on_step).run()
    ds = target.kind == "ds"
    live = _get(kube, target)
    doc = docs.get("")
    if not ds:  # a DisaggregatedSet rolls in one gated stage: --stages does not apply
        check_stages(opts.stages, [doc or live])
    _refuse_other_manifest(live, doc)
    switched = False
    if ds and opts.pd_probe is not None and not state.RolloutState.from_object(live).active:
        doc, switched = guard_ds(kube, clock, target.namespace, target.name, opts, doc, live, log)
    if not switched and not state.RolloutState.from_object(live).active:
        current = doc or live
        checked = capacity_preflight(kube, target.kind, target.namespace, {"": current},
                                     auto_budget=auto_budget, log=log, live={"": live},
                                     on_quota_shortage=on_quota_shortage, stages=opts.stages)[""]
        if checked is not current:
            if doc is None:  # GitOps: the budget has to change on the live object (and in Git)
                kube.merge_patch(target.resource, target.namespace, target.name,
                                 budget_patch(live, checked, ds), field_manager=L.FIELD_MANAGER)
            else:
                doc = checked
    return engine_for(target.kind)(kube, target.namespace, target.name, opts, clock,
                                   manifest=doc, wiring=Wiring(on_step=on_step)).run()


def blue_green_state(kube: Kube, target: Target) -> BlueGreenState | None:
    """The blue-green state naming ``target`` (an LWS, a pair or a DS) as blue, from its HTTPRoute
    (None: none, or no Gateway API on the cluster)."""
    from lwsflow.controller.bluegreen.executor import route_of
    from lwsflow.controller.bluegreen.plan import BlueGreenState

    try:
        route = route_of(kube, target.namespace, target.name, target.kind)
    except (NotFound, Forbidden):  # no Gateway API served (no blue-green ran), or a role without it
        return None
    return BlueGreenState.from_route(route) if route is not None else None


def check_stages(stages: str, objs: list[Obj]) -> None:
    """Refuse stages that cannot resolve for these objects, before the persisted state is looked at:
    a finished or running rollout must not turn a bad ``--stages`` into "already succeeded".
    A pair's stages resolve against its larger role, as PairRollout does."""
    resolve_stages(stages, max(gate.replicas(o) for o in objs))


def budget_patch(live: Obj, checked: Obj, ds: bool) -> Obj:
    """The merge patch that writes ``checked``'s budget (--auto-budget's or the quota's choice) onto the
    live object."""
    if ds:  # roles is a list: the patch replaces it whole, so guard against a concurrent writer
        return {"metadata": {"resourceVersion": live["metadata"]["resourceVersion"]},
                "spec": {"roles": checked["spec"]["roles"]}}
    ruc = checked["spec"]["rolloutStrategy"]["rollingUpdateConfiguration"]
    return {"spec": {"rolloutStrategy": {"rollingUpdateConfiguration": {
        "maxSurge": ruc["maxSurge"], "maxUnavailable": ruc["maxUnavailable"]}}}}


def _get(kube: Kube, target: Target) -> Obj:
    try:
        return kube.get(target.resource, target.namespace, target.name)
    except NotFound:
        raise InvalidInput(f"{KIND_OF[target.kind]} {target.namespace}/{target.name} not found",
                           field="target") from None


def _objects(kube: Kube, target: Target) -> list[tuple[Resource, Obj]]:
    if target.kind == "pair":
        return [(LWS, o) for o in find_pair(kube, target.namespace, target.name).values()]
    return [(target.resource, _get(kube, target))]


def set_flags(kube: Kube, clock_now: float, target: Target, **flags: bool) -> list[Obj]:
    """Write ``paused``/``abort`` on the target's objects (only while a rollout is active)."""
    if target.kind == "ds" and flags.get("paused"):
        refuse_pause()
    ann = state.RolloutState(**flags)  # type: ignore[arg-type]
    keys = tuple(flags)
    if flags.get("paused") is False:  # resume: a fresh progress deadline from now
        ann.stage_started = state.iso(clock_now)
        keys = (*keys, "stage_started")
    patch = {"metadata": {"annotations": ann.annotations(keys)}}
    out = []
    for res, obj in _objects(kube, target):
        st = state.RolloutState.from_object(obj)
        if not st.active:
            raise InvalidInput(f"{obj['metadata']['name']}: no rollout in progress "
                               f"(last: {st.phase or 'none'})", field="target")
        out.append(kube.merge_patch(res, target.namespace, obj["metadata"]["name"], patch,
                                    field_manager=L.FIELD_MANAGER))
    return out


def status(kube: Kube, target: Target) -> list[Obj]:
    """The persisted state and the live gate numbers of the target's objects."""
    rows = []
    bg = blue_green_state(kube, target)
    if bg is not None and bg.green is not None:
        rows.append({"name": target.name, "strategy": "blue-green", "id": bg.id, "phase": bg.phase,
                     "weights": bg.weights, "stage": bg.stage + 1, "passed": bg.passed,
                     "green": bg.green.pair, "reason": bg.reason})
        if not bg.active and bg.phase == "Succeeded":  # blue is gone: nothing else to show
            return rows
    for _res, obj in _objects(kube, target):
        st = state.RolloutState.from_object(obj)
        row = {"name": obj["metadata"]["name"], "id": st.id, "phase": st.phase or "none",
               "stages": st.stages, "targets": st.targets, "passed": st.passed, "paused": st.paused,
               "reason": st.reason, "updated": st.updated}
        if target.kind == "ds":
            row["gate"] = gate.ds_gate(obj, DsKind(kube, target.namespace).children(obj)).detail
        else:
            row["partition"] = gate.partition(obj)
            row["gate"] = gate.summary(obj)
        rows.append(row)
    return rows


def options_from_state(kube: Kube, target: Target, base: RolloutOptions) -> RolloutOptions:
    """For resume/abort: the stages, bake and deadline the rollout was started with."""
    _res, obj = _objects(kube, target)[0]
    st = state.RolloutState.from_object(obj)
    if not st.active:
        raise InvalidInput(f"{target}: no rollout in progress (last: {st.phase or 'none'})",
                           field="target")
    base.stages, base.bake_s, base.deadline_s = st.stages or base.stages, st.bake_s, st.deadline_s
    base.no_rollback = st.no_rollback
    return base
