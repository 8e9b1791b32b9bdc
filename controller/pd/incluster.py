"""A RolloutPolicy's ``pdProbe``: the cross-revision P/D compatibility probe before a pair's rollout.

GitOps has already applied the new templates (partitions frozen at replicas), so before the driver
starts a fresh rollout of a pair it runs the CLI's guard (``pd/guard.guard_pair``, one source):
the old revision is the one serving (the stable template the controller remembers as last-good), the
new one is what Git synced. The probe itself is components' (``components/pd_probe.py``), wired in by
``lwsflow controller run`` as the smoke and analysis hooks are: the controller never imports components.

The verdict goes to ``status.pdProbe`` (keyed by the pair's template hashes and the policy generation),
as an Event on the policy and to its webhooks. A refused template is held: nothing is written to the
pair and the loop does not start it again (no probe in a hot loop) until Git syncs another template or
the policy changes. A probe that could not run (its canaries did not fit or come up, or RBAC refused
them) is tried again after ``RETRY_NOT_RUN_S`` of cluster time.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Sequence
from typing import Any

from lwsflow.controller.api import labels as L
from lwsflow.controller.api.phases import ConditionType, PolicyPhase
from lwsflow.controller.api.wire import Obj
from lwsflow.controller.clock import Clock
from lwsflow.controller.errors import ApiError, Forbidden, OperationFailed
from lwsflow.controller.kube.client import Kube
from lwsflow.controller.kube.events import EventRecorder
from lwsflow.controller.kube.resources import ROLLOUT_POLICY
from lwsflow.controller.pd.compat import (
    CompatContext,
    CompatProbe,
    CompatResult,
    policy_hint,
)
from lwsflow.controller.pd.guard import guard_pair
from lwsflow.controller.policy.model import RolloutPolicySpec
from lwsflow.controller.rollout import state
from lwsflow.controller.rollout.options import RolloutOptions

log = logging.getLogger("lwsflow.controller.pd_probe")

PROBING, COMPATIBLE, ALL_AT_ONCE_VERDICT = "Probing", "Compatible", "AllAtOnce"
REFUSED, NOT_RUN = "Refused", "NotRun"
HOLDING = (REFUSED, NOT_RUN)  # verdicts that hold the template (nothing rolled)
RETRY_NOT_RUN_S = 300.0  # cluster seconds before a probe that could not run is tried again
RBAC_HINT = ("the probe creates and deletes its canary LeaderWorkerSets and lists nodes: bind the "
             "lwsflow-controller-pd-probe ClusterRole (kubectl apply -k overlays/controller/pdprobe)")
OnProbe = Callable[[Obj], None]  # receives each status.pdProbe record


def template_key(objs: Sequence[Obj]) -> str:
    """The pair's templates as one key (decode's hash, then prefill's: the order ``_targets`` gives)."""
    return ",".join(state.template_hash(state.template_of(o)) for o in objs)


def enabled(spec: RolloutPolicySpec) -> bool:
    return spec.pdProbe is not None and spec.pdProbe.enabled and spec.targetRef.kind == "LeaderWorkerSetPair"


def unavailable_probe() -> CompatProbe:
    """A policy asks for the probe but none is wired into this controller: never roll unprobed."""
    def probe(_ctx: CompatContext) -> CompatResult:
        return CompatResult(False, "no P/D probe is wired into this controller", ran=False)
    return probe


def _record(key: str, generation: int, verdict: str, message: str, now: float,
            failed: Sequence[str] = ()) -> Obj:
    return {"templateKey": key, "observedGeneration": generation, "verdict": verdict,
            "failed": list(failed), "message": message[:1000], "time": state.iso(now)}


def guard(kube: Kube, clock: Clock, namespace: str, spec: RolloutPolicySpec, opts: RolloutOptions,
          probe: CompatProbe | None, live: dict[str, Obj], generation: int,
          on_probe: OnProbe, last: Obj | None = None) -> RolloutOptions | None:
    """Probe a pair before its fresh rollout: the options to roll with (switched all at once when
    incompatible and configured so), or None when refused (recorded through ``on_probe``). ``last``
    (the policy's ``status.pdProbe``): a Compatible verdict on these templates under this generation
    is not probed again (a rollout that failed to start must not cost a canary model load per pass)."""
    assert spec.pdProbe is not None
    key = template_key([live["decode"], live["prefill"]])
    if last and last.get("verdict") == COMPATIBLE and last.get("templateKey") == key \
            and last.get("observedGeneration") == generation:
        return opts
    pair = spec.targetRef.name
    on_probe(_record(key, generation, PROBING, "probing the KV hand-off across revisions with a canary group "
                     "of the new revision per changed role", clock.now()))
    seen: list[CompatResult] = []

    def recorded(ctx: CompatContext) -> CompatResult:
        res = (probe or unavailable_probe())(ctx)
        seen.append(res)
        return res

    popts = dataclasses.replace(opts, pd_probe=recorded, on_incompatible=spec.pdProbe.onIncompatible)
    lines: list[str] = []
    try:
        out, switched = guard_pair(kube, clock, namespace, pair, popts, {}, live, lines.append,
                                   hint=policy_hint)
    except OperationFailed as exc:
        res = seen[-1] if seen else None
        verdict = NOT_RUN if res is None or not res.ran else REFUSED
        on_probe(_record(key, generation, verdict, str(exc), clock.now(), res.failed if res else ()))
        return None
    except ApiError as exc:  # e.g. 403 creating the canaries: the probe could not run, nothing was rolled
        why = f"{exc}; {RBAC_HINT}" if isinstance(exc, Forbidden) else str(exc)
        on_probe(_record(key, generation, NOT_RUN, f"pair/{pair} -n {namespace}: the cross-revision P/D "
                         f"probe could not run, so nothing was changed: {why}", clock.now()))
        return None
    res = seen[-1]
    if switched:  # guard_pair's last line names the switch and the capacity that holds it
        on_probe(_record(key, generation, ALL_AT_ONCE_VERDICT, f"{lines[-1]}. The probe: {res.detail}",
                         clock.now(), res.failed))
    else:
        on_probe(_record(key, generation, COMPATIBLE, res.detail, clock.now()))
    return dataclasses.replace(out, pd_probe=None)


