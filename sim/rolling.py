"""The LWS rolling-update computation (lws-semantics.md §d) as a pure function.

LWS never deletes pods for an update: each reconcile it computes the leader StatefulSet's
``(partition, replicas)`` from the per-group states and lets the StatefulSet controller recreate
ordinals ``>= partition``, highest first. This module is that computation, free of any store so it
can be table-tested against the documented trace (R=4, U=1, S=1, P=2).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from lwsflow.controller.api import intstr


@dataclass(frozen=True)
class GroupState:
    """One group index as the LWS controller sees it: ready(group) and updated(group) of §c."""

    ready: bool
    updated: bool


@dataclass(frozen=True)
class RollingInput:
    """Everything ``compute`` reads: spec values, the leader sts now, and group states."""

    replicas: int  # R = spec.replicas
    max_unavailable: int | str  # int-or-percent, resolved against R rounding down
    max_surge: int | str  # int-or-percent, resolved against R rounding up, capped at R
    partition: int  # P = the user's partition (a floor)
    sts_exists: bool = True
    sts_partition: int = 0  # Ps
    sts_replicas: int = 0  # Rs
    template_changed: bool = False  # a new revision detected in this reconcile
    replicas_annotation: int | None = None  # the leader sts "replicas" annotation (R at last apply)
    groups: Sequence[GroupState] = ()  # index 0..Rs-1; missing pods => not ready, not updated


def surge_unavailable(inp: RollingInput) -> tuple[int, int]:
    """(S, U) as the controller resolves them (S capped at R)."""
    return intstr.max_surge(inp.max_surge, inp.replicas), intstr.max_unavailable(inp.max_unavailable,
                                                                                  inp.replicas)


def compute(inp: RollingInput) -> tuple[int, int]:
    """The leader StatefulSet's (partition, replicas), exactly as §d's pseudo-code."""
    p_user = inp.partition
    part, reps = _compute(inp)
    return max(part, p_user), reps


def _compute(inp: RollingInput) -> tuple[int, int]:
    r = inp.replicas
    s, u_max = surge_unavailable(inp)
    burst = r + s

    def want(u: int) -> int:
        # surge groups are kept while more than S groups lag, then reclaimed one by one
        return r + max(0, u - u_max) if u <= s else burst

    ps, rs = inp.sts_partition, inp.sts_replicas
    if not inp.sts_exists:  # 1
        return 0, r
    if inp.template_changed:  # 2: partition jumps up; scale-up first, surge only when at size
        return min(r, rs), (r if rs < r else want(r))
    if ps == 0 and rs == r:  # 3: at rest
        return 0, r
    if rs < r:
        return ps, r  # finish the scale-up with the partition frozen
    groups = list(inp.groups)[:rs] + [GroupState(False, False)] * max(0, rs - len(inp.groups))
    ok = [g.ready and g.updated for g in groups]
    u = sum(1 for i in range(min(r, rs)) if not ok[i])
    if inp.replicas_annotation is not None and r != inp.replicas_annotation:  # 4
        return min(ps, burst), want(u)
    step = u_max + (rs - r)  # 5: maxUnavailable plus surge groups currently present
    tail = 0
    for i in range(rs - 1, -1, -1):
        if not ok[i]:
            break
        tail += 1
    p0 = max(0, rs - tail - step)
    p = p0 + sum(1 for i in range(p0) if not groups[i].ready)  # unready groups consume the budget
    for i in range(min(p, rs - 1), p0 - 1, -1):
        if not groups[i].ready or groups[i].updated:
            p = i
        else:
            break
    return min(p, ps), want(u)
