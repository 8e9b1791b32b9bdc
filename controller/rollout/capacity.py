"""Capacity check before a rollout: can the whole rolling update be placed? (pure)

A group is a gang: it runs only if all of its pods (leader + ``size - 1`` workers) are placed at
once, so placement here is per pod, first-fit-decreasing over nodes that are Ready, schedulable,
match the pod's ``nodeSelector`` and tolerate the node's taints, counting the GPUs bound pods
already request. Every new group is placed with the **new** template's pod specs (GPUs, node
selector, tolerations); the GPUs an old group frees are the ones its pods really hold, on their
nodes. So a release that needs more GPUs per group than the old one is checked as such.

The rolling update is simulated the way LWS runs it (lws-semantics §d) for a budget ``(maxSurge S,
maxUnavailable U)``:

1. the template change creates ``S`` surge groups at once, next to every old group (surge groups
   already there, e.g. created while a GitOps-synced template sat frozen, count as placed);
2. old groups are replaced highest ordinal first, ``W = max(1, U + S)`` at a time: before new group
   ``k`` must be placed, old groups ``0..k+W-1`` (in replacement order) are gone; a window that
   cannot place its new group never progresses (LWS waits for it to be ready);
3. surge is reclaimed once ``u`` not-yet-replaced groups are ``<= S`` (``R + max(0, u - U)``).

A DisaggregatedSet is the same per role with the DS planner's bounds (``old + new <= target +
maxSurge``; the default per role, with no ``rollingUpdateConfiguration``, is maxSurge 1 /
maxUnavailable 0, §f); its roles advance in lockstep, so their replacements are interleaved by
fraction done on the shared nodes. :func:`choose_budget` is ``--auto-budget``: the first budget,
from the configured one towards less surge and then more unavailability, whose simulation fits.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field, replace

from lwsflow.controller.api import labels as L
from lwsflow.controller.api.intstr import resolve as resolve_int_or_percent
from lwsflow.controller.api.scheduling import tolerates
from lwsflow.controller.api.wire import Obj
from lwsflow.controller.rollout import gate

Usage = dict[str, int]  # node -> GPUs one group holds there


@dataclass(frozen=True)
class Budget:
    """A rolling-update budget: how many groups may be added (surge) / taken down (unavailable)."""

    max_surge: int
    max_unavailable: int

    def __str__(self) -> str:
        return f"maxSurge {self.max_surge}, maxUnavailable {self.max_unavailable}"


@dataclass(frozen=True)
class Plan:
    """One LWS (or one DS role) to roll: the new group's pods, the old groups, the budget."""

    name: str  # "" for a single LWS, the role name for a DS role
    specs: list[Obj]  # pod specs of one NEW group: leader first
    replicas: int  # groups it ends with
    budget: Budget
    old_groups: list[Usage] = field(default_factory=list)  # in replacement order
    old_gpus_per_group: int = 0
    surge_present: list[Usage] = field(default_factory=list)  # new-template groups already running
    # a DS role: no separate surge groups; new group k waits until old + k + 1 <= target + maxSurge
    ds: bool = False
    subject: str = ""  # a P/D pair role's LWS, named in a refusal
    pool: str = "any node"

    @property
    def gpus_per_group(self) -> int:
        return sum(_gpu(s) for s in self.specs)


