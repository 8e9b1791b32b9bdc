"""The §f DS planner (ComputeNextStep) as a pure function: upstream step sequences."""

from __future__ import annotations

from lwsflow.sim.ds_planner import RoleVector, compute_next_step, role_limits


def run_plan(targets: dict[str, int], initial: dict[str, int], surge: int, unavail: int,
             new0: dict[str, int] | None = None) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    names = list(targets)
    old = [initial[n] for n in names]
    new = [(new0 or {}).get(n, 0) for n in names]
    seq = [(tuple(old), tuple(new))]
    for _ in range(100):
        step = compute_next_step([RoleVector(n, initial[n], o, w, targets[n], surge, unavail)
                                  for n, o, w in zip(names, old, new, strict=True)])
        if step is None:
            return seq
        old, new = list(step.old), list(step.new)
        seq.append((step.old, step.new))
    raise AssertionError("planner did not finish")


def test_medium_6_2_surge1_exact_sequence():
    """§f example / upstream planner_test medium_6_2_surge1: 12 steps, new counts round up."""
    seq = run_plan({"prefill": 6, "decode": 2}, {"prefill": 6, "decode": 2}, surge=1, unavail=0)
    assert seq == [
        ((6, 2), (0, 0)), ((6, 2), (1, 1)), ((5, 2), (1, 1)), ((5, 2), (2, 1)), ((4, 2), (2, 1)),
        ((4, 2), (3, 1)), ((3, 1), (3, 1)), ((3, 1), (4, 2)), ((2, 1), (4, 2)), ((2, 1), (5, 2)),
        ((1, 1), (5, 2)), ((1, 1), (6, 2)), ((0, 0), (6, 2)),
    ]
    assert len(seq) - 1 == 12


def test_force_drain_changes_old_and_new_together():
    """§f step 6: (old 8,8 | new 5,5) -> (5,5 | 8,8) as in large_10_10_surge3."""
    step = compute_next_step([RoleVector(n, 10, 8, 5, 10, 3, 0) for n in ("a", "b")])
    assert step is not None and step.old == (5, 5) and step.new == (8, 8)


def test_invariants_hold_on_every_step():
    """§f guarantees: old+new <= target+surge once scale-up began; >= target-unavail; completion."""
    targets = {"p": 10, "d": 4}
    seq = run_plan(targets, dict(targets), surge=2, unavail=1)
    for old, new in seq[1:]:
        for i, t in enumerate(targets.values()):
            assert old[i] + new[i] <= t + 2
            assert old[i] + new[i] >= t - 1
    assert seq[-1] == ((0, 0), (10, 4))


def test_role_limits_defaults_differ_from_lws():
    """§f per-role parameters: absent -> (1,0); only maxSurge:2 -> CRD unavailable 1 -> (2,1)."""
    assert role_limits(None, 6) == (1, 0)
    assert role_limits({"maxSurge": 2}, 6) == (2, 1)
    assert role_limits({"maxSurge": 1, "maxUnavailable": 0}, 6) == (1, 0)
    assert role_limits({"maxSurge": 0, "maxUnavailable": 0}, 6) == (1, 0)
    assert role_limits({"maxSurge": "50%", "maxUnavailable": "50%"}, 5) == (3, 2)


def test_done_returns_none():
    assert compute_next_step([RoleVector("a", 3, 0, 3, 3, 1, 0)]) is None
