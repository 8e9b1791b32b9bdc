"""Pluggable GPU pool scheduling policies, shared by the embedded cluster and the scenario evaluator.

A policy answers three questions, and nothing else (no I/O, no node bookkeeping):

- ``queue_key(work)``: the order pending work is tried in (smaller first). Keys never change while a
  piece of work waits, so callers can keep pending work in heaps instead of re-sorting every event.
- ``order_levels(levels, gpu)``: which nodes to try first, expressed over free-GPU levels (nodes are
  bucketed by free accelerators, so picking a node costs O(levels), not O(nodes)).
- ``choose_victims(work, running, trial)``: which running work to preempt so that ``work`` fits, or
  None. The engine supplies ``trial``, a tentative preemption that answers "does it fit now?" as
  victims are added or given back, so the policy decides and the engine keeps the accounting.

Policies shipped (``POLICIES``):

- ``default``: first come first served, spread (least allocated first), pods placed one by one like
  the stock scheduler: a multi-pod job may hold GPUs while it waits for its remaining pods, and two
  such jobs can hold half of what each needs forever (deadlock).
- ``gang``: first come, spread, all-or-nothing: a group's pods are placed together or not at all, so
  partial groups never hold GPUs and two competing groups cannot deadlock.
- ``binpack-fragmentation``: first come, all-or-nothing, and among feasible nodes the one with the
  FEWEST free GPUs wins. Not the most utilised one: a node with 1 healthy GPU, 0 busy has 0 % utilisation
  but is the tighter fit for a 1-GPU job than a node with 6 of 8 busy (2 free, 75 %).
- ``least-slack-time``: smallest slack first, with preemption. ``slack = deadline - now - expected``
  where ``expected`` is the FULL expected duration, not the remaining one: a running job is not
  favoured over a waiting one, and since ``slack + now`` is fixed per job the priority order is fixed,
  so a preempted job can never preempt its preemptor back (no ping-pong). A preempted job restarts
  from the beginning. Placement is all-or-nothing and bin-packed.

Jobs carry their expected duration and soft deadline as annotations (``EXPECTED_DURATION``,
``DEADLINE``); ``timing_from_annotations`` reads them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import islice, takewhile
from typing import Protocol

from lwsflow.controller.api import duration as api_duration
from lwsflow.controller.errors import InvalidInput

EXPECTED_DURATION = "scheduling.lwsflow.io/expected-duration"  # e.g. "30m", "1h30m", "3600"
DEADLINE = "scheduling.lwsflow.io/deadline"  # soft deadline, relative to submission ("60m")



def parse_duration(value: object, field: str = "") -> float:
    """Seconds from ``90``, ``"90"``, ``"30m"``, ``"1h30m"``, ``"2d"``: lwsflow's one duration grammar
    (``controller/api/duration.py``); bad input names ``field``."""
    return api_duration.parse_duration(value, field)


def timing_from_annotations(annotations: dict[str, str]) -> tuple[float | None, float | None]:
    """(expected duration s, deadline relative to submission s) from a job's annotations."""
    exp, dl = annotations.get(EXPECTED_DURATION), annotations.get(DEADLINE)
    return (
        None if exp is None else parse_duration(exp, f"metadata.annotations.{EXPECTED_DURATION}"),
        None if dl is None else parse_duration(dl, f"metadata.annotations.{DEADLINE}"),
    )


class Work(Protocol):
    """What a policy may look at: a job, or one gang group of an LWS (absolute virtual times)."""

    seq: int  # submission order, the final tie-break everywhere
    submitted: float
    expected: float  # expected FULL duration in seconds (inf: runs until deleted, e.g. serving)
    deadline: float | None  # absolute soft deadline, None when the work has none


def slack(work: Work, now: float) -> float:
    """``deadline - now - expected``; +inf without a deadline (or without an expected end)."""
    if work.deadline is None or not math.isfinite(work.expected):
        return math.inf
    return work.deadline - now - work.expected


class Policy(Protocol):
    """The scheduling decisions a policy owns (see the module docstring)."""

    # read-only (properties): the policies are frozen dataclasses
    @property
    def name(self) -> str: ...

    @property
    def gang(self) -> bool:  # place multi-pod work all-or-nothing
        ...

    @property
    def preemptive(self) -> bool: ...

    def queue_key(self, work: Work) -> tuple[float, ...]: ...

    def order_levels(self, levels: Iterable[int], gpu: int) -> list[int]: ...

    def choose_victims(self, work: Work, running: Iterable[Work], trial: Trial) -> list[Work] | None:
        """Victims among ``running`` (largest queue key first) so that ``work`` fits, or None."""
        ...


