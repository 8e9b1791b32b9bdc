"""The stage gate: does the cluster prove a stage healthy? (pure, on the wire-form dicts)

The verdict belongs to :mod:`lwsflow.controller.api.status`, the one source of truth for the LWS
and DS semantics (lws-semantics §c, §f): a stage passes when ``lws_stage_complete`` holds at the
stage's partition (observed generation, ``Available`` for this generation, no ``UpdateInProgress``,
every group including surge ready, the non-surge updated count at the target), the last stage when
``lws_fully_rolled`` holds (the full equality, which also proves the surge groups were reclaimed).
This module only names the predicate that failed and prints the counters it read.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from lwsflow.controller.api import intstr, wire
from lwsflow.controller.api import labels as L
from lwsflow.controller.api import status as apistatus
from lwsflow.controller.api.wire import Obj


@dataclass(frozen=True)
class GateResult:
    """Whether a gate passed, and every check with its observed numbers (for events and reports)."""

    passed: bool
    checks: dict[str, bool] = field(default_factory=dict)
    detail: str = ""

    def failing(self) -> list[str]:
        return [k for k, ok in self.checks.items() if not ok]


def _ruc(obj: Obj) -> Obj:
    return ((obj.get("spec") or {}).get("rolloutStrategy") or {}).get("rollingUpdateConfiguration") or {}


def replicas(obj: Obj) -> int:
    """``spec.replicas`` with the CRD default of 1."""
    r = (obj.get("spec") or {}).get("replicas")
    return 1 if r is None else int(r)


def partition(obj: Obj) -> int:
    """The user partition (``rollingUpdateConfiguration.partition``, default 0)."""
    return int(_ruc(obj).get("partition") or 0)


def max_surge(obj: Obj) -> int:
    """Resolved maxSurge (percent rounds up, capped at replicas), as the LWS controller computes it."""
    return intstr.max_surge(_ruc(obj).get("maxSurge"), replicas(obj))


def max_unavailable(obj: Obj) -> int:
    """Resolved maxUnavailable (percent rounds down, default 1)."""
    return intstr.max_unavailable(_ruc(obj).get("maxUnavailable"), replicas(obj))


def floor(obj: Obj) -> int:
    """The availability floor: ready groups must not drop below ``replicas - maxUnavailable``."""
    return max(0, replicas(obj) - max_unavailable(obj))


def _generation(obj: Obj) -> int:
    return int(wire.metadata(obj).get("generation") or 0)


def _observed_generation(obj: Obj) -> int:
    return int(wire.status(obj).get("observedGeneration") or 0)


def counters(obj: Obj) -> dict[str, int]:
    """The numbers the gate reads, in one dict (reports and events print it)."""
    st = wire.status(obj)
    r = replicas(obj)
    sreplicas = int(st.get("replicas") or 0)
    updated = int(st.get("updatedReplicas") or 0)
    surge = max(0, sreplicas - r)
    return {
        "generation": _generation(obj),
        "observedGeneration": _observed_generation(obj),
        "specReplicas": r,
        "replicas": sreplicas,
        "readyReplicas": int(st.get("readyReplicas") or 0),
        "updatedReplicas": updated,
        "surge": surge,
        # updatedReplicas counts surge groups (they are created on the new template): take them out
        "updatedNonSurge": max(0, updated - surge),
        "partition": partition(obj),
    }


def status_current(obj: Obj) -> bool:
    """The status (of an LWS or a DS) was computed for the current generation."""
    return _observed_generation(obj) == _generation(obj)


def pod_ready(pod: Obj) -> bool:
    """The pod's Ready condition is True."""
    return any(cond.get("type") == "Ready" and cond.get("status") == "True"
               for cond in (pod.get("status") or {}).get("conditions") or [])


