"""A token bucket for the client side of the API (client-go's ``QPS``/``Burst``).

``burst`` requests may go at once; after that, one every ``1/qps`` seconds. A caller that finds the
bucket empty sleeps until its token is due (wall time: the API server's load is wall-clock load,
whatever clock the rollout runs on). Watches are not limited (one long request each).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


class TokenBucket:
    """Thread-safe; ``take()`` blocks until a token is available and returns the seconds waited."""

    def __init__(self, qps: float, burst: int, *, monotonic: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        if qps <= 0 or burst < 1:
            raise ValueError("need qps > 0 and burst >= 1")
        self.qps, self.burst = qps, burst
        self._mono, self._sleep = monotonic, sleep
        self._tokens = float(burst)
        self._at = monotonic()
        self._lock = threading.Lock()
        self.waited_s = 0.0  # total seconds callers were held back (a metric)

    def take(self) -> float:
        with self._lock:
            now = self._mono()
            self._tokens = min(float(self.burst), self._tokens + (now - self._at) * self.qps)
            self._at = now
            self._tokens -= 1.0  # reserve ours now, so concurrent callers queue up behind it
            wait = -self._tokens / self.qps if self._tokens < 0 else 0.0
            self.waited_s += wait
        if wait > 0:
            self._sleep(wait)
        return wait
