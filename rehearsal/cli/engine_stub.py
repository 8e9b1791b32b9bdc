"""`lwsflow engine-stub ...`: the stand-in OpenAI-compatible engine (``lwsflow.sim.engine``)."""

from __future__ import annotations

import os
from typing import Annotated

import typer

from lwsflow.cli.app import app
from lwsflow.controller.errors import InvalidInput


@app.command("engine-stub")
def engine_stub(
    role: Annotated[str, typer.Option("--role", help="aggregated | prefill | decode")] = "aggregated",
    port: Annotated[int, typer.Option("--port")] = 8000,
    host: Annotated[str, typer.Option("--host", help="bind address")] = "127.0.0.1",
    model: Annotated[str, typer.Option("--model", help="served model id")] = "stub-model",
    mode: Annotated[str, typer.Option("--mode", help="failure modes, e.g. 'slow-ttft=0.5'")] = "",
    ttft: Annotated[float, typer.Option("--ttft", help="base time to first token, seconds")] = 0.0,
    itl: Annotated[float, typer.Option("--itl", help="base inter-token latency, seconds")] = 0.0,
    api_key_env: Annotated[str | None, typer.Option("--api-key-env", help="env var with the API key")] = None,
    error_style: Annotated[str, typer.Option("--error-style", help="vllm | sglang")] = "vllm",
    side_channel_port: Annotated[int, typer.Option("--side-channel-port", help="prefill KV port")] = 0,
    exit_after: Annotated[float | None, typer.Option("--exit-after", help="stop after N seconds")] = None,
) -> None:
    """Run the stand-in OpenAI-compatible engine (vLLM shapes, P/D hand-off, failure modes)."""
    import signal
    import threading

    from pydantic import ValidationError

    from lwsflow.sim.engine import parse_faults, start_engine

    parse_faults(mode, "--mode")  # name the flag in the one-line error
    api_key = None
    if api_key_env:
        api_key = os.environ.get(api_key_env) or None
        if api_key is None:
            raise InvalidInput(f"environment variable {api_key_env} is unset or empty", field="--api-key-env")
    if not 0 <= port <= 65535:
        raise InvalidInput(f"{port} is not a port number", field="--port")
    try:
        handle = start_engine(host=host, port=port, role=role, model=model, modes=mode, ttft_s=ttft,
                              itl_s=itl, api_key=api_key, error_style=error_style,
                              side_channel_port=side_channel_port)
    except ValidationError as exc:
        err = exc.errors()[0]
        raise InvalidInput(err["msg"], field="--" + str(err["loc"][0]).replace("_", "-")) from None
    except OSError as exc:
        raise InvalidInput(f"cannot bind {host}:{port}: {exc.strerror}", field="--port") from None
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    print(f"engine-stub {role} serving {model} on {handle.url}", flush=True)
    try:
        stop.wait(exit_after)
    except KeyboardInterrupt:
        pass
    finally:
        handle.stop()
