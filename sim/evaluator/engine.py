"""The evaluator's event loop: scenario events and job completions on a heap, one scheduling pass per instant.

Costs stay independent of the pool size: nodes sit in free-GPU buckets (``pool``), pending work sits in
one heap per shape (remaining pods, GPUs per pod) ordered by the policy's fixed queue key, and a pass
takes the best head across shapes until every shape left is known not to fit. A shape that does not
fit rules out every larger shape for the rest of the pass (capacity only shrinks within a pass, and
later work has larger keys, hence fewer preemption candidates), so a pass over thousands of waiting
jobs costs O(placed x shapes), not O(waiting).

Serving groups (LWS) run until deleted and are never preempted; batch jobs restart from the beginning
when preempted or evicted by a node deletion.
"""

from __future__ import annotations

import bisect
import heapq
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import cast

from lwsflow.controller.errors import InvalidInput
from lwsflow.sim.evaluator import events as ev
from lwsflow.sim.evaluator.pool import GpuPool
from lwsflow.sim.evaluator.scenario import Scenario
from lwsflow.sim.policies import Policy

PENDING, RUNNING, DONE, DELETED = "pending", "running", "done", "deleted"
Shape = tuple[int, int]  # (pods still to place, GPUs per pod)


@dataclass(eq=False, slots=True)
class Job:
    """A batch job or one serving group: a gang of identical pods (satisfies ``policies.Work``)."""

    seq: int
    name: str
    kind: str  # "job" | "lws"
    group: str
    pods: int
    gpus: int
    duration: float
    expected: float
    deadline: float | None
    submitted: float
    key: tuple[float, ...] = ()
    state: str = PENDING
    nodes: list[str] = field(default_factory=list)  # one entry per placed pod
    ran_on: list[str] = field(default_factory=list)  # nodes of the latest run (kept after it ends)
    run_id: int = 0
    started: float = 0.0
    first_start: float | None = None
    finished: float | None = None
    pending_since: float = 0.0
    wait: float = 0.0
    preempted: int = 0
    evicted: int = 0
    qtoken: int = 0
    segments: list[tuple[float, float, str]] = field(default_factory=list)  # pending | run | lost

    @property
    def met_deadline(self) -> bool:
        done = self.finished
        return self.deadline is not None and done is not None and done <= self.deadline + 1e-6


@dataclass
class Result:
    """Everything one policy run produced; ``metrics`` turns it into figures."""

    policy: str
    scenario: str
    jobs: list[Job]
    timeline: list[tuple[float, int, int, int]]  # (t, used GPUs, total GPUs, stranded free GPUs)
    end: float
    events: int
    wall_s: float
    preemptions: int
    evictions: int
    preemption_log: list[tuple[float, str, str]]  # (t, preemptor, victim)


