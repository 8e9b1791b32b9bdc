"""`lwsflow sim run SCENARIO.yaml [--json] [--plot out.png]`: rehearse a rollout in virtual time."""

from __future__ import annotations

from pathlib import Path

import typer

from lwsflow.rehearsal.cli.sim import sim_app


@sim_app.command("run")
def run(
    scenario: Path = typer.Argument(..., help="Scenario YAML: cluster, objects, timed actions, until."),
    as_json: bool = typer.Option(False, "--json", help="Print the timeline as JSON."),
    plot_path: Path | None = typer.Option(None, "--plot", help="Draw the timeline to this PNG."),
) -> None:
    """Play a scenario on the embedded cluster and print per-LWS/role timelines."""
    import json

    from lwsflow.controller.errors import OperationFailed
    from lwsflow.sim.scenario import load_scenario, run_scenario

    sc = load_scenario(scenario)
    result = run_scenario(sc)
    if plot_path is not None:
        from lwsflow.sim.plot import plot

        plot(result.timeline, plot_path, title=sc.name or scenario.name)
    if as_json:
        print(json.dumps({"scenario": sc.name or scenario.name, "reached": result.reached,
                          "elapsed_s": result.elapsed, **result.timeline.to_dict()}, indent=2))
    else:
        print(f"scenario: {sc.name or scenario.name}")
        print(result.timeline.render())
        state = "reached" if result.reached else "NOT reached"
        print(f"until-condition {state} after {result.elapsed:.0f}s virtual")
    if not result.reached:
        raise OperationFailed(f"until-condition not reached within {sc.until.timeout:.0f}s of virtual time")
