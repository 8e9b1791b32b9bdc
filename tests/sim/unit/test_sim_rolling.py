"""Table tests of the pure §d rolling-update computation (sim/rolling.py)."""

from __future__ import annotations

import pytest

from lwsflow.sim.rolling import GroupState, RollingInput, compute

O_READY = GroupState(ready=True, updated=False)  # o+
O_DOWN = GroupState(ready=False, updated=False)  # o-
N_READY = GroupState(ready=True, updated=True)  # N+
N_DOWN = GroupState(ready=False, updated=True)  # N-


def inp(groups, *, r=4, u=1, s=1, p=0, ps=0, rs=None, changed=False, ann=None, exists=True) -> RollingInput:
    return RollingInput(replicas=r, max_unavailable=u, max_surge=s, partition=p, sts_exists=exists,
                        sts_partition=ps, sts_replicas=len(groups) if rs is None else rs,
                        template_changed=changed, replicas_annotation=r if ann is None else ann,
                        groups=groups)


def test_worked_trace_r4_u1_s1_p2():
    """§d worked trace (R=4, U=1, S=1, P=2): (4,5) -> (2,5) -> stays (2,5) with the surge group kept."""
    # tick 0: template change at rest; surge group created, partition at R
    assert compute(inp([O_READY] * 4, p=2, ps=0, changed=True)) == (4, 5)
    # surge group not ready yet: the window does not move (tail run empty, partition max(3, P)=3 <= Ps)
    assert compute(inp([O_READY] * 4 + [N_DOWN], p=2, ps=4)) == (3, 5)
    # tick 1: surge group ready: step = U + 1 surge = 2, partition drops to 2
    assert compute(inp([O_READY] * 4 + [N_READY], p=2, ps=4)) == (2, 5)
    assert compute(inp([O_READY, O_READY, N_DOWN, N_DOWN, N_READY], p=2, ps=2)) == (2, 5)
    # stage done: 2 old groups lag (u=2 > S), so the surge group is kept until P=0
    assert compute(inp([O_READY, O_READY, N_READY, N_READY, N_READY], p=2, ps=2)) == (2, 5)


def test_one_group_at_a_time_without_surge():
    """§d Order: U=1, S=0 updates 3, 2, 1, 0, the window only moving when the tail is ready+updated."""
    assert compute(inp([O_READY] * 4, s=0, ps=0, changed=True)) == (4, 4)
    assert compute(inp([O_READY] * 4, s=0, ps=4)) == (3, 4)
    assert compute(inp([O_READY] * 3 + [N_DOWN], s=0, ps=3)) == (3, 4)
    assert compute(inp([O_READY] * 3 + [N_READY], s=0, ps=3)) == (2, 4)
    assert compute(inp([O_READY] * 2 + [N_READY] * 2, s=0, ps=2)) == (1, 4)
    assert compute(inp([N_READY] * 4, s=0, ps=0, rs=4)) == (0, 4)


@pytest.mark.parametrize(("r", "s", "u", "want"), [(2, 2, 1, 3), (4, 1, 1, 5), (3, 5, 0, 6), (1, 1, 1, 1)])
def test_surge_created_on_template_change(r, s, u, want):
    """§d Surge creation: replicas = want(R): R+S when R > S, else R + max(0, R-U) (2,2,1 -> 3)."""
    assert compute(inp([O_READY] * r, r=r, s=s, u=u, changed=True))[1] == want


def test_surge_reclaimed_progressively():
    """§d Surge reclaim: once u <= S, replicas = R + max(0, u - U)."""
    r, s, u = 4, 2, 1
    assert compute(inp([O_READY] * 3 + [N_READY] * 3, r=r, s=s, u=u, ps=3))[1] == 6  # u=3 > S
    assert compute(inp([O_READY] * 2 + [N_READY] * 4, r=r, s=s, u=u, ps=2))[1] == 5  # u=2: R+1
    assert compute(inp([O_READY] + [N_READY] * 5, r=r, s=s, u=u, ps=1))[1] == 4  # u=1: R


def test_initial_partition_without_surge_moves_r_then_r_minus_u():
    """§d Initial partition: 6 replicas, partition 4: 6 -> 5 -> 4."""
    first = compute(inp([O_READY] * 6, r=6, s=0, p=4, ps=4, changed=True))
    assert first == (6, 6)
    second = compute(inp([O_READY] * 6, r=6, s=0, p=4, ps=6))
    assert second == (5, 6)
    third = compute(inp([O_READY] * 5 + [N_READY], r=6, s=0, p=4, ps=5))
    assert third == (4, 6)


def test_unready_groups_consume_the_budget_and_all_unready_does_not_stick():
    """§d Unhealthy groups before a rollout (PR #488) and all-unready walk-down (#567/#568)."""
    # group 0 unready: p0 = 3, plus one unready below -> 4: nothing moves yet
    assert compute(inp([O_DOWN, O_READY, O_READY, O_READY], s=0, ps=4)) == (4, 4)
    # every old group unready: the walk-down lets the partition move through them, not stick
    assert compute(inp([O_DOWN] * 4, s=0, ps=4)) == (3, 4)
    assert compute(inp([O_DOWN] * 3 + [N_READY], s=0, ps=3)) == (2, 4)
    assert compute(inp([O_DOWN] * 2 + [N_READY] * 2, s=0, ps=2)) == (1, 4)


def test_scale_up_first_and_replicas_changed_holds_partition():
    """§d: no sts -> (0,R); Rs < R -> scale up with partition frozen; R changed -> hold partition."""
    assert compute(inp([], exists=False, r=3, p=1)) == (1, 3)  # post-processed by max(., P)
    assert compute(inp([O_READY] * 2, r=4, s=0, ps=2)) == (2, 4)
    # replicas lowered 6 -> 4 mid-rollout with S=1: partition clamped to burst, replicas want(u)
    g = [O_READY] * 4 + [N_READY] * 2
    assert compute(inp(g, r=4, s=1, ps=5, ann=6)) == (5, 5)


def test_partition_at_or_above_replicas_freezes_groups():
    """§d Manual partition: P >= R pauses every existing group; with S>0 surge groups still appear."""
    assert compute(inp([O_READY] * 4, s=0, p=4, changed=True)) == (4, 4)
    assert compute(inp([O_READY] * 4, s=0, p=4, ps=4)) == (4, 4)
    assert compute(inp([O_READY] * 4, s=1, p=4, changed=True)) == (4, 5)  # canary of S groups


def test_template_change_mid_rollout_jumps_partition_back():
    """§d Template changed mid-rollout: case 2 again, partition back to min(R, Rs)."""
    assert compute(inp([O_READY, O_READY, N_READY, N_READY, N_DOWN], ps=2, changed=True)) == (4, 5)
