"""Before a P/D rollout mixes revisions: run the compatibility probe and act on its verdict (compat.py).

Called by ``session.run`` before the first write of a fresh rollout of a pair or a DisaggregatedSet.
Compatible (or nothing to mix): the rollout goes on as asked. Incompatible: refused with the blue-green
recommendation (``OperationFailed``, nothing written), or with ``on_incompatible="all-at-once"`` each
role gets ``maxSurge = replicas, maxUnavailable = 0`` and the pair one stage with both roles moving
together, once the node pool is shown to hold a full second copy of every role at the same time.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable

from lwsflow.controller.api import labels as L
from lwsflow.controller.api.wire import Obj
from lwsflow.controller.clock import Clock
from lwsflow.controller.errors import InvalidInput, OperationFailed
from lwsflow.controller.kube.client import Kube
from lwsflow.controller.kube.resources import LWS, NODE, POD
from lwsflow.controller.pd.compat import (
    DS_NEEDS_MANIFEST,
    ON_INCOMPATIBLE,
    REFUSE,
    CompatContext,
    CompatResult,
    Hint,
    RoleRevision,
    blue_green_hint,
    refusal,
)
from lwsflow.controller.rollout import capacity, gate, state
from lwsflow.controller.rollout.options import RolloutOptions

PD_ROLES = ("prefill", "decode")
Log = Callable[[str], None]


def _fingerprint(template: object) -> str:
    return hashlib.sha256(json.dumps(template, sort_keys=True).encode()).hexdigest()


def _cluster(kube: Kube) -> tuple[list[Obj], list[Obj]]:
    nodes, _ = kube.list(NODE)
    pods, _ = kube.list(POD, field_selector="status.phase!=Succeeded,status.phase!=Failed")
    return nodes, pods


def _probe(opts: RolloutOptions, ctx: CompatContext, cli_target: str, log: Log, hint: Hint) -> CompatResult:
    assert opts.pd_probe is not None
    if opts.on_incompatible not in ON_INCOMPATIBLE:  # before the probe writes its canaries
        raise InvalidInput(f"must be one of {', '.join(ON_INCOMPATIBLE)}, got {opts.on_incompatible!r}",
                           field="on_incompatible")
    res = opts.pd_probe(ctx)
    log(f"pd-probe: {res.detail}")
    if res.ok:
        return res
    if not res.ran or opts.on_incompatible == REFUSE:
        raise OperationFailed(refusal(cli_target, ctx.namespace, res, hint))
    return res


def _no_fit(cli_target: str, namespace: str, res: CompatResult,
            rep: capacity.CapacityReport, hint: Hint) -> OperationFailed:
    return OperationFailed(
        f"{cli_target} -n {namespace}: refused, nothing changed: the revisions cannot hand KV off "
        f"({'; '.join(res.failed)}) and all-at-once needs a full second copy of each role at once, "
        f"which does not fit: {rep.message}; {hint(cli_target, namespace)}")


def guard_pair(kube: Kube, clock: Clock, namespace: str, pair: str, opts: RolloutOptions,
               docs: dict[str, Obj], live: dict[str, Obj], log: Log,
               hint: Hint = blue_green_hint) -> tuple[RolloutOptions, bool]:
    """Probe a pair before its rollout starts; returns the options to roll with and whether the
    all-at-once switch (with its joint capacity check) was made. ``docs`` gain the switched budgets."""
    roles = {}
    for role in PD_ROLES:
        doc = docs.get(role)
        now = state.template_hash(state.template_of(live[role]))
        if doc is not None:
            changed = state.template_hash(state.template_of(doc)) != now
        else:  # GitOps applied the template: unchanged only if it is the last one that succeeded
            last_good = state.RolloutState.from_object(live[role]).last_good
            changed = not last_good or state.template_hash(state.unpack(last_good)) != now
        roles[role] = RoleRevision(role, doc or live[role], f"{L.NAME}={live[role]['metadata']['name']}",
                                   changed)
    cli = f"pair/{pair}"
    res = _probe(opts, CompatContext("LeaderWorkerSetPair", namespace, pair, roles, clock, opts.deadline_s),
                 cli, log, hint)
    if res.ok:
        return opts, False
    nodes, pods = _cluster(kube)
    plans = [capacity.lws_plan(docs.get(r) or live[r], pods, namespace=namespace) for r in PD_ROLES]
    rep = capacity.simulate(capacity.all_at_once(plans), nodes, pods)
    if not rep.fits:
        raise _no_fit(cli, namespace, res, rep, hint)
    for role in PD_ROLES:
        budget = capacity.Budget(gate.replicas(docs.get(role) or live[role]), 0)
        if role in docs:
            docs[role] = capacity.with_budget(docs[role], budget)
        else:  # GitOps: the template is applied; the budget changes on the live object
            kube.merge_patch(LWS, namespace, live[role]["metadata"]["name"], {"spec": {"rolloutStrategy": {
                "rollingUpdateConfiguration": {"maxSurge": budget.max_surge, "maxUnavailable": 0}}}},
                field_manager=L.FIELD_MANAGER)
    log(_switched_line(res, rep))
    return dataclasses.replace(opts, stages="100%", together=True), True


def guard_ds(kube: Kube, clock: Clock, namespace: str, name: str, opts: RolloutOptions, doc: Obj | None,
             live: Obj, log: Log) -> tuple[Obj | None, bool]:
    """Probe a DisaggregatedSet before its rollout applies the new roles; returns the manifest to apply
    (with all-at-once budgets when switched) and whether it was switched (capacity checked)."""
    if doc is None:
        raise InvalidInput(DS_NEEDS_MANIFEST,
                           field="--pd-probe")
    old = {r.get("name"): r for r in (live.get("spec") or {}).get("roles") or []}
    roles = {}
    for role in (doc.get("spec") or {}).get("roles") or []:
        rname = role.get("name")
        if rname not in PD_ROLES:
            continue
        lwt = (role.get("spec") or {}).get("leaderWorkerTemplate")
        before = ((old.get(rname) or {}).get("spec") or {}).get("leaderWorkerTemplate")
        roles[rname] = RoleRevision(rname, role, f"{L.DS_NAME}={name},{L.DS_ROLE}={rname}",
                                    _fingerprint(lwt) != _fingerprint(before))
    cli = f"ds/{name}"
    res = _probe(opts, CompatContext("DisaggregatedSet", namespace, name, roles, clock, opts.deadline_s),
                 cli, log, blue_green_hint)
    if res.ok:
        return doc, False
    budgets = {r["name"]: capacity.Budget(gate.replicas(r), 0)
               for r in (doc.get("spec") or {}).get("roles") or []}
    switched = capacity.ds_with_budgets(doc, budgets)
    nodes, pods = _cluster(kube)
    rep = capacity.check_ds(switched, nodes, pods, namespace=namespace)
    if not rep.fits:
        raise _no_fit(cli, namespace, res, rep, blue_green_hint)
    log(_switched_line(res, rep))
    return switched, True


def _switched_line(res: CompatResult, rep: capacity.CapacityReport) -> str:
    """One wording for a pair's and a DisaggregatedSet's switch (the in-cluster status quotes it)."""
    return (f"pd-probe: revisions incompatible ({'; '.join(res.failed)}); all-at-once: each role switches "
            f"in one step with a full surge: {rep.message}")
