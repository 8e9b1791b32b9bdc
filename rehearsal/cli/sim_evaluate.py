"""`lwsflow sim evaluate`: run a scenario under one or more scheduling policies in virtual time."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from lwsflow.rehearsal.cli.sim import sim_app


@sim_app.command("evaluate")
def evaluate(
    scenario: Annotated[str, typer.Argument(
        metavar="SCENARIO", help="A scenario YAML file, a generator as module:function or file.py:function, "
                                 "or a shipped name (deadlines, large, gang-contention).")],
    policy: Annotated[list[str] | None, typer.Option(
        "--policy", "-p", help="Policy to evaluate; repeat to compare side by side (default: all of "
                               "default, gang, binpack-fragmentation, least-slack-time).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON (per policy: jobs, deadlines met, "
                                                          "missed, waits, utilization, ...).")] = False,
    plot: Annotated[Path | None, typer.Option("--plot", help="Write a per-job Gantt picture "
                                                             "(.png, .svg or .pdf).")] = None,
    seed: Annotated[int, typer.Option("--seed", help="Seed of generator scenarios' randomness.")] = 0,
    plot_jobs: Annotated[int, typer.Option("--plot-jobs", help="Jobs drawn in the Gantt picture "
                                                               "(the first ones by submission).")] = 60,
) -> None:
    """Evaluate GPU pool scheduling policies on a scenario (deadlines, waits, utilization, fragmentation)."""
    import json

    from lwsflow.controller.errors import InvalidInput
    from lwsflow.sim import policies
    from lwsflow.sim.evaluator import metrics
    from lwsflow.sim.evaluator import scenario as scenarios
    from lwsflow.sim.evaluator.engine import Engine

    names = list(dict.fromkeys(policy or policies.POLICIES))  # keep order, drop repeats
    chosen = [policies.get_policy(n) for n in names]
    if plot_jobs < 1:
        raise InvalidInput(f"must be >= 1, got {plot_jobs}", field="--plot-jobs")
    if plot is not None and plot.suffix.lower() not in (".png", ".svg", ".pdf"):
        raise InvalidInput(f"expected a .png, .svg or .pdf file, got {plot.name!r}", field="--plot")
    sc = scenarios.load(scenario, seed)
    results = [Engine(sc, p).run() for p in chosen]
    summaries = {r.policy: metrics.summarize(r) for r in results}
    if plot is not None:
        from lwsflow.sim.evaluator import gantt
        gantt.plot(results, plot, max_jobs=plot_jobs)
    if as_json:
        print(json.dumps({"scenario": sc.name, "seed": seed, "policies": summaries}, indent=2))
        return
    print(f"scenario {sc.name}" + (f": {sc.description}" if sc.description else ""))
    print(metrics.table(summaries))
    if plot is not None:
        print(f"wrote {plot}")
