"""Timed scenario events: what YAML scenarios expand to and what generator functions yield.

Times are virtual seconds from the start of the scenario. A generator is a plain function
``fn(rng: random.Random) -> Iterable[Event]``; events may come in any order (the engine orders them
by time, then by the order they were produced).
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class NodeCreate:
    """A node with ``gpus`` healthy accelerators joins the pool."""

    at: float
    name: str
    gpus: int


@dataclass(frozen=True, slots=True)
class NodeDelete:
    """A node leaves; work with pods on it is evicted and restarts from the beginning elsewhere."""

    at: float
    name: str


@dataclass(frozen=True, slots=True)
class JobCreate:
    """A batch job of ``pods`` identical pods, ``gpus`` accelerators each (a gang when pods > 1).

    ``duration`` is how long it really runs; ``expected`` is what its owner announced (the
    expected-duration annotation, defaulting to ``duration``); ``deadline`` is a soft deadline in
    seconds after submission. ``group`` names the class of job in reports (e.g. "short").
    """

    at: float
    name: str
    duration: float
    pods: int = 1
    gpus: int = 1
    expected: float | None = None
    deadline: float | None = None
    group: str = ""


@dataclass(frozen=True, slots=True)
class JobDelete:
    """The job is cancelled (pending or running)."""

    at: float
    name: str


@dataclass(frozen=True, slots=True)
class LwsCreate:
    """A LeaderWorkerSet: ``replicas`` groups of ``size`` pods with ``gpus`` each, serving until deleted."""

    at: float
    name: str
    replicas: int = 1
    size: int = 1
    gpus: int = 8
    group: str = ""


@dataclass(frozen=True, slots=True)
class LwsDelete:
    """Every group of the LeaderWorkerSet goes away."""

    at: float
    name: str


Event = NodeCreate | NodeDelete | JobCreate | JobDelete | LwsCreate | LwsDelete

FOREVER = math.inf  # duration of serving groups: they run until their LWS is deleted
