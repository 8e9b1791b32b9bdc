"""`lwsflow smoke ...`: the serving gate (the stand-in engine, `lwsflow engine-stub`, is a rehearsal
command: ``lwsflow.rehearsal.cli.engine_stub``).

Secrets never come from the command line: the bearer token is read from ``--token-env VAR`` or
``--token-file PATH``. Exit codes: 0 every check passed, 1 a check failed, 2 bad input.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from lwsflow.cli.app import app
from lwsflow.controller.errors import InvalidInput, OperationFailed

if TYPE_CHECKING:
    from lwsflow.components.smoke import SmokeConfig

_FIELD_FLAGS = {"urls": "--url", "prefill_url": "--prefill-url", "decode_url": "--decode-url",
                "gateway_url": "--gateway-url", "targets": "TARGET", "max_ttft_s": "--max-ttft",
                "max_itl_s": "--max-itl", "request_timeout_s": "--timeout", "deadline_s": "--deadline",
                "warmup_s": "--warmup"}


def read_token(token_env: str | None, token_file: Path | None) -> str | None:
    """The bearer token from an environment variable or a file (never from argv)."""
    if token_env and token_file:
        raise InvalidInput("give --token-env or --token-file, not both", field="--token-env")
    if token_env:
        value = os.environ.get(token_env, "").strip()
        if not value:
            raise InvalidInput(f"environment variable {token_env} is unset or empty", field="--token-env")
        return value
    if token_file:
        try:
            value = token_file.read_text().strip()
        except OSError as exc:
            raise InvalidInput(f"cannot read {token_file}: {exc.strerror}", field="--token-file") from None
        if not value:
            raise InvalidInput(f"{token_file} is empty", field="--token-file")
        return value
    return None


def build_config(**kw: object) -> SmokeConfig:
    """SmokeConfig from CLI values; a validation error becomes one InvalidInput naming the flag."""
    from pydantic import ValidationError

    from lwsflow.components.smoke import SmokeConfig

    try:
        return SmokeConfig(**kw)
    except ValidationError as exc:
        err = exc.errors()[0]
        name = str(err["loc"][0]) if err["loc"] else ""
        raise InvalidInput(err["msg"].removeprefix("Value error, "),
                           field=_FIELD_FLAGS.get(name, "--" + name.replace("_", "-"))) from None


@app.command()
def smoke(
    target: Annotated[list[str] | None, typer.Argument(help="lws/NAME, pair/NAME or ds/NAME")] = None,
    url: Annotated[list[str] | None, typer.Option("--url", help="aggregated endpoint (repeatable)")] = None,
    prefill_url: Annotated[str | None, typer.Option("--prefill-url")] = None,
    decode_url: Annotated[str | None, typer.Option("--decode-url")] = None,
    gateway_url: Annotated[str | None, typer.Option("--gateway-url")] = None,
    namespace: Annotated[str, typer.Option("--namespace", "-n")] = "default",
    kubeconfig: Annotated[str | None, typer.Option("--kubeconfig")] = None,
    context: Annotated[str | None, typer.Option("--context")] = None,
    revision_only: Annotated[bool, typer.Option("--revision-only", help="newest revision only")] = False,
    model: Annotated[str | None, typer.Option("--model", help="expected served model id")] = None,
    token_env: Annotated[str | None, typer.Option("--token-env", help="env var with the token")] = None,
    token_file: Annotated[Path | None, typer.Option("--token-file", help="file with the token")] = None,
    insecure: Annotated[bool, typer.Option("--insecure", help="do not verify TLS certificates")] = False,
    ca_file: Annotated[str | None, typer.Option("--ca-file")] = None,
    timeout: Annotated[float, typer.Option("--timeout", help="seconds per request")] = 10.0,
    warmup: Annotated[float, typer.Option("--warmup", help="seconds /health may keep failing")] = 30.0,
    retries: Annotated[int, typer.Option("--retries")] = 3,
    deadline: Annotated[float, typer.Option("--deadline", help="seconds for the whole run")] = 300.0,
    max_tokens: Annotated[int, typer.Option("--max-tokens")] = 8,
    max_ttft: Annotated[float | None, typer.Option("--max-ttft", help="TTFT gate, seconds")] = None,
    max_itl: Annotated[float | None, typer.Option("--max-itl", help="mean inter-token gate, seconds")] = None,
    expected_version: Annotated[str | None, typer.Option("--expected-version")] = None,
    gpu_product: Annotated[str | None, typer.Option("--gpu-product")] = None,
    node_pool: Annotated[str | None, typer.Option("--node-pool")] = None,
    gpus_per_pod: Annotated[int | None, typer.Option("--gpus-per-pod")] = None,
    no_placement: Annotated[bool, typer.Option("--no-placement")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="print the JSON report")] = False,
    report: Annotated[Path | None, typer.Option("--report", help="also write the JSON report here")] = None,
) -> None:
    """Smoke-test endpoints: health, models, completions, streams, errors, metrics, P/D, placement."""
    from lwsflow.components.smoke import render_table, run_smoke, write_report

    cfg = build_config(
        targets=list(target or []), urls=list(url or []), prefill_url=prefill_url, decode_url=decode_url,
        gateway_url=gateway_url, namespace=namespace, kubeconfig=kubeconfig, context=context,
        revision_only=revision_only, model=model, token=read_token(token_env, token_file),
        verify_tls=not insecure, ca_file=ca_file, request_timeout_s=timeout, warmup_s=warmup,
        retries=retries, deadline_s=deadline, max_tokens=max_tokens, max_ttft_s=max_ttft,
        max_itl_s=max_itl, expected_version=expected_version, gpu_product=gpu_product,
        node_pool=node_pool, gpus_per_pod=gpus_per_pod, placement=not no_placement)
    if ca_file and not Path(ca_file).is_file():
        raise InvalidInput(f"{ca_file}: no such file", field="--ca-file")
    result = run_smoke(cfg)
    if report is not None:
        write_report(result, report)
    print(result.to_json() if as_json else render_table(result), end="" if not as_json else "\n")
    if not result.passed:
        failed = result.failed()
        names = ", ".join(sorted({f"{c.name}" for c in failed})) or "no check ran"
        raise OperationFailed(f"smoke failed: {len(failed)} of {len(result.checks)} checks ({names})")
