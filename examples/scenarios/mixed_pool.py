"""Example generator scenario: a shared pool with unequal healthy GPUs, a serving LWS and batch jobs.

Run it with::

    lwsflow sim evaluate examples/scenarios/mixed_pool.py:mixed_pool --seed 7 --plot mixed.png

A generator is a plain function taking a seeded ``random.Random`` and yielding timed events; the
same seed always gives the same scenario.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

from lwsflow.sim.evaluator.events import Event, JobCreate, LwsCreate, LwsDelete, NodeCreate, NodeDelete

MINUTE, HOUR = 60.0, 3600.0


def mixed_pool(rng: random.Random) -> Iterator[Event]:
    """16 nodes (some with failed GPUs), a 2x2 serving LWS for 6 h, 120 batch jobs over 4 hours."""
    for i in range(16):
        healthy = 8 if i % 4 else rng.choice([6, 7])  # every 4th node lost a GPU or two
        yield NodeCreate(0.0, f"h100-{i:02d}", healthy)
    yield LwsCreate(10 * MINUTE, "llama-405b", replicas=2, size=2, gpus=8, group="serving")
    yield LwsDelete(6 * HOUR, "llama-405b")
    t = 0.0
    for i in range(120):
        t += rng.expovariate(1 / (2 * MINUTE))
        kind = rng.choice(["eval", "eval", "build", "finetune"])
        if kind == "finetune":
            pods, gpus, duration = 2, 8, rng.uniform(1, 3) * HOUR
        elif kind == "eval":
            pods, gpus, duration = 1, rng.choice([1, 2, 4]), rng.uniform(10, 40) * MINUTE
        else:
            pods, gpus, duration = 1, 1, rng.uniform(5, 15) * MINUTE
        yield JobCreate(t, f"{kind}-{i:03d}", duration, pods, gpus, None, duration * rng.uniform(2, 6), kind)
    yield NodeDelete(2 * HOUR, "h100-05")  # a node fails mid-run: its jobs restart elsewhere