@dataclass(frozen=True)
class CapacityReport:
    """The numbers behind the verdict (printed on refusal, written to the report)."""

    fits: bool
    surge_groups: int
    groups_that_fit: int  # surge groups placed
    gpus_per_group: int  # of the NEW template
    free_gpus: int
    eligible_nodes: int
    per_node_free: dict[str, int] = field(default_factory=dict)
    old_gpus_per_group: int = 0
    replaced_groups: int = 0
    replaced_that_fit: int = 0
    budget: Budget | None = None
    role: str = ""
    window: int = 1
    stuck_free_gpus: int = 0  # free GPUs on eligible nodes when a replacement found no room
    pool: str = "any node"  # where the new groups may go (the pods' node pool or nodeSelector)
    subject: str = ""  # the object of a P/D pair role, e.g. "LeaderWorkerSet x-decode"

    @property
    def message(self) -> str:
        if self.fits:  # a log line: the role of a DS is enough
            who = f"role {self.role}: " if self.role and not self.subject else ""
        else:  # a refusal: which role of which object, on which pool
            where = ", ".join(w for w in (self.subject, self.pool) if w)
            who = f"role {self.role} ({where}): " if self.role else f"{where}: "
        if self.groups_that_fit < self.surge_groups:
            return (f"{who}{self.surge_groups} surge group(s) x {self.gpus_per_group} GPUs do NOT fit: "
                    f"{self.groups_that_fit} group(s) placeable in {self.free_gpus} free GPUs on "
                    f"{self.eligible_nodes} eligible node(s)")
        replace_text = (f"{self.replaced_groups} group(s) of {self.old_gpus_per_group} GPUs replaced by "
                        f"groups of {self.gpus_per_group} GPUs, {self.window} at a time ({self.budget})")
        if not self.fits:
            return (f"{who}{replace_text} do NOT fit: new group {self.replaced_that_fit + 1} of "
                    f"{self.replaced_groups} finds no room in {self.stuck_free_gpus} free GPUs on "
                    f"{self.eligible_nodes} eligible node(s) once the old groups ahead of it freed "
                    f"theirs ({self.free_gpus} free before the rollout)")
        return (f"{who}{self.surge_groups} surge group(s) x {self.gpus_per_group} GPUs fit; "
                f"{replace_text} fit ({self.free_gpus} free GPUs on {self.eligible_nodes} eligible "
                "node(s))")


def refusal_hint(rep: CapacityReport, fitting: str | None, *, auto_budget: bool, ds: bool) -> str:
    """What can help after ``rep`` did not fit: a budget only when one fits (``fitting``, as
    :func:`choose_budget` found it), else freeing or adding GPUs where the pods may go."""
    if fitting is not None:
        knob = "set the role's rollingUpdateConfiguration" if ds else "lower maxSurge or raise maxUnavailable"
        return f"{knob} ({fitting} fits), free GPUs in {rep.pool}, or pass --auto-budget"
    lead = "--auto-budget: " if auto_budget else ""
    if rep.eligible_nodes == 0:
        return (f"{lead}no node of {rep.pool} is Ready, schedulable and matches the pods' nodeSelector "
                "and tolerations, so no budget helps: add nodes there or fix the pod template")
    return (f"{lead}no budget with at least one group serving fits either: free GPUs in {rep.pool}, add "
            "nodes, or need fewer GPUs per group")


def _pool_of(spec_owner: Obj) -> str:
    """Where the new pods go: the catalog pool (lwsflow's pool label on the pod template or in its
    nodeSelector), else the nodeSelector itself."""
    tpl = ((spec_owner.get("spec") or {}).get("leaderWorkerTemplate") or {}).get("workerTemplate") or {}
    sel = (tpl.get("spec") or {}).get("nodeSelector") or {}
    pool = ((tpl.get("metadata") or {}).get("labels") or {}).get(L.NODE_POOL) or sel.get(L.NODE_POOL)
    if pool:
        return f"pool {pool}"
    return "nodes with " + ",".join(f"{k}={v}" for k, v in sorted(sel.items())) if sel else "any node"


def _role_of(lws: Obj) -> str:
    """A P/D pair member's role (``prefill`` or ``decode``); "" for any other LWS."""
    role = ((lws.get("metadata") or {}).get("labels") or {}).get(L.ROLE)
    return role if role in ("prefill", "decode") else ""


# -- cluster reading ---------------------------------------------------------------------------------


def _gpu(pod_spec: Obj) -> int:
    total = 0
    for c in pod_spec.get("containers") or []:
        res = c.get("resources") or {}
        req = {**(res.get("limits") or {}), **(res.get("requests") or {})}
        try:
            total += int(str(req.get(L.GPU_RESOURCE, 0)) or 0)
        except ValueError:
            continue
    return total


def _node_gpus(node: Obj) -> int:
    try:
        return int(str(((node.get("status") or {}).get("allocatable") or {}).get(L.GPU_RESOURCE, 0)) or 0)
    except ValueError:
        return 0


