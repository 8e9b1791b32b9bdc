"""Bearer-token authentication: the embedded API refuses any request without the kubeconfig's token."""

from __future__ import annotations

import hmac

from lwsflow.controller.errors import Unauthorized


def check_bearer(header: str | None, token: str | None) -> None:
    """Raise Unauthorized (401) unless ``header`` is ``Bearer <token>``; no token configured: allow."""
    if token is None:
        return
    scheme, _, given = (header or "").partition(" ")
    # constant-time comparison: the token is the only thing guarding the cluster
    if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), token.encode()):
        raise Unauthorized("Unauthorized")
