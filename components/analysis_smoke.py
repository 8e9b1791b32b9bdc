"""The analysis ``smoke`` provider: the smoke test (``components/smoke``) as a metric.

The controller's analysis loop cannot import components, so callers wire this in
(``provider_measure(prometheus, smoke=smoke_measure(kubeconfig))``). Each measurement runs the smoke
test against the serving pods of the new revision of ``{{lws}}`` in ``{{namespace}}`` (placement is
not checked: it reads Nodes, and a metric is about serving). The value is the share of checks that
passed, or one check's share, or the worst figure a check measured (``smoke_value``).
"""

from __future__ import annotations

import math

from lwsflow.components.smoke.model import SmokeConfig, SmokeReport
from lwsflow.components.smoke.runner import run_smoke
from lwsflow.controller.analysis.providers import ProviderError, SmokeMeasure
from lwsflow.controller.analysis.spec import SmokeProvider


def smoke_value(report: SmokeReport, p: SmokeProvider) -> float | None:
    """The number a smoke provider measures in ``report``; None when the check (or figure) is absent."""
    checks = [c for c in report.checks if not p.check or c.name == p.check]
    if not checks:
        return None
    if not p.figure:
        return sum(c.passed for c in checks) / len(checks)  # a skipped check did not pass
    figures = []
    for c in checks:
        v = c.data.get(p.figure)
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
            figures.append(float(v))
    return max(figures) if figures else None


def smoke_measure(kubeconfig: str | None, request_timeout_s: float = 10.0) -> SmokeMeasure:
    """The smoke provider for a cluster reached through ``kubeconfig`` (None: $KUBECONFIG/in-cluster)."""
    def measure(p: SmokeProvider, args: dict[str, str]) -> float | None:
        lws, ns = args.get("lws", ""), args.get("namespace", "default")
        if not lws:
            raise ProviderError("smoke: no {{lws}} to test")
        cfg = SmokeConfig(targets=[f"lws/{lws}"], namespace=ns, kubeconfig=kubeconfig, revision_only=True,
                          placement=False, deadline_s=p.timeout, warmup_s=min(30.0, p.timeout),
                          request_timeout_s=request_timeout_s)
        return smoke_value(run_smoke(cfg), p)
    return measure
