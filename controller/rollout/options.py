"""How to roll: the options one rollout runs with (stages, bake, deadline, guards, hooks)."""

from __future__ import annotations

from dataclasses import dataclass, field

from lwsflow.controller.pd.compat import REFUSE, CompatProbe
from lwsflow.controller.rollout.hooks import Hook


@dataclass
class RolloutOptions:
    """How to roll: stages, per-stage bake and progress deadline (cluster seconds), guards, hooks."""

    stages: str = "1,25%,50%,100%"
    bake_s: float = 0.0
    deadline_s: float = 1800.0
    no_rollback: bool = False
    floor_grace_s: float = 60.0  # ready groups may dip below the floor this long (a crash recreating)
    max_regates: int = 3  # equality lost during bake this many times -> the stage fails
    hooks: list[Hook] = field(default_factory=list)
    # Write the next stage's partition in the same request that records a passed stage (lowest
    # reaction latency). The P/D coordinator turns it off to interleave the two roles.
    chain_partitions: bool = True
    # Group targets per stage, when the caller resolved them (P/D roles share the fractions).
    targets: list[int] | None = None
    # Report a failed stage without rolling back: the P/D coordinator orders the rollback itself.
    defer_failure: bool = False
    # Start again with a manifest whose last rollout ended rolled back / aborted / failed.
    retry: bool = False
    # Per-stage bake (cluster seconds) and checks, index = stage (a RolloutPolicy's stages); None:
    # ``bake_s`` and ``hooks`` for every stage. Stage hooks run after ``hooks``.
    stage_bakes: list[float] | None = None
    stage_hooks: list[list[Hook]] | None = None
    # P/D targets: probe the KV hand-off across revisions before any mixing (compat.py); when it fails,
    # refuse (default) or switch each role to all-at-once ("all-at-once").
    pd_probe: CompatProbe | None = None
    on_incompatible: str = REFUSE
    # P/D pair: lower both roles' partitions before gating either (the all-at-once switch), instead of
    # decode first, then prefill
    together: bool = False
