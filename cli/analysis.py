"""`lwsflow analysis run SPEC ...`: measure a revision against its spec (and the stable revision).

SPEC is a YAML file or a built-in template name (vllm, vllm-pd, sglang, sglang-pd). Each measurement
prints one line as it is taken; the last line is the verdict. Exit 0 successful, 1 failed or
inconclusive or error (a provider that could not answer), 2 bad input.

``--revision auto`` reads the revisions from the API, as the rollout hook does: the new one is the
leader StatefulSet's template hash, the stable one the other hash among the serving leader pods; it
waits until Prometheus has scraped those pods, and skips (exit 0) a comparing analysis when no stable
pod serves any more. ``--lws`` and ``-n`` default to the ``LWSFLOW_NAME`` / ``LWSFLOW_NAMESPACE`` a
rollout's command check sets, so a RolloutPolicy stage can run it as a ``command`` check.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from lwsflow.cli.app import app

analysis_app = typer.Typer(help="Analysis gates: metrics over time, new revision against stable.",
                           no_args_is_help=True)
app.add_typer(analysis_app, name="analysis")


@analysis_app.command("run")
def run(
    spec: Annotated[str, typer.Argument(help="analysis spec file, or vllm / vllm-pd / sglang / sglang-pd")],
    revision: Annotated[str, typer.Option(help="the new revision (LWS template-revision-hash), or auto: "
                                                "read it and the stable one from the API")],
    lws: Annotated[str, typer.Option(help="the LeaderWorkerSet's name ({{lws}})", envvar="LWSFLOW_NAME")],
    stable_revision: Annotated[str, typer.Option(help="the stable revision to compare with")] = "",
    prometheus: Annotated[str, typer.Option(help="Prometheus base URL")] = "",
    namespace: Annotated[str, typer.Option("--namespace", "-n", envvar="LWSFLOW_NAMESPACE")] = "default",
    role: Annotated[str, typer.Option(help="the role ({{role}}): aggregated, prefill, decode")] = (
        "aggregated"),
    window: Annotated[str, typer.Option(help="the {{window}} range, e.g. 30s (default: each interval)")] = "",
    json_out: Annotated[bool, typer.Option("--json", help="print the result as one JSON document")] = False,
    kubeconfig: Annotated[str | None, typer.Option(help="for --revision auto and smoke metrics: default "
                                                    "$KUBECONFIG, else in-cluster")] = None,
) -> int:
    """Run an analysis on its own and print each measurement and the verdict."""
    from lwsflow.controller.analysis.run import check_inputs, provider_measure, run_analysis
    from lwsflow.controller.analysis.spec import load_spec, promql_duration
    from lwsflow.controller.api.duration import parse_duration
    from lwsflow.controller.errors import InvalidInput

    doc = load_spec(Path(spec))
    args = {"revision": revision, "stable_revision": stable_revision, "namespace": namespace, "lws": lws,
            "role": role}
    if not revision:
        raise InvalidInput("must not be empty", field="--revision")
    if window:
        args["window"] = promql_duration(parse_duration(window, "--window"))
    if revision == "auto":
        found = _revisions_from_api(doc, kubeconfig, namespace, lws, stable_revision, prometheus)
        if found is None:
            return 0
        args["revision"], args["stable_revision"] = found
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
        verdict = res.summary()
        if revision == "auto" and res.measurements:  # a check's last line is all its caller reports
            last = res.measurements[-1]
            seen = (f"value={last.value:.4g} stable={last.baseline:.4g}"
                    if last.value is not None and last.baseline is not None else last.detail or last.phase)
            verdict += f" ({args['revision']} vs stable {args['stable_revision']}; last {last.metric} {seen})"
        print(f"analysis {res.phase}: {verdict}")
    return 0 if res.phase == "successful" else 1


def _revisions_from_api(doc: object, kubeconfig: str | None, namespace: str, lws: str, stable: str,
                        prometheus: str) -> tuple[str, str] | None:
    """(new, stable) from the API once Prometheus scrapes their pods; None: nothing to compare with."""
    from lwsflow.components.analysis_hook import revisions
    from lwsflow.components.prometheus import wait_for_targets
    from lwsflow.controller.api import labels as L
    from lwsflow.controller.errors import OperationFailed
    from lwsflow.controller.kube.client import Kube

    new, found, pods = revisions(Kube.connect(kubeconfig), namespace, lws)
    stable = stable or found
    if not new:
        raise OperationFailed(f"{namespace}/{lws}: its leader StatefulSet has no template revision yet")
    if not stable and any(m.compare for m in getattr(doc, "metrics", [])):
        print(f"analysis skipped: no pod of {namespace}/{lws}'s stable revision serves any more to compare "
              f"with ({new} everywhere)")
        return None
    serving = {(p["metadata"]["name"], rev) for p in pods
               if (rev := (p["metadata"].get("labels") or {}).get(L.TEMPLATE_REVISION_HASH)) in (new, stable)
               and (p["metadata"].get("labels") or {}).get(L.WORKER_INDEX) == "0"
               and (p.get("status") or {}).get("phase") == "Running"}
    if prometheus and not wait_for_targets(prometheus, serving):
        raise OperationFailed(f"Prometheus did not scrape {sorted(serving)} in time")
    return new, stable
