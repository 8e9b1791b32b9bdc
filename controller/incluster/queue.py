"""The controller's work queue: de-duplicating, per-key backoff, delayed adds (client-go's workqueue).

A key (``namespace/policy``) added many times before a worker takes it is reconciled once; a key
being reconciled is never handed to a second worker: added meanwhile, it is queued again when the
first worker is done. A failed reconcile is retried after ``base_s * 2**failures`` (capped), and
``forget`` resets that once it succeeds. ``add_after`` schedules a key (a pair's templates settling,
a probe retry window) without a thread per timer: ``get`` wakes for the earliest due key.

Hand-written (about 100 lines) because the official Python client has no work queue and kopf/kr8s
bring their own asyncio loop (docs/architecture.md).
"""

from __future__ import annotations

import heapq
import threading
import time
from collections import deque
from collections.abc import Callable


class WorkQueue:
    """Thread-safe; ``get`` blocks until a key is due (or ``timeout``/``shutdown``)."""

    def __init__(self, *, base_s: float = 0.05, max_s: float = 60.0,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.base_s, self.max_s, self._mono = base_s, max_s, monotonic
        self._queue: deque[str] = deque()
        self._dirty: set[str] = set()  # waiting to be processed (in _queue, or re-added while busy)
        self._processing: set[str] = set()
        self._delayed: list[tuple[float, int, str]] = []  # (due, seq, key) heap
        self._seq = 0
        self._failures: dict[str, int] = {}
        self._cond = threading.Condition()
        self._shutdown = False
        self.adds = 0  # every add() call, de-duplicated or not (a metric)

    def add(self, key: str) -> None:
        with self._cond:
            self.adds += 1
            if self._shutdown or key in self._dirty:
                return
            self._dirty.add(key)
            if key not in self._processing:
                self._queue.append(key)
                self._cond.notify()

    def add_after(self, key: str, delay_s: float) -> None:
        if delay_s <= 0:
            self.add(key)
            return
        with self._cond:
            self._seq += 1
            heapq.heappush(self._delayed, (self._mono() + delay_s, self._seq, key))
            self._cond.notify()

    def retry(self, key: str) -> float:
        """Re-add after this key's next backoff; returns the delay."""
        with self._cond:
            n = self._failures.get(key, 0)
            self._failures[key] = n + 1
        delay = min(self.max_s, self.base_s * float(2 ** n))
        self.add_after(key, delay)
        return delay

    def forget(self, key: str) -> None:
        with self._cond:
            self._failures.pop(key, None)

    def get(self, timeout_s: float | None = None) -> str | None:
        """The next key to process (mark it done with :meth:`done`); None on timeout or shutdown."""
        end = None if timeout_s is None else self._mono() + timeout_s
        with self._cond:
            while True:
                self._promote_due()
                if self._shutdown:
                    return None
                if self._queue:
                    key = self._queue.popleft()
                    self._dirty.discard(key)
                    self._processing.add(key)
                    return key
                waits = [w for w in (self._delayed[0][0] - self._mono() if self._delayed else None,
                                     end - self._mono() if end is not None else None) if w is not None]
                if end is not None and self._mono() >= end:
                    return None
                self._cond.wait(max(0.0, min(waits)) if waits else None)

    def done(self, key: str) -> None:
        with self._cond:
            self._processing.discard(key)
            if key in self._dirty:  # added while it was being processed: once more
                self._queue.append(key)
                self._cond.notify()

    def shutdown(self) -> None:
        with self._cond:
            self._shutdown = True
            self._cond.notify_all()

    def __len__(self) -> int:
        with self._cond:
            return len(self._queue) + len(self._delayed)

    def _promote_due(self) -> None:
        now = self._mono()
        while self._delayed and self._delayed[0][0] <= now:
            _due, _seq, key = heapq.heappop(self._delayed)
            if key not in self._dirty:
                self._dirty.add(key)
                if key not in self._processing:
                    self._queue.append(key)
