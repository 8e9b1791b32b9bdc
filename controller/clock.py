"""Injected time: the rollout engine only ever calls ``clock.now()`` and ``clock.sleep(seconds)``.

* :class:`WallClock` is real time (production).
* :class:`ClusterClock` follows the embedded cluster's virtual clock, read from
  ``GET /lwsflow/v1/clock`` -> ``{"now": <epoch seconds>, "speed": <virtual s per wall s>}``; it
  sleeps ``virtual / speed`` wall seconds. The engine cannot tell the two apart, which is the point:
  it never knows which cluster it talks to.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Protocol

from lwsflow.controller.api.wire import Obj


class Clock(Protocol):
    """What the engine needs from time."""

    def now(self) -> float:
        """Seconds since the epoch in the cluster's time."""
        ...

    def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` of the cluster's time."""
        ...

    def wall(self, seconds: float) -> float:
        """Wall-clock seconds that ``seconds`` of cluster time take (watch timeouts use it)."""
        ...


class WallClock:
    """Real time."""

    def now(self) -> float:
        return time.time()

    def sleep(self, seconds: float) -> None:
        time.sleep(max(0.0, seconds))

    def wall(self, seconds: float) -> float:
        return max(0.0, seconds)


class ClusterClock:
    """The embedded cluster's virtual clock, interpolated between reads.

    ``fetch`` returns the clock document. It is read again at most every ``resync_s`` wall seconds
    (each read is one API request, so not on every ``now()``); between reads the virtual time is
    extrapolated at the reported speed. ``first``: a document just read, used instead of a fetch.
    """

    def __init__(self, fetch: Callable[[], Obj], resync_s: float = 0.5, *,
                 first: Obj | None = None) -> None:
        self._fetch = fetch
        self._resync = resync_s
        self._lock = threading.Lock()
        self._base_virtual = 0.0
        self._base_wall = -1e9
        self._speed = 1.0
        if first is None:
            self.now()
        else:
            self._sync(first)

    def _sync(self, doc: Obj | None = None) -> None:
        doc = self._fetch() if doc is None else doc
        self._base_virtual = float(doc["now"])
        self._speed = max(1e-6, float(doc.get("speed") or 1.0))
        self._base_wall = time.monotonic()

    @property
    def speed(self) -> float:
        return self._speed

    def now(self) -> float:
        with self._lock:
            if time.monotonic() - self._base_wall > self._resync:
                self._sync()
            return self._base_virtual + (time.monotonic() - self._base_wall) * self._speed

    def sleep(self, seconds: float) -> None:
        time.sleep(max(0.0, seconds) / self._speed)

    def wall(self, seconds: float) -> float:
        return max(0.0, seconds) / self._speed
