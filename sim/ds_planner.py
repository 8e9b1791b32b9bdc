"""The DisaggregatedSet cross-role rollout planner, ComputeNextStep (lws-semantics.md §f), pure.

Given per-role vectors (initial old replicas, current old, current new, target, maxSurge,
maxUnavailable) it returns the next (old, new) vectors or None when the rollout is done. Checks run
in order and the first that changes something wins: done, correct, final drain, scale up new,
proportional drain, force drain. Reproduces upstream test ``medium_6_2_surge1``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from lwsflow.controller.api.intstr import resolve


@dataclass(frozen=True)
class RoleVector:
    """One role's counts as the planner sees them (old = all old revisions summed)."""

    name: str
    initial_old: int
    old: int
    new: int
    target: int
    max_surge: int
    max_unavailable: int


@dataclass(frozen=True)
class Step:
    """The next replica counts per role, for the old revisions and the new one."""

    old: tuple[int, ...]
    new: tuple[int, ...]


def role_limits(rolling: dict | None, target: int) -> tuple[int, int]:
    """(maxSurge, maxUnavailable) as the DS planner reads a role's rollingUpdateConfiguration.

    Absent: (1, 0), unlike LWS. Present: CRD defaults fill the gaps (surge 0, unavailable 1); if
    unavailable > 0 both are used; elif surge > 0 only surge; else the (1, 0) default.
    """
    if rolling is None:
        return 1, 0
    surge = resolve(rolling.get("maxSurge", 0), target, round_up=True, default=0)
    unavail = resolve(rolling.get("maxUnavailable", 1), target, round_up=False, default=1)
    if unavail > 0:
        return surge, unavail
    if surge > 0:
        return surge, 0
    return 1, 0


def batch_size(r: RoleVector) -> int:
    return r.max_surge if r.max_surge > 0 else max(1, r.max_unavailable)


def total_steps(roles: Sequence[RoleVector]) -> int:
    return max([math.ceil(max(r.initial_old, r.target) / batch_size(r)) for r in roles] or [1]) or 1


def compute_next_step(roles: Sequence[RoleVector]) -> Step | None:
    """The next (old, new) per role, or None when every role has old 0 and new >= target."""
    n = len(roles)
    old = [r.old for r in roles]
    new = [r.new for r in roles]
    if all(r.old == 0 and r.new >= r.target for r in roles):  # 1 done
        return None
    if any(r.old > r.initial_old for r in roles):  # 2 correct
        return Step(tuple(min(r.old, r.initial_old) for r in roles), tuple(new))
    if all(r.new >= r.target for r in roles):  # 3 final drain
        return Step((0,) * n, tuple(new))
    t = total_steps(roles)
    # 4 scale up new: the lagging role sets the pace
    k = min((r.new * t) // r.target for r in roles if r.target > 0) if any(r.target for r in roles) else 0
    next_new = [max(r.new, min(r.target, math.ceil((k + 1) * r.target / t))) for r in roles]
    if next_new != new and all(
        r.old + nn <= r.target + r.max_surge for r, nn in zip(roles, next_new, strict=True) if r.target > 0
    ):
        return Step(tuple(old), tuple(next_new))
    # 5 proportional drain of old: the leading role sets the pace
    kd = (
        max(((r.initial_old - r.old) * t) // r.initial_old for r in roles if r.initial_old > 0)
        if any(r.initial_old for r in roles)
        else 0
    )
    drained = []
    for r in roles:
        want = r.initial_old - ((kd + 1) * r.initial_old) // t if r.initial_old > 0 else 0
        drained.append(min(r.old, max(want, _min_old(r, r.new))))
    drained = _no_orphans(roles, drained, new)
    if drained != old:
        return Step(tuple(drained), tuple(new))
    # 6 force drain, together with the scale-up it makes room for
    forced = [
        min(r.old, max(r.target + r.max_surge - nn, _min_old(r, r.new), 0))
        for r, nn in zip(roles, next_new, strict=True)
    ]
    forced = _no_orphans(roles, forced, next_new)
    if forced != old or next_new != new:
        return Step(tuple(forced), tuple(next_new))
    return None


def _min_old(r: RoleVector, new: int) -> int:
    if r.initial_old < r.target:
        return 0
    return max(0, r.target - r.max_unavailable - new)


def _no_orphans(roles: Sequence[RoleVector], old: list[int], new: Sequence[int]) -> list[int]:
    """An old revision goes away as a whole: all roles reach 0 together, or none does."""
    zeros = [i for i, v in enumerate(old) if v == 0]
    if not zeros or len(zeros) == len(old):
        return old
    if all(nv >= r.target - r.max_unavailable for r, nv in zip(roles, new, strict=True)):
        return [0] * len(old)
    return [1 if (v == 0 and roles[i].old > 0) else v for i, v in enumerate(old)]
