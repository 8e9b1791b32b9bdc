"""Kubeconfig files pointing kubectl and the kubernetes client at the embedded API server.

A token-protected embedded server speaks HTTPS with a per-start self-signed certificate; servers
register it here (``register_ca``) so ``write_kubeconfig(path, url, token)`` embeds the right CA
without the caller passing it.
"""

from __future__ import annotations

import base64
import os
import tempfile
from pathlib import Path

from lwsflow.controller.yamlio import dump_yaml

_CA_BY_URL: dict[str, bytes] = {}  # base URL -> PEM of the servers running in this process


def register_ca(server_url: str, ca_pem: bytes | None) -> None:
    """Remember (or, with None, forget) the certificate a running server presents."""
    if ca_pem is None:
        _CA_BY_URL.pop(server_url, None)
    else:
        _CA_BY_URL[server_url] = ca_pem


def kubeconfig_dict(
    server_url: str, token: str | None, context: str = "lwsflow-sim", ca_pem: bytes | None = None
) -> dict:
    user: dict[str, str] = {"token": token} if token else {}
    cluster: dict[str, str] = {"server": server_url}
    ca_pem = ca_pem or _CA_BY_URL.get(server_url)
    if ca_pem:
        cluster["certificate-authority-data"] = base64.b64encode(ca_pem).decode()
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "preferences": {},
        "clusters": [{"name": context, "cluster": cluster}],
        "users": [{"name": context, "user": user}],
        "contexts": [
            {"name": context, "context": {"cluster": context, "user": context, "namespace": "default"}}
        ],
        "current-context": context,
    }


def write_kubeconfig(
    path: str | Path,
    server_url: str,
    token: str | None,
    context: str = "lwsflow-sim",
    *,
    ca_pem: bytes | None = None,
) -> Path:
    """Write a kubeconfig atomically with mode 0600 (it holds the token); returns the path.

    ``ca_pem`` is the server's certificate when it serves HTTPS (kubectl sends tokens only over TLS).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(dump_yaml(kubeconfig_dict(server_url, token, context, ca_pem)))
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