def resumed(opts: RolloutOptions, live: dict[str, Obj]) -> RolloutOptions:
    """An interrupted all-at-once switch (a restart, a new leader) resumes as one: its single stage is
    persisted on both roles, not in the policy's stages (PairRollout sees ``together`` on the objects)."""
    sts = [state.RolloutState.from_object(o) for o in live.values()]
    if opts.stages != "100%" and all(st.active and st.stages == "100%" for st in sts):
        return dataclasses.replace(opts, stages="100%")
    return opts


def holds(status: Obj, objs: Sequence[Obj], generation: int, now: float) -> Obj | None:
    """The record that holds the pair's current templates (refused, or not run within the retry
    window) under this policy generation, if any."""
    rec = status.get("pdProbe") or {}
    if rec.get("verdict") not in HOLDING or rec.get("templateKey") != template_key(objs) \
            or rec.get("observedGeneration") != generation:
        return None
    if rec.get("verdict") == NOT_RUN:
        at = state.epoch(str(rec.get("time") or ""))
        if at is None or now - at >= RETRY_NOT_RUN_S:
            return None
    return dict(rec)


def probing(status: Obj, objs: Sequence[Obj], generation: int) -> bool:
    rec = status.get("pdProbe") or {}
    return (rec.get("verdict") == PROBING and rec.get("templateKey") == template_key(objs)
            and rec.get("observedGeneration") == generation)


def overlay(new: Obj, old: Obj, objs: Sequence[Obj], generation: int, now: float) -> Obj:
    """The derived status with the probe's word on it while no rollout runs: a held template reads
    ``Failed`` with the refusal (not the previous rollout's phase), a probe in flight ``Progressing``."""
    if state.any_active(objs):
        return new
    rec = holds(old, objs, generation, now)
    if rec is not None:
        phase, reason = PolicyPhase.FAILED, "PDProbe" + str(rec["verdict"])
    elif probing(old, objs, generation):
        phase, reason, rec = PolicyPhase.PROGRESSING, "PDProbeProbing", old["pdProbe"]
    else:
        return new
    msg = str(rec.get("message") or "")[:500]
    out = {**new, "phase": phase.value, "message": msg}
    conds: list[dict[str, Any]] = []
    prev = {c.get("type"): c for c in old.get("conditions") or []}
    for c in new.get("conditions") or []:
        status = "True" if c.get("type") == ConditionType.PROGRESSING and phase == PolicyPhase.PROGRESSING \
            else "False"
        before = prev.get(c.get("type")) or {}
        since = before.get("lastTransitionTime") if before.get("status") == status else state.iso(now)
        conds.append({**c, "status": status, "reason": reason, "message": msg,
                      "lastTransitionTime": since or state.iso(now)})
    out["conditions"] = conds
    return out


def overlaid(new: Obj) -> bool:
    """The status shows the probe (its transitions are the probe's Events, not a rollout's)."""
    return any(str(c.get("reason") or "").startswith("PDProbe") for c in new.get("conditions") or [])


def recorder(kube: Kube, events: EventRecorder, policy: Obj,
             notify: Callable[[str], None]) -> OnProbe:
    """Writes each record to ``status.pdProbe`` and announces verdicts (Event on the policy, webhooks)."""
    meta = policy["metadata"]

    def on_probe(rec: Obj) -> None:
        try:
            kube.merge_patch(ROLLOUT_POLICY, meta["namespace"], meta["name"], {"status": {"pdProbe": rec}},
                             field_manager=L.FIELD_MANAGER, subresource="status")
        except ApiError as exc:  # the next pass probes again when the record is missing: say so
            log.warning("%s/%s: status.pdProbe: %s", meta["namespace"], meta["name"], exc)
        verdict = str(rec["verdict"])
        if verdict == PROBING:
            return
        warning = verdict != COMPATIBLE
        events.emit(policy, f"PDProbe{verdict}", str(rec["message"])[:1000], warning=warning)
        if warning:
            notify(f"pd-probe {verdict}: {rec['message']}")
        log.info("%s/%s: pd-probe %s: %s", meta["namespace"], meta["name"], verdict, rec["message"])
    return on_probe