def _eligible(node: Obj, pod_spec: Obj) -> bool:
    spec, meta = node.get("spec") or {}, node.get("metadata") or {}
    if spec.get("unschedulable"):
        return False
    if _gpu(pod_spec) > 0 and _node_gpus(node) <= 0:
        return False  # a CPU node is no place for a GPU pod, whatever its labels and taints
    conds = (node.get("status") or {}).get("conditions") or []
    if any(c.get("type") == "Ready" and c.get("status") != "True" for c in conds):
        return False
    labels = meta.get("labels") or {}
    if any(labels.get(k) != v for k, v in (pod_spec.get("nodeSelector") or {}).items()):
        return False
    tol = pod_spec.get("tolerations") or []
    return all(tolerates(tol, t) for t in spec.get("taints") or []
               if t.get("effect") in ("NoSchedule", "NoExecute"))


def free_gpus(nodes: list[Obj], pods: list[Obj]) -> dict[str, int]:
    """Allocatable minus requested GPUs per node (pods that are bound and not finished)."""
    free = {}
    for n in nodes:
        alloc = ((n.get("status") or {}).get("allocatable") or {}).get(L.GPU_RESOURCE, 0)
        free[n["metadata"]["name"]] = int(str(alloc) or 0)
    for p in pods:
        node = (p.get("spec") or {}).get("nodeName")
        if node in free and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
            free[node] -= _gpu(p.get("spec") or {})
    return free


def gpus_requested(obj: Obj) -> int:
    """GPUs one group of ``obj`` asks for (an LWS; a DS: summed over its roles). 0: nothing to place, so
    a capacity check needs no read of the cluster."""
    roles = [r for r in (obj.get("spec") or {}).get("roles") or [] if isinstance(r, dict)]
    owners = roles or [obj]
    return sum(_gpu(spec) for owner in owners for spec in group_pod_specs(owner))


def group_pod_specs(lws_spec_owner: Obj) -> list[Obj]:
    """The pod specs of one group: the leader (leaderTemplate or workerTemplate) then the workers.

    Takes an LWS object or a DS role (anything with ``spec.leaderWorkerTemplate``).
    """
    lwt = (lws_spec_owner.get("spec") or {}).get("leaderWorkerTemplate") or {}
    size = int(lwt.get("size") or 1)
    worker = (lwt.get("workerTemplate") or {}).get("spec") or {}
    leader = (lwt.get("leaderTemplate") or {}).get("spec") or worker
    return [leader] + [worker] * (size - 1)


