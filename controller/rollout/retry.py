"""409 Conflict on a write: retry with jittered exponential backoff on the injected clock.

Every step of the rollout re-reads and re-plans, so a write that lost a race is safe to try again.
A fight with another writer must neither spin (50 immediate retries hammered the API server) nor
last forever: each retry waits ``base * 2**n`` cluster seconds (capped), scaled by a random factor
in [0.5, 1) so two controllers that collided do not collide again in lockstep, and the streak of
conflicts is bounded by the stage deadline (then the last 409 surfaces).
"""

from __future__ import annotations

import random

from lwsflow.controller.clock import Clock
from lwsflow.controller.errors import Conflict


class ConflictBackoff:
    """Call :meth:`wait` after each 409 (it sleeps, or raises past the deadline); :meth:`reset`
    after a step that went through."""

    def __init__(self, clock: Clock, *, deadline_s: float, base_s: float = 0.2, cap_s: float = 10.0,
                 rng: random.Random | None = None) -> None:
        self.clock, self.deadline_s, self.base_s, self.cap_s = clock, deadline_s, base_s, cap_s
        self.rng = rng or random.Random()
        self.retries = 0  # in the current streak
        self.total = 0  # over the rollout (reports)
        self._until: float | None = None
        self.slept: list[float] = []  # the waits, in cluster seconds (reports and tests)

    def wait(self, conflict: Conflict) -> None:
        """Back off before the next attempt; raises ``conflict`` once the streak passed the deadline."""
        now = self.clock.now()
        if self._until is None:
            self._until = now + max(self.deadline_s, 0.0)
        left = self._until - now
        if left <= 0:
            raise conflict
        delay = min(self.cap_s, self.base_s * 2 ** self.retries) * self.rng.uniform(0.5, 1.0)
        delay = min(delay, left)
        self.retries += 1
        self.total += 1
        self.slept.append(delay)
        self.clock.sleep(delay)

    def reset(self) -> None:
        self.retries, self._until = 0, None
