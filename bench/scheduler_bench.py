"""Benchmark: the scenario evaluator on 1,000 nodes x 8 GPUs and 5,000 jobs of 1 hour to 1 week.

Jobs arrive over about a week (the shipped ``large`` generator scenario); each policy is simulated to
the last completion. Prints, per policy: wall time, virtual time simulated, events processed per wall
second and the virtual-to-wall speed-up, plus the headline outcome (deadlines met, preemptions). The
target is under 10 s of wall time per policy.
Run: ``.venv/bin/python bench/scheduler_bench.py [--nodes 1000] [--jobs 5000] [--seed 1] [--policy P ...]``.
"""

from __future__ import annotations

import argparse
import random
import time

from lwsflow.sim import policies
from lwsflow.sim.evaluator import generators, metrics
from lwsflow.sim.evaluator.engine import Engine
from lwsflow.sim.evaluator.scenario import Scenario

TARGET_S = 10.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--jobs", type=int, default=5000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--policy", action="append", choices=list(policies.POLICIES))
    args = ap.parse_args()
    t0 = time.perf_counter()
    events = list(generators.large_pool(random.Random(args.seed), nodes=args.nodes, jobs=args.jobs))
    scenario = Scenario("large", events)
    print(f"scenario: {args.nodes} nodes x 8 GPUs, {args.jobs} jobs (1 h - 1 week), seed {args.seed}; "
          f"{len(events)} scenario events generated in {time.perf_counter() - t0:.2f}s")
    print(f"{'policy':<22} {'wall':>7} {'virtual':>9} {'events':>7} {'events/s':>9} {'speed-up':>10} "
          f"{'met':>10} {'preempt':>7} {'util':>6}  target")
    worst = 0.0
    for name in args.policy or list(policies.POLICIES):
        wall0 = time.perf_counter()
        result = Engine(scenario, policies.POLICIES[name]).run()
        wall = time.perf_counter() - wall0
        worst = max(worst, wall)
        s = metrics.summarize(result)
        print(f"{name:<22} {wall:>6.2f}s {result.end / 86400:>7.1f} d {result.events:>7} "
              f"{result.events / wall:>9.0f} {result.end / wall:>9.0f}x "
              f"{s['deadlines_met']:>5}/{s['with_deadline']:<4} {s['preemptions']:>7} "
              f"{100 * s['gpu_utilization_mean']:>5.1f}%  {'ok' if wall < TARGET_S else 'SLOW'}")
    print(f"slowest policy: {worst:.2f}s wall (target < {TARGET_S:g}s)")


if __name__ == "__main__":
    main()
