"""`lwsflow dashboard`: a live web view of the RolloutPolicies (dashboard, docs/dashboard.md)."""

from __future__ import annotations

from typing import Annotated

import typer

from lwsflow.cli.app import app


@app.command()
def dashboard(
    namespace: Annotated[str, typer.Option("--namespace", "-n", help="The namespace to show.")] = "default",
    all_namespaces: Annotated[bool, typer.Option(
        "--all-namespaces", "-A", help="Show every namespace (needs cluster-wide list).")] = False,
    kubeconfig: Annotated[str | None, typer.Option(help="default: $KUBECONFIG, then ~/.kube/config")] = None,
    port: Annotated[int, typer.Option(help="Port on 127.0.0.1 (0: any free port).")] = 0,
) -> None:
    """Serve a live view of the rollouts on 127.0.0.1 with your kubeconfig (your RBAC decides what
    it shows and what its buttons may do); prints the URL, runs until Ctrl-C."""
    from lwsflow.dashboard import run_until_interrupted

    run_until_interrupted(kubeconfig=kubeconfig, namespace=None if all_namespaces else namespace, port=port)
