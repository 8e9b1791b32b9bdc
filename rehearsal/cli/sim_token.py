"""`lwsflow sim token SA -n NS`: a ServiceAccount token from a running `sim serve` (TokenRequest API)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated

import typer

from lwsflow.rehearsal.cli.sim import sim_app

_NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def token_seconds(text: str) -> int:
    """``90m``, ``8760h``, ``2d`` (the one duration grammar) -> whole seconds; at least 10 minutes, as
    the TokenRequest API demands."""
    from lwsflow.controller.api.duration import parse_duration
    from lwsflow.controller.errors import InvalidInput

    seconds = parse_duration(text, "--duration")
    if seconds < 600:
        raise InvalidInput(f"must be at least 10m, got {text}", field="--duration")
    if seconds != int(seconds):
        raise InvalidInput(f"must be whole seconds, got {text}", field="--duration")
    return int(seconds)


@sim_app.command("token")
def token(
    service_account: Annotated[str, typer.Argument(help="ServiceAccount name.", show_default=False)],
    namespace: Annotated[
        str, typer.Option("--namespace", "-n", help="The ServiceAccount's namespace.")
    ] = "default",
    kubeconfig: Annotated[
        Path | None,
        typer.Option("--kubeconfig", help="The admin kubeconfig `sim serve` wrote (default: $KUBECONFIG)."),
    ] = None,
    duration: Annotated[
        str,
        typer.Option("--duration", help="Validity in cluster time (the cluster runs faster than the wall "
                     "clock: 8760h lasts ~15 wall hours at x600)."),
    ] = "8760h",
    kubeconfig_out: Annotated[
        Path | None,
        typer.Option("--kubeconfig-out",
                     help="Write a kubeconfig (mode 0600) using the token instead of printing the token."),
    ] = None,
) -> None:
    """Mint a token for a ServiceAccount: its requests are authorised by the cluster's RBAC objects."""
    from lwsflow.controller.errors import InvalidInput
    from lwsflow.controller.kube.client import Kube
    from lwsflow.sim.kubeconfig import write_kubeconfig

    for value, flag in ((service_account, "SERVICE_ACCOUNT"), (namespace, "--namespace")):
        if len(value) > 253 or not _NAME.fullmatch(value):
            raise InvalidInput(f"not a valid Kubernetes name: {value!r}", field=flag)
    seconds = token_seconds(duration)
    if kubeconfig_out is not None and kubeconfig_out.is_dir():
        raise InvalidInput(f"{kubeconfig_out} is a directory", field="--kubeconfig-out")
    kube = Kube.connect(str(kubeconfig) if kubeconfig else None)
    body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
            "spec": {"expirationSeconds": seconds}}
    resp = kube.request("POST", f"/api/v1/namespaces/{namespace}/serviceaccounts/{service_account}/token",
                        body=body)
    tok = resp["status"]["token"]
    if kubeconfig_out is None:
        typer.echo(tok)  # the point of the command, like `kubectl create token`
        return
    cfg = kube.api.configuration
    ca = Path(cfg.ssl_ca_cert).read_bytes() if cfg.ssl_ca_cert else None
    write_kubeconfig(kubeconfig_out, cfg.host, tok, context=f"{service_account}@{namespace}", ca_pem=ca)
    typer.echo(f"kubeconfig for system:serviceaccount:{namespace}:{service_account}: {kubeconfig_out} "
               f"(expires {resp['status']['expirationTimestamp']})")
