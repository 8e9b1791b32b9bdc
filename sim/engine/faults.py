"""Failure modes of the stand-in engine: what a bad release does, so smoke checks can prove they fail.

A mode is written ``name[=value][:scope]`` and several are joined by commas, e.g.
``"slow-ttft=0.5,status500:chat"``. The same spelling is used by ``start_engine(modes=...)``, the
``lwsflow engine-stub --mode`` option and the pod annotation ``sim.lwsflow.io/engine-mode``.

Scopes name the endpoint a mode hits, so a test can break exactly one check:
``health``, ``models``, ``completions``, ``chat``, ``completions-stream``, ``chat-stream``, ``metrics``,
``kv`` (the prefill side channel). Without a scope a mode hits its natural default (see ``MODES``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from lwsflow.controller.errors import InvalidInput

SCOPES = ("health", "models", "completions", "chat", "completions-stream", "chat-stream", "metrics", "kv")
_GENERATION = ("completions", "chat", "completions-stream", "chat-stream")
_STREAMS = ("completions-stream", "chat-stream")

# mode name -> (default scopes, default value, what it does)
MODES: dict[str, tuple[tuple[str, ...], float, str]] = {
    "slow-ttft": (_STREAMS, 1.0, "wait VALUE seconds before the first token"),
    "slow-itl": (_STREAMS, 0.5, "wait VALUE seconds between tokens"),
    "status500": (_GENERATION, 0, "answer 500 InternalServerError"),
    "status503": (("health",), 0, "answer 503 (engine dead / still loading)"),
    "hang": (_GENERATION, 0, "accept the request and never answer (until the engine stops)"),
    "reset": (_GENERATION, 0, "close the connection without an answer"),
    "garbage": (_GENERATION, 0, "answer 200 with a body that is not JSON"),
    "half-stream": (_STREAMS, 0, "stop the SSE stream before data: [DONE]"),
    "stream-error": (_STREAMS, 0, "send an error event mid-stream (HTTP 200), as vLLM does"),
    "usage-mismatch": (_GENERATION, 0, "report usage counts that disagree with the text"),
    "bad-error-body": (("completions",), 0, "answer errors with a plain-text body"),
    "wrong-model": (("models",), 0, "serve the model under another name"),
    "bad-metrics": (("metrics",), 0, "expose /metrics that is not valid Prometheus text"),
    "broken-handoff": (("kv",), 0, "prefill: hand out transfer params the side channel does not know"),
    "no-kv-params": (("completions", "chat"), 0, "prefill: omit kv_transfer_params from the reply"),
    "kv-recompute": (("kv",), 0, "decode: kv_load_failure_policy=recompute (silently recompute)"),
}


@dataclass(frozen=True)
class Fault:
    """One parsed mode: name, numeric value (seconds for the slow-* modes) and endpoint scopes."""

    name: str
    value: float
    scopes: tuple[str, ...]


@dataclass(frozen=True)
class Faults:
    """The set of faults an engine runs with; ``get(name, scope)`` answers whether one applies."""

    items: tuple[Fault, ...] = field(default=())

    def get(self, name: str, scope: str) -> Fault | None:
        for f in self.items:
            if f.name == name and scope in f.scopes:
                return f
        return None

    def has(self, name: str) -> bool:
        return any(f.name == name for f in self.items)

    def __str__(self) -> str:
        return ",".join(f"{f.name}={f.value:g}:{'+'.join(f.scopes)}" for f in self.items)


def parse_faults(spec: str | None, field_name: str = "mode") -> Faults:
    """Parse ``name[=value][:scope[+scope]]`` items separated by commas; raises InvalidInput."""
    items: list[Fault] = []
    for raw in (spec or "").split(","):
        raw = raw.strip()
        if not raw:
            continue
        head, _, scope_part = raw.partition(":")
        name, _, value_part = head.partition("=")
        if name not in MODES:
            raise InvalidInput(f"unknown engine mode {name!r} (known: {', '.join(MODES)})", field=field_name)
        default_scopes, default_value, _ = MODES[name]
        try:
            value = float(value_part) if value_part else default_value
        except ValueError:
            raise InvalidInput(f"mode {name!r}: value {value_part!r} is not a number",
                               field=field_name) from None
        if value < 0:
            raise InvalidInput(f"mode {name!r}: value must be >= 0", field=field_name)
        scopes = tuple(s for s in scope_part.split("+") if s) if scope_part else default_scopes
        for s in scopes:
            if s not in SCOPES:
                raise InvalidInput(f"mode {name!r}: unknown scope {s!r} (known: {', '.join(SCOPES)})",
                                   field=field_name)
        items.append(Fault(name, value, scopes))
    return Faults(tuple(items))
