"""The embedded cluster's Kubernetes API over HTTP: enough for real ``kubectl`` and the official client.

``ApiServer(store)`` serves a ``lwsflow.sim.store.Store`` on 127.0.0.1: discovery, OpenAPI v3,
CRUD, watch, patch (merge, JSON, strategic, server-side apply), status/scale subresources, Table
printing, bearer-token auth and seeded fault injection (``ApiFaults``).
"""

from lwsflow.sim.apiserver.faults import ApiFaults
from lwsflow.sim.apiserver.server import ApiServer

__all__ = ["ApiFaults", "ApiServer"]
