"""`lwsflow demo`: the whole flow on this machine (embedded cluster, registry, git, kfp local)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from lwsflow.cli.app import app


@app.command()
def demo(
    out: Annotated[Path, typer.Option("--out", help="artifacts folder")] = Path(".lwsflow/demo"),
    models: Annotated[str, typer.Option("--models", help="comma-separated catalog models")] = "",
    catalog: Annotated[Path | None, typer.Option("--catalog", help="catalog to deploy "
                                                 "(default: the repository's examples/catalog.yaml)")] = None,
    bad_release: Annotated[bool, typer.Option(
        "--bad-release/--no-bad-release",
        help="also release an image that becomes ready but answers 40% slower (first token in 63 ms "
             "instead of 45 ms): the analysis after stage 1 catches it, and the controller rolls back")
    ] = True,
    speed: Annotated[float, typer.Option("--speed", help="virtual seconds per real second", min=1)] = 600.0,
    verbose: Annotated[bool, typer.Option("--verbose", "-v",
                                          help="show the kfp runner's whole output")] = False,
    keep: Annotated[bool, typer.Option(
        "--keep", help="after the checks, keep the embedded cluster, the controller and the dashboard up "
                       "until Ctrl-C")] = False,
) -> None:
    """The whole flow on this machine: embedded cluster, registry, git; deploy-model through kfp local."""
    from lwsflow.controller.api.paths import repo_root
    from lwsflow.rehearsal.demo import Keep, run_demo

    code = run_demo(out=out, catalog=catalog or repo_root() / "examples" / "catalog.yaml",
                    models=[m.strip() for m in models.split(",") if m.strip()],
                    bad_release=bad_release, speed=speed, verbose=verbose, keep=Keep() if keep else None)
    if code:
        raise typer.Exit(code)