class Engine:
    """Runs one scenario under one policy."""

    def __init__(
        self, scenario: Scenario, policy: Policy, on_instant: Callable[[Engine], None] | None = None
    ) -> None:
        """``on_instant`` is called after each instant's scheduling pass (checks, live views)."""
        self.scenario, self.policy = scenario, policy
        self.on_instant = on_instant
        self.pool = GpuPool()
        self.now = 0.0
        self.jobs: dict[str, Job] = {}
        self.lws: dict[str, list[Job]] = {}
        self._heap: list[tuple] = []  # (t, 0 finish | 1 scenario event, seq, payload)
        self._seq = 0
        self._pending: dict[Shape, list[tuple]] = {}  # shape -> heap of (key, seq, qtoken, job)
        self._running: list[tuple] = []  # preemptible running jobs, sorted by (key, seq)
        self._on_node: dict[str, dict[Job, None]] = {}
        self.timeline: list[tuple[float, int, int, int]] = []
        self.preemptions = self.evictions = self.events = 0
        self.preemption_log: list[tuple[float, str, str]] = []

    # -- the loop --------------------------------------------------------------------------------------
    def run(self) -> Result:
        wall0 = time.perf_counter()
        for e in self.scenario.events:
            self._push(e.at, 1, e)
        until = self.scenario.until
        while self._heap:
            t = self._heap[0][0]
            if until is not None and t > until:
                break
            self.now = t
            while self._heap and self._heap[0][0] == t:
                _, prio, _, payload = heapq.heappop(self._heap)
                if prio == 0:
                    job, run_id = payload
                    if job.state == RUNNING and job.run_id == run_id:
                        self.events += 1
                        self._finish(job)
                else:
                    self.events += 1
                    self._apply(payload)
            self._schedule()
            self._record()
            if self.on_instant is not None:
                self.on_instant(self)
        end = until if until is not None else self.now
        self._close(end)
        return Result(
            self.policy.name,
            self.scenario.name,
            sorted(self.jobs.values(), key=lambda j: j.seq),
            self.timeline,
            end,
            self.events,
            time.perf_counter() - wall0,
            self.preemptions,
            self.evictions,
            self.preemption_log,
        )

    def _push(self, t: float, prio: int, payload: object) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (t, prio, self._seq, payload))

    def _record(self) -> None:
        p = self.pool
        point = (self.now, p.used_gpus, p.total_gpus, p.stranded)
        if not self.timeline or self.timeline[-1][1:] != point[1:]:
            self.timeline.append(point)

    def _close(self, end: float) -> None:
        for j in self.jobs.values():
            _end_segment(j, end)

    # -- scenario events -------------------------------------------------------------------------------
    def _apply(self, e: ev.Event) -> None:
        if isinstance(e, ev.NodeCreate):
            if not self.pool.add_node(e.name, e.gpus):
                raise InvalidInput(f"node {e.name!r} created twice (at {e.at:g} s)", field="events")
        elif isinstance(e, ev.NodeDelete):
            self._delete_node(e.name)
        elif isinstance(e, ev.JobCreate):
            expected = e.duration if e.expected is None else e.expected
            deadline = None if e.deadline is None else e.at + e.deadline
            self._submit(
                Job(0, e.name, "job", e.group or e.name, e.pods, e.gpus, e.duration, expected, deadline, e.at)
            )
        elif isinstance(e, ev.JobDelete):
            job = self.jobs.get(e.name)
            if job is not None:
                self._cancel(job)
        elif isinstance(e, ev.LwsCreate):
            if e.name in self.lws:
                raise InvalidInput(f"LWS {e.name!r} created twice (at {e.at:g} s)", field="events")
            groups = [
                Job(
                    0,
                    f"{e.name}/{i}",
                    "lws",
                    e.group or e.name,
                    e.size,
                    e.gpus,
                    ev.FOREVER,
                    ev.FOREVER,
                    None,
                    e.at,
                )
                for i in range(e.replicas)
            ]
            self.lws[e.name] = groups
            for g in groups:
                self._submit(g)
        elif isinstance(e, ev.LwsDelete):
            for g in self.lws.get(e.name, ()):
                self._cancel(g)

    def _submit(self, job: Job) -> None:
        if job.name in self.jobs:
            raise InvalidInput(f"job {job.name!r} created twice (at {job.submitted:g} s)", field="events")
        job.seq = len(self.jobs)
        job.key = self.policy.queue_key(job)
        job.pending_since = self.now
        self.jobs[job.name] = job
        self._enqueue(job)

    def _cancel(self, job: Job) -> None:
        _end_segment(job, self.now)
        if job.state in (RUNNING, PENDING):
            self._release(job)
            job.state = DELETED

    def _delete_node(self, name: str) -> None:
        if name not in self.pool.total:
            raise InvalidInput(
                f"node {name!r} deleted but it does not exist (at {self.now:g} s)", field="events"
            )
        for job in list(self._on_node.pop(name, {})):
            if job.state == RUNNING:
                self.evictions += 1
                job.evicted += 1
                self._interrupt(job)
            else:  # a partially placed pod group: only its pods on this node go back to pending
                here = job.nodes.count(name)
                self.pool.release(name, here * job.gpus)
                job.nodes = [n for n in job.nodes if n != name]
                self._enqueue(job)
        self.pool.remove_node(name)

    # -- job state -------------------------------------------------------------------------------------
    def _enqueue(self, job: Job) -> None:
        job.qtoken += 1
        placed = len(job.nodes)
        shape = (job.pods - placed, job.gpus)
        key = job.key
        if not self.policy.gang:
            # pods go one by one, and the pods of work submitted at the same instant interleave (their
            # controllers create them concurrently): A0, B0, A1, B1 -- which is how gangs deadlock
            key = (key[0], placed, *key[1:])
        heapq.heappush(self._pending.setdefault(shape, []), (key, job.seq, job.qtoken, job))

    def _start(self, job: Job, nodes: list[str]) -> None:
        job.nodes += nodes
        for n in nodes:
            self._on_node.setdefault(n, {})[job] = None
        if len(job.nodes) < job.pods:
            return
        job.state = RUNNING
        job.run_id += 1
        job.segments.append((job.pending_since, self.now, "pending"))
        job.wait += self.now - job.pending_since
        job.started = self.now
        job.ran_on = list(job.nodes)
        if job.first_start is None:
            job.first_start = self.now
        if math.isfinite(job.duration):
            self._push(self.now + job.duration, 0, (job, job.run_id))
        if self.policy.preemptive and job.kind == "job":
            bisect.insort(self._running, (job.key, job.seq, job))

    def _release(self, job: Job) -> None:
        for n in job.nodes:
            self.pool.release(n, job.gpus)
            self._on_node.get(n, {}).pop(job, None)
        job.nodes = []
        if job.state == RUNNING and self.policy.preemptive and job.kind == "job":
            i = bisect.bisect_left(self._running, (job.key, job.seq))
            if i < len(self._running) and self._running[i][2] is job:
                del self._running[i]

    def _finish(self, job: Job) -> None:
        job.segments.append((job.started, self.now, "run"))
        self._release(job)
        job.state = DONE
        job.finished = self.now

    def _interrupt(self, job: Job) -> None:
        """Preempted or evicted: the work done so far is lost; back to pending from the beginning."""
        job.segments.append((job.started, self.now, "lost"))
        self._release(job)
        job.state = PENDING
        job.pending_since = self.now
        self._enqueue(job)

    # -- one scheduling pass ---------------------------------------------------------------------------
    def _schedule(self) -> None:
        pending, pool, policy = self._pending, self.pool, self.policy
        failed: list[Shape] = []
        while True:
            best: tuple | None = None
            best_shape: Shape = (0, 0)
            for shape, heap in pending.items():
                if any(shape[0] >= p and shape[1] >= g for p, g in failed):
                    continue
                while heap and (heap[0][3].state != PENDING or heap[0][2] != heap[0][3].qtoken):
                    heapq.heappop(heap)  # lazily drop started, deleted or re-shaped entries
                if heap and (best is None or heap[0] < best):
                    best, best_shape = heap[0], shape
            if best is None:
                break
            job: Job = best[3]
            pods, gpus = best_shape
            if policy.gang:
                if pool.capacity(gpus) < pods and not (policy.preemptive and self._preempt_for(job)):
                    failed.append(best_shape)
                    continue
                heapq.heappop(pending[best_shape])
                self._start(job, pool.place(pods, gpus, policy.order_levels, gang=True))
            else:
                heapq.heappop(pending[best_shape])
                placed = pool.place(1, gpus, policy.order_levels, gang=False)
                self._start(job, placed)
                if job.state == PENDING:
                    # a placed pod holds its GPUs while the rest wait (the stock scheduler's way)
                    self._enqueue(job)
                if not placed:
                    failed.append((1, gpus))
        for shape in [s for s, h in pending.items() if not h]:
            del pending[shape]

    def _preempt_for(self, job: Job) -> bool:
        trial = self.pool.trial(job.pods, job.gpus)
        # the running work is both a policy Work and a pool Holder; the protocol names only Work
        victims = self.policy.choose_victims(job, (r[2] for r in reversed(self._running)),
                                             trial)  # type: ignore[arg-type]
        if not victims:
            return False
        for v in cast(list[Job], victims):
            self.preemptions += 1
            v.preempted += 1
            self.preemption_log.append((self.now, job.name, v.name))
            self._interrupt(v)
        return True


def _end_segment(job: Job, end: float) -> None:
    """Close the Gantt segment a pending or running job is in at ``end`` (others have none open)."""
    if job.state == PENDING:
        job.segments.append((job.pending_since, end, "pending"))
    elif job.state == RUNNING:
        job.segments.append((job.started, end, "run"))
