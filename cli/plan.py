"""`lwsflow plan CATALOG [--json] [--env ENV]`: GPU sizing per model and role.

People get a table (TP, PP, pods per group, GPUs per pod / replica / total, nodes, memory headroom,
whether the pool has room for the replicas plus maxSurge); ``--json`` prints the same rows for
machines. A bad or infeasible catalog is one line naming the field, exit code 2; so is a pool its
models overcommit together, unless the pool sets ``allowOvercommit: true``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from lwsflow.cli.app import app

_COLUMNS = (
    ("model", "Model"), ("role", "Role"), ("pool", "Pool"), ("tp", "TP"), ("pp", "PP"), ("size", "Size"),
    ("gpus_per_pod", "GPUs/pod"), ("gpus_per_replica", "GPUs/replica"), ("replicas", "Replicas"),
    ("gpus_total", "GPUs"), ("nodes_total", "Nodes"), ("memory_headroom_gib", "Headroom GiB"),
    ("surge_room", "Room for surge"),
)


def plan_report(catalog_path: Path, env: str | None) -> dict[str, Any]:
    """The whole plan: one flat row per model and role (catalog order) and the pools' node usage."""
    from lwsflow.cli.output import about_file, warn_about_catalog
    from lwsflow.components.catalog import load_catalog
    from lwsflow.components.sizing import check_pool_capacity, pool_usage, size_catalog

    catalog = load_catalog(catalog_path)
    warn_about_catalog(catalog, catalog_path)
    if env is not None:
        catalog.environment(env)  # unknown environment -> InvalidInput naming --env
    with about_file(catalog_path):  # sizing errors name the field; say which file too
        sizings = size_catalog(catalog, env)
        check_pool_capacity(catalog, sizings, env)  # an overcommitted pool is an error, as in `render`
    rows: list[dict[str, Any]] = []
    for ms in sizings:
        for rs in ms.roles.values():
            row: dict[str, Any] = {"model": ms.model, "served_model": ms.served_model, "engine": ms.engine,
                                   "mode": ms.mode, "env": env}
            row.update(vars(rs))
            rows.append(row)
    pools = pool_usage(catalog, sizings)
    return {"catalog": str(catalog_path), "env": env, "roles": rows, "pools": pools}


def _surge_cell(row: dict[str, Any]) -> str:
    need = f"{row['nodes_with_surge']}/{row['pool_nodes']} nodes"
    return f"yes ({need})" if row["fits_with_surge"] else f"NO ({need})"


@app.command()
def plan(
    catalog: Annotated[Path, typer.Argument(help="catalog YAML")],
    as_json: Annotated[bool, typer.Option("--json", help="machine-readable output")] = False,
    env: Annotated[str | None, typer.Option("--env", help="apply this environment's overrides")] = None,
) -> None:
    """Print the GPU sizing of every model and role in CATALOG."""
    report = plan_report(catalog, env)
    rows, pools = report["roles"], report["pools"]
    if as_json:
        print(json.dumps(report, indent=2))
        return
    from rich.console import Console
    from rich.table import Table

    title = f"lwsflow plan: {catalog}" + (f" (env {env})" if env else "")
    table = Table(title=title)
    for key, header in _COLUMNS:
        left = key in ("model", "role", "pool", "surge_room")
        table.add_column(header, justify="left" if left else "right")
    for row in rows:
        cells = [_surge_cell(row) if key == "surge_room" else str(row[key]) for key, _ in _COLUMNS]
        table.add_row(*cells)
    console = Console(width=max(160, Console().width))
    console.print(table)
    for row in rows:
        console.print(f"  {row['model']}/{row['role']}: {row['reason']}", highlight=False)
    for p in pools:
        verdict = "fits" if p["fits"] else "OVERCOMMITTED, allowed by allowOvercommit"
        console.print(f"  pool {p['pool']}: all models together need {p['nodes_used']} of {p['nodes']} "
                      f"nodes ({verdict})", highlight=False)
