"""Leader election on a ``coordination.k8s.io/v1`` Lease, the way client-go's leaderelection does it.

A candidate never compares the holder's ``renewTime`` with its own clock (clocks skew): it records
when it *observed* the lease record change, on its monotonic clock, and takes the lease only after
it has seen no renewal for ``lease_duration_s``. Every write is a merge patch carrying the read
``resourceVersion``, so two candidates racing for an expired lease cannot both win (one gets 409).
The leader renews every ``retry_period_s`` and gives up leadership when it has not renewed for
``renew_deadline_s``: the caller then exits (a controller that may no longer be leader must stop
writing at once; the rollout state on the targets makes the restart safe).

Fencing: :meth:`LeaderElector.write_fence` is checked before every write the controller sends
(``Kube.view``: its rollouts', their P/D probe canaries', its webhook posts), last before the request
goes out (after any wait for the client's rate limit), not after the fact: a write is refused once
``renew_deadline_s`` has passed since the *start* of the last successful renewal, even while the
renewal loop is stuck in a slow request.
A standby takes over only ``lease_duration_s`` after it observed that renewal, which was at or after
its start, and ``renew_deadline_s < lease_duration_s``: the deposed leader has stopped writing first
(up to a write already in flight, bounded by the request timeout, as in client-go).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime

from lwsflow.controller.api.wire import Obj
from lwsflow.controller.errors import ApiError, Conflict, NotFound
from lwsflow.controller.kube.client import Kube
from lwsflow.controller.kube.resources import LEASE

log = logging.getLogger("lwsflow.controller.leader")


def micro_time(epoch: float) -> str:
    """``metav1.MicroTime`` text."""
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    """Acquire and keep one Lease; ``is_leader`` is the state, ``on_lost`` fires once on loss."""

    def __init__(self, kube: Kube, namespace: str, name: str, identity: str, *,
                 lease_duration_s: float = 15.0, renew_deadline_s: float = 10.0,
                 retry_period_s: float = 2.0, on_lost: Callable[[], None] | None = None,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        if not retry_period_s < renew_deadline_s < lease_duration_s:
            raise ValueError("need retry period < renew deadline < lease duration")
        self.kube, self.ns, self.name, self.identity = kube, namespace, name, identity
        self.lease_s, self.renew_deadline_s, self.retry_s = lease_duration_s, renew_deadline_s, retry_period_s
        self.on_lost = on_lost or (lambda: None)
        self._mono = monotonic
        self._observed: tuple[str, str] | None = None  # (holder, renewTime) last seen
        self._observed_at = 0.0
        self._renewed_at = 0.0
        self.leader = threading.Event()
        self.stopped = threading.Event()
        self.transitions = 0

    def is_leader(self) -> bool:
        return self.leader.is_set() and self.may_write()

    def may_write(self) -> bool:
        """Whether this replica can still prove it holds the Lease: leader, and its last successful
        renewal began less than the renew deadline ago."""
        return self.leader.is_set() and self._mono() - self._renewed_at < self.renew_deadline_s

    def write_fence(self) -> str | None:
        """A ``Kube`` write fence: the reason to refuse a write now, or None."""
        if self.may_write():
            return None
        return (f"{self.identity} cannot prove it holds lease {self.ns}/{self.name} (no renewal within "
                f"the {self.renew_deadline_s:g}s renew deadline)")

    def run(self) -> None:
        """Campaign, then renew, until stopped or the lease is lost (blocking; run it in a thread)."""
        while not self.stopped.is_set():
            if not self.step():
                return
            self.stopped.wait(self.retry_s)

    def step(self) -> bool:
        """One campaign or renewal, its outcome recorded; False once leadership is lost (``on_lost``
        called)."""
        began = self._mono()  # the server records the renewal at or after this instant
        ok = self.try_acquire_or_renew()
        now = self._mono()
        if ok:
            self._renewed_at = began
            if not self.leader.is_set():
                log.info("%s: became leader (lease %s/%s)", self.identity, self.ns, self.name)
                self.leader.set()
        elif self.leader.is_set() and now - self._renewed_at > self.renew_deadline_s:
            log.error("%s: leader election lost (no renewal for %.1fs)", self.identity,
                      now - self._renewed_at)
            self.leader.clear()
            self.on_lost()
            return False
        return True

    def try_acquire_or_renew(self) -> bool:
        """One attempt; True when we hold the lease afterwards."""
        now_wall = time.time()
        mine: Obj = {"holderIdentity": self.identity, "leaseDurationSeconds": round(self.lease_s),
                     "renewTime": micro_time(now_wall)}
        try:
            lease = self.kube.get(LEASE, self.ns, self.name)
        except NotFound:
            body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                    "metadata": {"name": self.name, "namespace": self.ns},
                    "spec": {**mine, "acquireTime": micro_time(now_wall), "leaseTransitions": 0}}
            try:
                self.kube.create(LEASE, self.ns, body)
            except ApiError as exc:
                log.info("%s: lease create lost: %s", self.identity, exc)
                return False
            return True
        except ApiError as exc:
            log.warning("%s: lease read failed: %s", self.identity, exc)
            return False
        spec = lease.get("spec") or {}
        holder = str(spec.get("holderIdentity") or "")
        record = (holder, str(spec.get("renewTime") or ""))
        if record != self._observed:
            self._observed, self._observed_at = record, self._mono()
        if holder and holder != self.identity and self._mono() - self._observed_at < self.lease_s:
            return False  # held and renewed within the lease duration as we observed it
        patch: Obj = {"metadata": {"resourceVersion": lease["metadata"]["resourceVersion"]}, "spec": mine}
        if holder != self.identity:
            patch["spec"] = {**mine, "acquireTime": micro_time(now_wall),
                             "leaseTransitions": int(spec.get("leaseTransitions") or 0) + 1}
        try:
            out = self.kube.merge_patch(LEASE, self.ns, self.name, patch)
        except Conflict:
            return False
        except ApiError as exc:
            log.warning("%s: lease write failed: %s", self.identity, exc)
            return False
        if holder != self.identity:
            self.transitions += 1
        new = out.get("spec") or {}
        self._observed = (str(new.get("holderIdentity") or ""), str(new.get("renewTime") or ""))
        self._observed_at = self._mono()
        return True

    def stop(self, release: bool = True) -> None:
        """Stop campaigning; ``release`` empties the holder so a standby takes over at once."""
        self.stopped.set()
        if release and self.leader.is_set():
            try:
                lease = self.kube.get(LEASE, self.ns, self.name)
                if (lease.get("spec") or {}).get("holderIdentity") == self.identity:
                    self.kube.merge_patch(LEASE, self.ns, self.name, {
                        "metadata": {"resourceVersion": lease["metadata"]["resourceVersion"]},
                        "spec": {"holderIdentity": None, "leaseDurationSeconds": 1}})
            except ApiError as exc:
                log.info("%s: lease release failed: %s", self.identity, exc)
        self.leader.clear()
