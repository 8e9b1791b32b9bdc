"""Shipped generator scenarios (runnable by name): the large pool for the benchmark, gang contention.

A generator takes a seeded ``random.Random`` and yields events; keyword arguments with defaults let
tests and benchmarks shrink or grow the same scenario.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator

from lwsflow.sim.evaluator.events import Event, JobCreate, NodeCreate, NodeDelete

HOUR, DAY, WEEK = 3600.0, 86400.0, 604800.0


def large_pool(
    rng: random.Random,
    *,
    nodes: int = 1000,
    jobs: int = 5000,
    gpus_per_node: int = 8,
    mean_gap_s: float = 120.0,
    node_failures: float = 0.01,
) -> Iterator[Event]:
    """1,000 nodes x 8 GPUs, 5,000 jobs of 1 h to 1 week arriving over about a week, a few node failures.

    Durations are log-uniform (many short jobs, a long tail of week-long ones); arrival gaps are
    exponential (a Poisson stream); a job is one pod of 1-8 GPUs, or 2-4 whole-node pods (a gang);
    owners announce a duration within +-20 % of the real one and a deadline 1.5-4x it after submission.
    About 1 % of the nodes fail once while jobs arrive and come back 1-6 hours later.
    """
    for i in range(nodes):
        yield NodeCreate(0.0, f"gpu-{i:05d}", gpus_per_node)
    t = 0.0
    for i in range(jobs):
        t += rng.expovariate(1.0 / mean_gap_s)
        duration = math.exp(rng.uniform(math.log(HOUR), math.log(WEEK)))
        if rng.random() < 0.6:
            pods, gpus, group = 1, rng.choice([1, 2, 4, 8]), "single"
        else:
            pods, gpus, group = rng.choice([2, 4]), gpus_per_node, "gang"
        expected = duration * rng.uniform(0.8, 1.2)
        yield JobCreate(
            t,
            f"job-{i:05d}",
            round(duration, 3),
            pods,
            min(gpus, gpus_per_node),
            round(expected, 3),
            round(expected * rng.uniform(1.5, 4.0), 3),
            group,
        )
    for i in rng.sample(range(nodes), int(nodes * node_failures)):
        down = rng.uniform(0.0, t)
        yield NodeDelete(down, f"gpu-{i:05d}")
        yield NodeCreate(down + rng.uniform(HOUR, 6 * HOUR), f"gpu-{i:05d}", gpus_per_node)


def gang_contention(rng: random.Random, *, nodes: int = 2, pods: int = 2, gangs: int = 2) -> Iterator[Event]:
    """Two 2-pod whole-node gangs on 2 nodes at the same instant: one-by-one placement deadlocks.

    Pods placed one by one give each gang one node and both wait forever for their second one;
    all-or-nothing placement runs one gang, then the other.
    """
    for i in range(nodes):
        yield NodeCreate(0.0, f"node-{i}", 8)
    for g in range(gangs):
        duration = HOUR * rng.uniform(1.0, 2.0)
        yield JobCreate(0.0, f"gang-{g}", round(duration), pods, 8, None, round(3 * duration * gangs), "gang")
