"""The stand-in inference engine: an OpenAI-compatible HTTP server for CPU-only rehearsals and tests.

It speaks vLLM's HTTP surface (``/health``, ``/ping``, ``/version``, ``/v1/models``,
``/v1/completions``, ``/v1/chat/completions`` with SSE streaming, ``/metrics`` under vLLM metric
names), runs as role ``aggregated``, ``prefill`` or ``decode`` with vLLM's NIXL-style P/D hand-off over
a loopback side channel, and can misbehave on purpose (``faults``) so smoke checks can prove they fail.
Simulated leader pods of the embedded cluster run it through ``EnginePodHook``.

It must not import ``components`` (dependency direction ``components -> controller``).
"""

from __future__ import annotations

from lwsflow.sim.engine.faults import MODES, parse_faults
from lwsflow.sim.engine.openai_api import ROLES, EngineOptions
from lwsflow.sim.engine.podhook import ENGINE_MODE_ANNOTATION, EnginePodHook
from lwsflow.sim.engine.server import EngineHandle, start_engine

__all__ = [
    "ENGINE_MODE_ANNOTATION",
    "MODES",
    "ROLES",
    "EngineHandle",
    "EngineOptions",
    "EnginePodHook",
    "parse_faults",
    "start_engine",
]
