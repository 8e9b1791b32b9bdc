"""`lwsflow analysis run SPEC ...`: measure a revision against its spec (and the stable revision).

SPEC is a YAML file or a built-in template name (vllm, vllm-pd, sglang, sglang-pd). Each measurement
prints one line as it is taken; the last line is the verdict. Exit 0 successful, 1 failed or
inconclusive, 2 bad input.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from lwsflow.pipelines.cli.app import app

analysis_app = typer.Typer(help="Analysis gates: metrics over time, new revision against stable.",
                           no_args_is_help=True)
app.add_typer(analysis_app, name="analysis")


@analysis_app.command("run")
def run(
    spec: Annotated[str, typer.Argument(help="analysis spec file, or vllm / vllm-pd / sglang / sglang-pd")],
    revision: Annotated[str, typer.Option(help="the new revision (LWS template-revision-hash)")],
    lws: Annotated[str, typer.Option(help="the LeaderWorkerSet's name ({{lws}})")],
    stable_revision: Annotated[str, typer.Option(help="the stable revision to compare with")] = "",
    prometheus: Annotated[str, typer.Option(help="Prometheus base URL")] = "",
    namespace: Annotated[str, typer.Option("--namespace", "-n")] = "default",
    role: Annotated[str, typer.Option(help="the role ({{role}}): aggregated, prefill, decode")] = (
        "aggregated"),
    window: Annotated[str, typer.Option(help="the {{window}} range, e.g. 30s (default: each interval)")] = "",
    json_out: Annotated[bool, typer.Option("--json", help="print the result as one JSON document")] = False,
    kubeconfig: Annotated[str | None, typer.Option(help="for smoke metrics: default $KUBECONFIG, else "
                                                    "in-cluster")] = None,
) -> int:
    """Run an analysis on its own and print each measurement and the verdict."""
    from lwsflow.controller.analysis.run import check_inputs, provider_measure, run_analysis
    from lwsflow.controller.analysis.spec import load_spec, parse_duration, promql_duration
    from lwsflow.controller.errors import InvalidInput

    doc = load_spec(Path(spec))
    args = {"revision": revision, "stable_revision": stable_revision, "namespace": namespace, "lws": lws,
            "role": role}
    if not revision:
        raise InvalidInput("must not be empty", field="--revision")
    if window:
        try:
            args["window"] = promql_duration(parse_duration(window))
        except ValueError as exc:
            raise InvalidInput(str(exc), field="--window") from None
    try:
        check_inputs(doc, args)  # every input checked before the first measurement
    except InvalidInput as exc:
        raise InvalidInput(exc.message, field="--" + exc.field.replace("_", "-")) from None
    if not prometheus and any(m.provider.prometheus and not m.provider.prometheus.address
                              for m in doc.metrics):
        raise InvalidInput("the spec has prometheus metrics; give --prometheus URL", field="--prometheus")
    from lwsflow.components.analysis_smoke import smoke_measure

    res = run_analysis(doc, args, provider_measure(prometheus or None, smoke_measure(kubeconfig)),
                       on_measurement=None if json_out else (lambda m: print(m.line(), flush=True)))
    if json_out:
        print(json.dumps(res.as_dict(), sort_keys=True))
    else:
        print(f"analysis {res.phase}: " + ", ".join(f"{k}={v or 'not run'}" for k, v in res.metrics.items()))
    return 0 if res.phase == "successful" else 1