def _groups(pods: list[Obj], match: dict[str, str]) -> dict[tuple[str, int], Usage]:
    """GPU usage per (owning LWS, group index) of the bound, live pods whose labels match."""
    out: dict[tuple[str, int], Usage] = {}
    for p in pods:
        meta, spec = p.get("metadata") or {}, p.get("spec") or {}
        labels = meta.get("labels") or {}
        if any(labels.get(k) != v for k, v in match.items()) or not spec.get("nodeName"):
            continue
        if (p.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        try:
            gi = int(labels.get(L.GROUP_INDEX, ""))
        except ValueError:
            continue
        use = out.setdefault((labels.get(L.NAME, ""), gi), {})
        use[spec["nodeName"]] = use.get(spec["nodeName"], 0) + _gpu(spec)
    return out


def _old_gpus(groups: list[Usage], new_specs: list[Obj]) -> int:
    """GPUs per old group: the largest running one, else (none running) a new group's."""
    return max((sum(u.values()) for u in groups), default=sum(_gpu(s) for s in new_specs))


def _in(pods: list[Obj], namespace: str | None) -> list[Obj]:
    return [p for p in pods if namespace is None or (p.get("metadata") or {}).get("namespace") in
            (None, namespace)]


def lws_plan(lws: Obj, pods: list[Obj], budget: Budget | None = None,
             namespace: str | None = None) -> Plan:
    """The plan for rolling ``lws``'s template (as given: the new one) over its running groups.

    ``namespace``: where the LWS lives (default: its metadata; a manifest may not say).
    """
    meta = lws.get("metadata") or {}
    r = gate.replicas(lws)
    b = budget or Budget(gate.max_surge(lws), gate.max_unavailable(lws))
    match = {L.NAME: meta.get("name", "")}
    groups = _groups(_in(pods, namespace or meta.get("namespace")), match)
    old = [groups[k] for k in sorted(groups, key=lambda k: -k[1]) if k[1] < r]  # highest first
    surge = [groups[k] for k in sorted(groups) if k[1] >= r]
    specs = group_pod_specs(lws)
    role = _role_of(lws)
    return Plan(role, specs, r, b, old, _old_gpus(old, specs), surge,
                subject=f"LeaderWorkerSet {meta.get('name', '')}" if role else "", pool=_pool_of(lws))


def role_budget(role: Obj) -> Budget:
    """A DS role's budget: its rollingUpdateConfiguration, else the DS planner's maxSurge 1 /
    maxUnavailable 0 (lws-semantics §f); percentages resolve against the role's replicas."""
    r = gate.replicas(role)
    ruc = ((role.get("spec") or {}).get("rolloutStrategy") or {}).get("rollingUpdateConfiguration")
    if not ruc:
        return Budget(1, 0)
    return Budget(resolve_int_or_percent(ruc.get("maxSurge"), r, round_up=True, default=0),
                  resolve_int_or_percent(ruc.get("maxUnavailable", 1), r, round_up=False, default=1))


def ds_plans(ds: Obj, pods: list[Obj], budgets: dict[str, Budget] | None = None,
             namespace: str | None = None) -> list[Plan]:
    """One plan per role of ``ds`` (its roles as given: the new ones) over the role's running groups.

    ``maxSurge`` applies per slice, so a DS with ``slices: n`` surges ``n`` times as many groups.
    """
    meta = ds.get("metadata") or {}
    slices = int((ds.get("spec") or {}).get("slices") or 1)
    targets = gate.ds_role_targets(ds)
    plans = []
    for role in (ds.get("spec") or {}).get("roles") or []:
        name = role["name"]
        b = (budgets or {}).get(name) or role_budget(role)
        groups = _groups(_in(pods, namespace or meta.get("namespace")),
                         {L.DS_NAME: meta.get("name", ""), L.DS_ROLE: name})
        # the DS scales an old LWS down from its highest ordinal
        old = [groups[k] for k in sorted(groups, key=lambda k: (k[0], -k[1]))]
        specs = group_pod_specs(role)
        plans.append(Plan(name, specs, targets[name],
                          Budget(b.max_surge * slices, b.max_unavailable * slices), old,
                          _old_gpus(old, specs), ds=True, pool=_pool_of(role)))
    return plans


# -- simulation --------------------------------------------------------------------------------------


class _Pool:
    """Free GPUs per node while the rollout is simulated."""

    def __init__(self, nodes: list[Obj], pods: list[Obj]) -> None:
        self.nodes = {n["metadata"]["name"]: n for n in nodes}
        self.free = free_gpus(nodes, pods)

    def place(self, specs: list[Obj]) -> Usage | None:
        """Place one whole group (gang) or nothing: first-fit decreasing, tightest node first."""
        trial = dict(self.free)
        use: Usage = {}
        for spec in sorted(specs, key=_gpu, reverse=True):
            need = _gpu(spec)
            fit = next((n for n, f in sorted(trial.items(), key=lambda kv: (kv[1], kv[0]))
                        if f >= need and _eligible(self.nodes[n], spec)), None)
            if fit is None:
                return None
            trial[fit] -= need
            use[fit] = use.get(fit, 0) + need
        self.free = trial
        return use

    def release(self, use: Usage) -> None:
        for n, g in use.items():
            if n in self.free:
                self.free[n] += g

    def eligible(self, specs: list[Obj]) -> dict[str, int]:
        """Free GPUs of the nodes that may hold the group's pods (its first GPU pod decides; a group
        without GPUs: its leader)."""
        if not specs:
            return {}
        spec = next((s for s in specs if _gpu(s) > 0), specs[0])
        return {n: f for n, f in self.free.items() if _eligible(self.nodes[n], spec)}


def simulate(plans: list[Plan], nodes: list[Obj], pods: list[Obj]) -> CapacityReport:
    """Play the rolling update of every plan (lockstep) on the node pool; the first shortfall wins."""
    pool = _Pool(nodes, pods)
    first = plans[0]
    before = {p.name: pool.eligible(p.specs) for p in plans}

    def report(p: Plan, fits: bool, surge_placed: int, replaced: int) -> CapacityReport:
        el = before[p.name]
        return CapacityReport(
            fits, p.budget.max_surge, surge_placed, p.gpus_per_group, sum(max(0, v) for v in el.values()),
            len(el), el, p.old_gpus_per_group, p.replicas, replaced, p.budget, p.name,
            max(1, p.budget.max_unavailable + p.budget.max_surge),
            sum(max(0, v) for v in pool.eligible(p.specs).values()), p.pool, p.subject)

    # 1. surge groups, all at once at the template change
    surge: dict[str, list[Usage]] = {}
    for p in plans:
        surge[p.name] = list(p.surge_present)
        if p.gpus_per_group == 0 or p.ds:
            continue
        while len(surge[p.name]) < p.budget.max_surge:
            use = pool.place(p.specs)
            if use is None:
                return report(p, False, len(surge[p.name]), 0)
            surge[p.name].append(use)
    # 2./3. replacements, interleaved by fraction done (DS roles move in lockstep)
    order = sorted(((k + 1) / max(1, p.replicas), i, k) for i, p in enumerate(plans)
                   for k in range(p.replicas))
    freed = dict.fromkeys(range(len(plans)), 0)
    for _frac, i, k in order:
        p = plans[i]
        if p.gpus_per_group == 0:
            continue
        window = max(1, p.budget.max_unavailable + p.budget.max_surge)
        # LWS: the window of W old groups goes down before their new groups come; DS: the planner
        # scales new up first and drains old only as far as the surge bound demands
        ahead = max(0, k + 1 - p.budget.max_surge) if p.ds else k + window
        while freed[i] < min(len(p.old_groups), ahead):
            pool.release(p.old_groups[freed[i]])
            freed[i] += 1
        u = p.replicas - k  # groups not replaced yet, this one included
        keep = p.budget.max_surge if u > p.budget.max_surge else max(0, u - p.budget.max_unavailable)
        while not p.ds and len(surge[p.name]) > keep:
            pool.release(surge[p.name].pop())
        if pool.place(p.specs) is None:
            if p.ds and k < p.budget.max_surge:  # a DS's first maxSurge new groups are its surge
                return report(p, False, k, 0)
            return report(p, False, p.budget.max_surge, k)
    worst = max(plans, key=lambda p: p.gpus_per_group) if plans else first
    return report(worst, True, worst.budget.max_surge, worst.replicas)


def check(lws: Obj, nodes: list[Obj], pods: list[Obj], budget: Budget | None = None,
          namespace: str | None = None) -> CapacityReport:
    """Whether rolling ``lws``'s (new) template with its budget (or ``budget``) fits right now."""
    return simulate([lws_plan(lws, pods, budget, namespace)], nodes, pods)


def check_ds(ds: Obj, nodes: list[Obj], pods: list[Obj],
             budgets: dict[str, Budget] | None = None, namespace: str | None = None) -> CapacityReport:
    """The same for every role of a DisaggregatedSet (per-role budgets, roles in lockstep)."""
    return simulate(ds_plans(ds, pods, budgets, namespace), nodes, pods)


def candidates(configured: Budget, replicas: int) -> list[Budget]:
    """``--auto-budget``'s fallbacks, most available first: less surge (surge needs GPUs nobody
    frees), then more groups down at once (frees more old GPUs per window); at least one group keeps
    serving."""
    out = [Budget(s, configured.max_unavailable if s else max(1, configured.max_unavailable))
           for s in range(configured.max_surge - 1, -1, -1)]
    out += [Budget(0, u) for u in range(max(1, configured.max_unavailable), max(1, replicas - 1) + 1)]
    return [b for b in dict.fromkeys(out) if b != configured]


def choose_budget(lws: Obj, nodes: list[Obj], pods: list[Obj],
                  namespace: str | None = None) -> tuple[Budget, CapacityReport] | None:
    """The first fallback budget whose simulation fits, or None."""
    plan = lws_plan(lws, pods, namespace=namespace)
    for b in candidates(plan.budget, plan.replicas):
        rep = simulate([replace(plan, budget=b)], nodes, pods)
        if rep.fits:
            return b, rep
    return None


def choose_ds_budgets(ds: Obj, nodes: list[Obj], pods: list[Obj], namespace: str | None = None
                      ) -> tuple[dict[str, Budget], CapacityReport] | None:
    """Per-role fallbacks: walk the failing role's candidates (the others as they are) until the
    whole DS fits, then the next failing role; None when no combination tried fits."""
    roles = (ds.get("spec") or {}).get("roles") or []
    budgets = {r["name"]: role_budget(r) for r in roles}
    reps = {r["name"]: int((r.get("spec") or {}).get("replicas") or 1) for r in roles}
    tried: set[str] = set()
    rep = check_ds(ds, nodes, pods, budgets, namespace)
    while not rep.fits and rep.role not in tried:
        tried.add(rep.role)
        for b in candidates(budgets[rep.role], reps[rep.role]):
            trial = check_ds(ds, nodes, pods, {**budgets, rep.role: b}, namespace)
            if trial.fits or trial.role != rep.role:
                budgets[rep.role] = b
                rep = trial
                break
    return (budgets, rep) if rep.fits else None


def _write_budget(spec_owner: Obj, budget: Budget) -> None:
    """Set ``budget`` in ``spec.rolloutStrategy.rollingUpdateConfiguration`` of an LWS or a DS role."""
    ruc = spec_owner.setdefault("spec", {}).setdefault("rolloutStrategy", {"type": "RollingUpdate"}) \
        .setdefault("rollingUpdateConfiguration", {})
    ruc["maxSurge"], ruc["maxUnavailable"] = budget.max_surge, budget.max_unavailable


def with_budget(lws: Obj, budget: Budget) -> Obj:
    """``lws`` with ``budget`` in its rollingUpdateConfiguration."""
    out = copy.deepcopy(lws)
    _write_budget(out, budget)
    return out


def ds_with_budgets(ds: Obj, budgets: dict[str, Budget]) -> Obj:
    """``ds`` with each role's budget written into its rollingUpdateConfiguration."""
    out = copy.deepcopy(ds)
    for role in out.get("spec", {}).get("roles") or []:
        b = budgets.get(role["name"])
        if b is not None:
            _write_budget(role, b)
    return out


def canary_fits(owners: list[Obj], nodes: list[Obj], pods: list[Obj]) -> CapacityReport:
    """Whether one extra group of each template in ``owners`` (LWS or DS roles: the P/D probe's canary
    groups, ``compat.py``) can be placed next to everything that runs now."""
    plans = [Plan(_role_of(o) or str(o.get("name") or i), group_pod_specs(o), 0, Budget(1, 0),
                  pool=_pool_of(o))
             for i, o in enumerate(owners)]
    return simulate(plans, nodes, pods)


def all_at_once(plans: list[Plan]) -> list[Plan]:
    """``plans`` switched in one step each: surge a full copy (maxSurge = replicas), take nothing down
    first (maxUnavailable 0), so the new groups come up beside the old ones and replace them at once."""
    return [replace(p, budget=Budget(p.replicas, 0)) for p in plans]


# -- blue-green: the new revision beside the old one -------------------------------------------------


@dataclass(frozen=True)
class BesideReport:
    """Whether every group of the new objects fits on the GPUs the running pods leave free.

    ``missing`` is GPUs per node pool (``pool X``, or the nodeSelector) that the groups which did not
    fit still need, counted as whole groups (gang: a group is placed whole or not at all).
    """

    fits: bool
    lines: list[str]
    missing: dict[str, int] = field(default_factory=dict)

    @property
    def message(self) -> str:
        text = "; ".join(self.lines)
        if self.fits:
            return f"both revisions fit: {text}"
        short = ", ".join(f"{g} GPUs in {p}" for p, g in sorted(self.missing.items()))
        return f"the new revision does not fit beside the old one: missing {short} ({text})"


def check_beside(objs: list[Obj], nodes: list[Obj], pods: list[Obj]) -> BesideReport:
    """Place every group of every object in ``objs`` (new LWS, or a new DS's roles, not running yet)
    beside ``pods``."""
    pool = _Pool(nodes, pods)
    lines: list[str] = []
    missing: dict[str, int] = {}
    for obj in objs:
        specs = group_pod_specs(obj)
        per_group = sum(_gpu(s) for s in specs)
        replicas = gate.replicas(obj)
        free = sum(max(0, v) for v in pool.eligible(specs).values())
        placed = 0
        while placed < replicas and (per_group == 0 or pool.place(specs) is not None):
            placed += 1
        name = f"{obj.get('kind') or 'LeaderWorkerSet'} {obj['metadata']['name']} ({_pool_of(obj)})"
        lines.append(f"{name}: {placed} of {replicas} group(s) x {per_group} GPUs placed in {free} free "
                     "GPUs")
        if placed < replicas:
            where = _pool_of(obj)
            missing[where] = missing.get(where, 0) + (replicas - placed) * per_group
    return BesideReport(not missing, lines, missing)
