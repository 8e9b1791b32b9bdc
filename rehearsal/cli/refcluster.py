"""`lwsflow refcluster up | down | kubeconfig`: the reference cluster (real control plane, upstream LWS)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from lwsflow.cli.app import app

refcluster_app = typer.Typer(
    help="The reference cluster: kube-apiserver, controller-manager, scheduler, etcd, kwok and the upstream "
    "LWS controller on 127.0.0.1, built by scripts/build-refcluster.", no_args_is_help=True)
app.add_typer(refcluster_app, name="refcluster")

StateDir = Annotated[Path, typer.Option("--state-dir", help="Folder holding the keys, logs and kubeconfig.")]
_STATE = Path(".lwsflow/refcluster")


@refcluster_app.command("up")
def up(
    catalog: Annotated[Path | None, typer.Option(
        "--catalog", help="Create nodes from this catalog's nodePools (default: the embedded cluster's "
        "default pools, which are the example catalog's).")] = None,
    state_dir: StateDir = _STATE,
    ready_delay: Annotated[float, typer.Option(
        "--ready-delay", help="Seconds from Running to Ready for every pod.")] = 2.0,
    never_ready: Annotated[list[str] | None, typer.Option(
        "--never-ready", help="Image pattern (fnmatch): its pods run, never Ready; repeatable.")] = None,
    timeout: Annotated[float, typer.Option("--timeout", help="Seconds to wait for the cluster.")] = 180.0,
    kueue: Annotated[bool, typer.Option(
        "--kueue", help="Also run Kueue's manager (built by scripts/build-refcluster) with its CRDs and "
        "webhooks and the LeaderWorkerSet integration on.")] = False,
) -> None:
    """Start the reference cluster and print the path of its admin kubeconfig (mode 0600)."""
    from lwsflow.controller.errors import InvalidInput
    from lwsflow.rehearsal.refcluster.launcher import UpOptions
    from lwsflow.rehearsal.refcluster.launcher import up as start

    if not timeout > 0:
        raise InvalidInput(f"must be greater than 0, got {timeout:g}", field="--timeout")
    path = start(UpOptions(state_dir=state_dir, catalog=catalog, ready_delay_s=ready_delay,
                           never_ready=tuple(never_ready or ()), timeout_s=timeout, kueue=kueue,
                           log=lambda msg: print(f"refcluster: {msg}", file=sys.stderr, flush=True)))
    print(path)


@refcluster_app.command("down")
def down(state_dir: StateDir = _STATE) -> None:
    """Stop the reference cluster's programs and remove its state folder."""
    from lwsflow.rehearsal.refcluster.launcher import down as stop

    stopped = stop(state_dir)
    print(f"stopped: {', '.join(stopped)}" if stopped else "nothing was running")


@refcluster_app.command("kubeconfig")
def kubeconfig(state_dir: StateDir = _STATE) -> None:
    """Print the path of the running reference cluster's admin kubeconfig."""
    from lwsflow.rehearsal.refcluster.launcher import kubeconfig_path

    print(kubeconfig_path(state_dir).resolve())
