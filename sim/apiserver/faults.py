"""Seeded fault injection for the HTTP API (off by default): what a flaky control plane does.

A fraction of requests is answered 500, 503 or 429 (with ``Retry-After``) before touching the store;
a fraction of writes answers 409 Conflict; watch streams are cut after random wall-clock intervals;
a watch that resumes from a resourceVersion can be forced to 410 Gone so the client must relist.
Every decision comes from one ``random.Random(seed)`` under a lock, so a campaign is repeatable.

``request_hook`` is the general hook for what rates cannot say: it sees every resource request
(verb, path, the authenticated user, the client's User-Agent) before it is served, in the request's
own thread, so it can record who wrote what and when, or sleep to delay one client's requests (a
leader whose Lease renewals hang).
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from lwsflow.controller.errors import (
    ApiError,
    Conflict,
    ServerError,
    ServiceUnavailable,
    TooManyRequests,
)

WRITE_VERBS = frozenset({"create", "update", "patch", "delete", "deletecollection"})


@dataclass(frozen=True)
class RequestInfo:
    """One resource request as ``ApiFaults.request_hook`` sees it (before it is served)."""

    verb: str  # the RBAC verb: get, list, watch, create, patch, update, delete, ...
    path: str
    resource: str  # plural, with "/subresource" when there is one
    namespace: str
    name: str
    user: str  # the authenticated (or impersonated) user name
    user_agent: str


@dataclass
class ApiFaults:
    """Fault rates (fractions in [0, 1]) and the seed that makes them repeatable."""

    seed: int = 0
    error_rate: float = 0.0  # share of all requests answered with ``error_statuses``, in turn
    error_statuses: tuple[int, ...] = (500, 503, 429)
    retry_after_s: int = 1  # the Retry-After header of 429 (and 503) answers
    conflict_rate: float = 0.0  # share of writes answered 409 Conflict
    watch_cut_mean_s: float = 0.0  # mean wall seconds before a watch stream is cut (0: never)
    gone_on_resume_rate: float = 0.0  # share of watches resumed from a resourceVersion answered 410
    gone_on_first_resumes: int = 0  # the first N resumed watches are answered 410 whatever the rate
    exempt_paths: tuple[str, ...] = ("/healthz", "/readyz", "/livez", "/version", "/lwsflow/v1/clock")
    injected: dict[int, int] = field(default_factory=dict)  # status -> count, for tests and reports
    request_hook: Callable[[RequestInfo], None] | None = None  # sees (may delay) every resource request

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)
        self._lock = threading.Lock()
        self._resumes = 0

    def _roll(self, rate: float) -> bool:
        if rate <= 0:
            return False
        with self._lock:
            return self._rng.random() < rate

    def _count(self, status: int) -> None:
        with self._lock:
            self.injected[status] = self.injected.get(status, 0) + 1

    def request_fault(self, verb: str, path: str) -> ApiError | None:
        """The error to answer this request with instead of serving it, or None."""
        if any(path.startswith(p) for p in self.exempt_paths):
            return None
        if self._roll(self.error_rate):
            with self._lock:  # in turn, not drawn: every status shows once a few errors were injected
                status = self.error_statuses[sum(self.injected.get(s, 0) for s in self.error_statuses)
                                             % len(self.error_statuses)]
            self._count(status)
            if status == 429:
                return TooManyRequests(
                    "the server has received too many requests and has asked us to try again later",
                    retry_after=self.retry_after_s,
                )
            if status == 503:
                return ServiceUnavailable(
                    "the server is currently unable to handle the request", retry_after=self.retry_after_s
                )
            err = ServerError(
                "an error on the server (injected fault) has prevented the request from succeeding"
            )
            err.status = status
            return err
        if verb in WRITE_VERBS and self._roll(self.conflict_rate):
            self._count(409)
            return Conflict(
                "Operation cannot be fulfilled: the object has been modified; please apply "
                "your changes to the latest version and try again (injected fault)"
            )
        return None

    def watch_cut_after(self) -> float | None:
        """Wall seconds this watch stream may live before being cut (None: not cut)."""
        if self.watch_cut_mean_s <= 0:
            return None
        with self._lock:
            return self._rng.expovariate(1.0 / self.watch_cut_mean_s)

    def gone_on_resume(self) -> bool:
        with self._lock:  # a test that must exercise the relist path gets it however short the run
            forced = self._resumes < self.gone_on_first_resumes
            self._resumes += 1
        hit = forced or self._roll(self.gone_on_resume_rate)
        if hit:
            self._count(410)
        return hit
