"""A controller clock for in-process tests that skip the embedded cluster's virtual time.

``ClusterClock`` (what ``env.clock()`` gives) reads ``GET /lwsflow/v1/clock`` every half wall second and
turns a wait of N cluster seconds into one wait of N/speed wall seconds: a rollout baking 20 virtual
minutes sits in one 6 s watch, and a test's ``cluster.advance(1200)`` does not end it. ``SkipClock``
reads the cluster's own clock in process (exact) and never lets one wait run longer than ``slice_s`` wall
seconds, so the engine looks at the time again soon after a skip. Not for tests of server-directed
waits (a 429's Retry-After is bounded by ``wall`` of the stage's time left, which this cuts short).
"""

from __future__ import annotations

import time

from lwsflow.sim.cluster import Cluster


class SkipClock:
    """The engine's ``Clock`` on ``cluster``'s virtual time, running at ``speed`` virtual s per wall s."""

    def __init__(self, cluster: Cluster, speed: float, slice_s: float = 0.1) -> None:
        self._cluster = cluster
        self.speed = speed
        self._slice = slice_s

    def now(self) -> float:
        return self._cluster.now()

    def wall(self, seconds: float) -> float:
        return min(self._slice, max(0.0, seconds) / self.speed)

    def sleep(self, seconds: float) -> None:
        end = self.now() + max(0.0, seconds)
        while (left := end - self.now()) > 0:
            time.sleep(self.wall(left))
