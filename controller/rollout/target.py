"""The object one rollout drives, and every read and write the executor and the rollback make on it.

Shared by :mod:`lwsflow.controller.rollout.engine` (the executor) and
:mod:`lwsflow.controller.rollout.rollback`, so neither imports the other's class. Writes are merge
patches conditioned on the resourceVersion last seen (a concurrent writer makes them fail with 409).
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from lwsflow.controller.api import labels as L
from lwsflow.controller.api import status as api_status
from lwsflow.controller.api.wire import Obj
from lwsflow.controller.clock import Clock
from lwsflow.controller.kube import watch as kwatch
from lwsflow.controller.kube.client import Kube
from lwsflow.controller.kube.events import EventRecorder
from lwsflow.controller.kube.resources import Resource
from lwsflow.controller.rollout import state
from lwsflow.controller.rollout.outcome import Replan
from lwsflow.controller.rollout.report import RolloutReport

Follower = Callable[[Resource, str, str, float, "Obj | None"], "Iterator[Obj] | None"]
"""(res, namespace, name, wall budget, the copy last seen) -> the object now and after each change,
from a cache (``kube/informer.Informer.follow``); None where the cache cannot serve it."""


@dataclass
class Target:
    """One LWS or DS: where it is, the last copy seen (``obj``), and where progress is reported."""

    kube: Kube
    res: Resource
    ns: str
    name: str
    clock: Clock
    report: RolloutReport
    events: EventRecorder
    role: str = ""
    on_step: Callable[[str], None] = field(default=lambda _s: None)
    obj: Obj = field(default_factory=dict)
    # cluster seconds between reads when the object must be polled (the strategy's ``poll_s``)
    poll: Callable[[Obj], float | None] = field(default=lambda _o: None)
    # a copy the caller has just seen (the controller's cache), used by the next read instead of a
    # GET: every write is conditioned on the resourceVersion acted on, so a copy a few events behind
    # costs a 409 and a re-read, never a wrong write
    fresh: Obj | None = None
    # the in-cluster controller's informer cache: gates are followed on its events, no watch of our own
    follower: Follower | None = None

    def read(self) -> Obj:
        if self.fresh is not None:
            self.obj, self.fresh = self.fresh, None
            return self.obj
        self.obj = self.kube.get(self.res, self.ns, self.name)
        return self.obj

    def write(self, patch: Obj, expect_hash: str = "") -> None:
        """Merge-patch the object conditioned on the resourceVersion we acted on (409: re-read, check).

        ``expect_hash``: the template hash the patch was planned for; a different one on re-read
        means the plan is stale (Replan) rather than something to overwrite.
        """
        def make(cur: Obj) -> Obj:
            if expect_hash and state.template_hash(state.template_of(cur)) != expect_hash:
                raise Replan("template changed")
            return copy.deepcopy(patch)
        self.obj = self.kube.read_modify_write(self.res, self.ns, self.name, make,
                                               field_manager=L.FIELD_MANAGER, current=self.obj or None)

    def mark(self, st: state.RolloutState, **changes: object) -> None:
        """Record ``changes`` (RolloutState fields) and the update time in the state annotations."""
        ann = state.RolloutState(updated=state.iso(self.clock.now()), **changes)  # type: ignore[arg-type]
        self.write({"metadata": {"annotations": ann.annotations(("updated", *changes))}})

    def follow(self, until: float) -> Iterator[Obj]:
        """Watch the object until cluster time ``until`` (plus a little wall slack)."""
        budget = self.clock.wall(max(0.0, until - self.clock.now())) + 0.05
        every = self.poll(self.obj) if self.obj else None
        if every is None:
            cached = self.follower(self.res, self.ns, self.name, budget, self.obj or None) \
                if self.follower is not None else None
            yield from cached if cached is not None else \
                kwatch.follow(self.kube, self.res, self.ns, self.name, wall_budget=budget)
            return
        end = time.monotonic() + budget
        while True:  # polled: the object does not change while what its gate reads does
            yield self.kube.get(self.res, self.ns, self.name)
            left = end - time.monotonic()
            if left <= 0:
                return
            time.sleep(min(left, max(0.02, self.clock.wall(every))))

    def settle(self, until: float) -> None:
        """Follow the object until its controller observed our last spec write (observedGeneration
        caught up, so its status and conditions describe it), at most until cluster time ``until``.

        The GitOps refreeze at the end bumps the generation without moving a group; whoever reads the
        object after we report the outcome must not meet a status of the generation before it.
        """
        if api_status.observed_current(self.obj):
            return
        for obj in self.follow(until):
            self.obj = obj
            if api_status.observed_current(obj):
                return

    def checkpoint(self, name: str) -> None:
        self.on_step(f"{self.role + ':' if self.role else ''}{name}")