def lws_stage_gate(obj: Obj, target_groups: int) -> GateResult:
    """Gate for a stage that must have ``target_groups`` highest-ordinal groups updated and ready.

    The verdict is :mod:`lwsflow.controller.api.status`'s (``lws_fully_rolled`` at the last stage,
    else ``lws_stage_complete`` at the stage's partition); its named checks say which failed.
    """
    c = counters(obj)
    if target_groups >= c["specReplicas"]:
        checks = apistatus.lws_fully_rolled_checks(obj)
    else:
        checks = apistatus.lws_stage_checks(obj, c["specReplicas"] - target_groups)
    detail = (f"target={target_groups} replicas={c['replicas']}/{c['specReplicas']} "
              f"ready={c['readyReplicas']} updated={c['updatedReplicas']} surge={c['surge']} "
              f"gen={c['observedGeneration']}/{c['generation']}")
    return GateResult(all(checks.values()), checks, detail)


def lws_fully_rolled(obj: Obj) -> GateResult:
    """The last-stage gate (also used to confirm a rollback): every group updated and ready."""
    return lws_stage_gate(obj, replicas(obj))


def ds_role_targets(obj: Obj) -> dict[str, int]:
    """Desired groups per DS role: ``replicas`` (default 1) times ``slices`` (Static roles)."""
    spec = obj.get("spec") or {}
    slices = int(spec.get("slices") or 1)
    return {role["name"]: replicas(role) * slices for role in spec.get("roles") or []}


CHILDREN_SOURCE = "read from the child LWS (the DS writes no status)"


def ds_gate(obj: Obj, children: list[Obj] | None = None) -> GateResult:
    """DS gate: ``status.ds_fully_rolled`` (per role ``desired == replicas == ready == updated``, §f,
    Available for this generation), with one named check per predicate and role.

    A DS without a controller-written status (upstream v0.9.0/v0.10.0 write none, §f "Status") is
    judged on its ``children`` (the LWS it owns) by ``status.ds_children_checks`` when they are given;
    the detail then says so and names the child and predicate that failed.
    """
    if children is not None and not apistatus.ds_status_written(obj):
        checks = apistatus.ds_children_checks(obj, children)
        ready = ds_role_ready_groups(obj, children)
        parts = [f"{name}={ready.get(name, 0)} ready of {desired}"
                 for name, desired in ds_role_targets(obj).items()]
        why = apistatus.explain_ds_children(obj, children)
        return GateResult(all(checks.values()), checks, f"{CHILDREN_SOURCE}: {' '.join(parts)}"
                          + ("" if why == "done" else f"; {why}"))
    checks = apistatus.ds_fully_rolled_checks(obj)
    roles = {r.get("name"): r for r in wire.status(obj).get("roleStatuses") or []}
    parts = []
    for name, desired in ds_role_targets(obj).items():
        rs = roles.get(name) or {}
        parts.append(f"{name}={int(rs.get('replicas') or 0)}/{int(rs.get('readyReplicas') or 0)}/"
                     f"{int(rs.get('updatedReplicas') or 0)} of {desired}")
    return GateResult(all(checks.values()), checks, " ".join(parts))


def ds_role_ready_groups(obj: Obj, children: list[Obj] | None = None) -> dict[str, int]:
    """Ready groups per role from ``status.roleStatuses``, or summed over ``children`` (every revision,
    as upstream's roleStatuses sum them) for a DS without a status."""
    if children is not None and not apistatus.ds_status_written(obj):
        out: dict[str, int] = {}
        for c in children:
            role = wire.labels_of(c).get(L.DS_ROLE, "")
            out[role] = out.get(role, 0) + int(wire.status(c).get("readyReplicas") or 0)
        return out
    return {r.get("name", ""): int(r.get("readyReplicas") or 0)
            for r in wire.status(obj).get("roleStatuses") or []}


def summary(obj: Obj) -> dict[str, int | str]:
    """A compact status line for logs: counters plus condition states."""
    out: dict[str, int | str] = dict(counters(obj))
    for t in (L.COND_AVAILABLE, L.COND_PROGRESSING, L.COND_UPDATE_IN_PROGRESS):
        cond = apistatus.get_condition(obj, t)
        out[t] = cond.get("status", "-") if cond else "-"
    return out
