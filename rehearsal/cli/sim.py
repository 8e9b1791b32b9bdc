"""`lwsflow sim ...`: the embedded cluster's commands (run, serve, evaluate), one module each."""

from __future__ import annotations

import importlib

import typer

from lwsflow.cli.app import app

sim_app = typer.Typer(help="The embedded, virtual-time GPU cluster.", no_args_is_help=True)
app.add_typer(sim_app, name="sim")

for _name in ("sim_run", "sim_serve", "sim_evaluate", "sim_token"):
    importlib.import_module(f"lwsflow.rehearsal.cli.{_name}")
