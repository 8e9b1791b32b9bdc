"""Virtual time for the embedded cluster: a clock plus a due-time heap of callbacks.

Like kwok's delaying queue: nothing sleeps; the loop jumps virtual time straight to the next due
item, so a 10-minute model load costs one heap pop. Timers are cancellable by token (a kubelet
cancels a pending "container started" when its pod is deleted).
"""

from __future__ import annotations

import heapq
import itertools
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

FIXED_EPOCH = 1_767_225_600.0  # 2026-01-01T00:00:00Z: deterministic timestamps across runs


@dataclass(order=True)
class _Timer:
    due: float
    seq: int
    fn: Callable[[], None] = field(compare=False)
    cancelled: bool = field(default=False, compare=False)


class VirtualClock:
    """Virtual epoch seconds and the timers due at them. Timers may be added from any thread (a
    fault injected while the wall-clock loop runs); time itself is moved by the cluster loop."""

    def __init__(self, now0: float = FIXED_EPOCH) -> None:
        self._now = float(now0)
        self.start = float(now0)
        self._heap: list[_Timer] = []
        self._seq = itertools.count()
        self._lock = threading.Lock()
        self.fired = 0  # timers run so far (for events/s figures)

    def now(self) -> float:
        return self._now

    def elapsed(self) -> float:
        return self._now - self.start

    def call_at(self, due: float, fn: Callable[[], None]) -> _Timer:
        with self._lock:
            timer = _Timer(max(due, self._now), next(self._seq), fn)
            heapq.heappush(self._heap, timer)
        return timer

    def call_later(self, delay: float, fn: Callable[[], None]) -> _Timer:
        return self.call_at(self._now + max(0.0, delay), fn)

    @staticmethod
    def cancel(timer: _Timer | None) -> None:
        if timer is not None:
            timer.cancelled = True

    def next_due(self) -> float | None:
        with self._lock:
            while self._heap and self._heap[0].cancelled:
                heapq.heappop(self._heap)
            return self._heap[0].due if self._heap else None

    def set(self, t: float) -> None:
        """Move time forward (never back) without running anything."""
        self._now = max(self._now, t)

    def pop_due(self) -> list[Callable[[], None]]:
        """Timers due at or before now, in due/insertion order."""
        out = []
        with self._lock:
            while self._heap and self._heap[0].due <= self._now:
                t = heapq.heappop(self._heap)
                if not t.cancelled:
                    out.append(t.fn)
        self.fired += len(out)
        return out
