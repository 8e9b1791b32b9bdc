"""One process-wide httpx client for lwsflow's short HTTP calls: hooks, Prometheus queries, webhooks,
metrics scrapes, the stand-in engines' KV side channel.

``httpx.get(url)`` builds a client per call, and that client's TLS context loads the CA bundle: about
30 ms of CPU per request (plain HTTP included), against about 1 ms through a shared client (measured
by ``bench/http_client.py``). Keep-alive stays off, so each request still opens its own connection,
as the per-call form did: a pod replaced between two requests is never reached over a connection to
the old one. ``httpx.Client`` is safe to share between threads (its connection pool locks).
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import httpx

_lock = threading.Lock()
_client: httpx.Client | None = None


def shared() -> httpx.Client:
    """The process's client (made on first use; pass ``timeout=`` per request). httpx is imported
    here, not at the top: the CLI's commands that make no request start without it."""
    import httpx

    global _client
    with _lock:
        if _client is None:
            _client = httpx.Client(limits=httpx.Limits(max_keepalive_connections=0))
        return _client
