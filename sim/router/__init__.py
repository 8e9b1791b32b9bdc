"""The stand-in llm-d request path: proxy + endpoint picker (EPP) over InferencePools, and the
decode-side routing sidecar that runs the NIXL-style P/D hand-off (docs/llm-d.md).

It reads pools and pods straight from the embedded cluster's store and talks real HTTP on loopback
to the stand-in engines (``sim/engine``), which it does not modify.
"""

from __future__ import annotations

from lwsflow.sim.router.epp import DEFAULT_NON_CACHED_TOKENS, PoolEndpoint, decide, should_disaggregate
from lwsflow.sim.router.proxy import Route, Router, start_router
from lwsflow.sim.router.sidecar import RoutingSidecar, prefill_body

__all__ = ["DEFAULT_NON_CACHED_TOKENS", "PoolEndpoint", "Route", "Router", "RoutingSidecar", "decide",
           "prefill_body", "should_disaggregate", "start_router"]