class Trial(Protocol):
    """A tentative preemption: nothing changes until the engine acts on the victims returned."""

    def add(self, victim: Work) -> bool:
        """Count ``victim`` as preempted; True when the pending work fits now."""
        ...

    def remove(self, victim: Work) -> bool:
        """Give ``victim`` back (it keeps running); True when the pending work still fits."""
        ...


@dataclass(frozen=True)
class BasePolicy:
    """A policy assembled from a queue order, a node order, gang placement and preemption."""

    name: str
    queue: str = "fifo"  # "fifo" | "least-slack"
    nodes: str = "spread"  # "spread" (most free GPUs first) | "binpack" (fewest free GPUs first)
    gang: bool = False
    preemptive: bool = False
    # bounds one preemption attempt: on the large bench 16 meets as many deadlines as 64 with half the
    # preemptions (victims taken by slack alone scatter over nodes) and a third of the time
    max_victims: int = 16

    def __post_init__(self) -> None:
        if self.preemptive and not self.gang:
            # preempting for work that then holds half a gang would free GPUs for nothing
            raise ValueError(f"policy {self.name}: preemption needs all-or-nothing (gang) placement")

    def queue_key(self, work: Work) -> tuple[float, ...]:
        if self.queue == "least-slack":
            # slack(now) + now: the same for every ``now``, so ordering by it is ordering by slack
            return (slack(work, 0.0), work.submitted, work.seq)
        return (work.submitted, work.seq)

    def order_levels(self, levels: Iterable[int], gpu: int) -> list[int]:
        if self.nodes == "spread":
            return sorted(levels, reverse=True)
        if gpu == 0:
            # CPU-only pods go to nodes without free GPUs first, before eating a GPU node's CPU
            return sorted(levels, key=lambda f: (0 if f == 0 else 1, f))
        return sorted(levels)

    def choose_victims(self, work: Work, running: Iterable[Work], trial: Trial) -> list[Work] | None:
        """Largest slack first, only work with strictly larger slack; then drop victims not needed.

        ``running`` comes largest queue key first (the engine keeps it sorted), so this costs
        O(max_victims) however many jobs run. Strictly larger slack only: equal-slack work never
        preempts each other, and a victim can never preempt its preemptor back.
        """
        if not self.preemptive:
            return None
        mine = self.queue_key(work)[0]  # the priority itself (slack): tie-breaks never preempt
        candidates = list(islice(takewhile(lambda r: self.queue_key(r)[0] > mine, running), self.max_victims))
        chosen: list[Work] = []
        for c in candidates:
            chosen.append(c)
            if trial.add(c):
                break
        else:
            return None
        # reprieve (like kube-scheduler): give back victims, smallest slack first, if still feasible
        for c in sorted(chosen, key=self.queue_key):
            if len(chosen) > 1:
                if trial.remove(c):
                    chosen = [v for v in chosen if v is not c]
                else:
                    trial.add(c)
        return chosen


POLICIES: dict[str, BasePolicy] = {
    p.name: p
    for p in (
        BasePolicy("default"),
        BasePolicy("gang", gang=True),
        BasePolicy("binpack-fragmentation", nodes="binpack", gang=True),
        BasePolicy("least-slack-time", queue="least-slack", nodes="binpack", gang=True, preemptive=True),
    )
}
_BY_SCORING = {"spread": "default", "binpack": "binpack-fragmentation"}


def get_policy(name: str, field: str = "--policy") -> BasePolicy:
    """The named policy; an unknown name is InvalidInput listing the known ones."""
    try:
        return POLICIES[name]
    except KeyError:
        raise InvalidInput(f"unknown policy {name!r} (known: {', '.join(POLICIES)})", field=field) from None


def for_scoring(scoring: str) -> BasePolicy:
    """The policy behind the embedded cluster's ``scoring`` setting (``spread`` / ``binpack``), or a name."""
    return get_policy(_BY_SCORING.get(scoring, scoring), field="scoring")
