"""Judging measurements and metrics with Argo Rollouts' AnalysisTemplate rules (issue 17), and the
measuring loop with an injected clock (no waiting)."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import pytest

from lwsflow.controller.analysis import evaluate as ev
from lwsflow.controller.analysis.providers import ProviderError
from lwsflow.controller.analysis.run import run_analysis
from lwsflow.controller.analysis.spec import AnalysisSpec, Metric, validate_spec
from lwsflow.controller.analysis.stats import Buckets, Counts
from lwsflow.controller.analysis.templates import TEMPLATES
from lwsflow.controller.errors import InvalidInput

Q = 'x{revision="{{revision}}"}'


def metric(**kw: Any) -> Metric:
    doc = {"name": "m", "provider": {"prometheus": {"query": Q}}, **kw}
    return validate_spec({"metrics": [doc]}).metrics[0]


@pytest.mark.parametrize(("kw", "value", "baseline", "want"), [
    ({"successCondition": "result < 1"}, 0.5, None, "successful"),
    ({"successCondition": "result < 1"}, 1.5, None, "failed"),
    ({"failureCondition": "result > 1"}, 0.5, None, "successful"),
    ({"failureCondition": "result > 1"}, 1.5, None, "failed"),
    ({"successCondition": "result < 1"}, None, None, "inconclusive"),
    ({"successCondition": "result < 1"}, float("nan"), None, "inconclusive"),
    # relative tolerance: 10% worse than stable passes, 40% worse fails (the slower release)
    ({"compare": {"mode": "relative", "tolerance": 10}}, 1.09, 1.0, "successful"),
    ({"compare": {"mode": "relative", "tolerance": 10}}, 1.40, 1.0, "failed"),
    ({"compare": {"mode": "relative", "tolerance": 10}}, 1.0, None, "inconclusive"),
    # absolute points: error ratio no more than 0.5 points higher
    ({"compare": {"mode": "absolute", "tolerance": 0.005}}, 0.004, 0.0, "successful"),
    ({"compare": {"mode": "absolute", "tolerance": 0.005}}, 0.02, 0.0, "failed"),
    # not higher at all (KV-transfer failures)
    ({"compare": {"mode": "absolute", "tolerance": 0}}, 0.0, 0.0, "successful"),
    ({"compare": {"mode": "absolute", "tolerance": 0}}, 0.1, 0.0, "failed"),
    ({"compare": {"mode": "relative", "tolerance": 10, "better": "higher"}}, 95, 100, "successful"),
    ({"compare": {"mode": "relative", "tolerance": 10, "better": "higher"}}, 80, 100, "failed"),
    # both conditions: failure wins
    ({"successCondition": "result < 10", "failureCondition": "result > 5"}, 7, None, "failed"),
])
def test_judge(kw: dict[str, Any], value: float | None, baseline: float | None, want: str) -> None:
    assert ev.judge(metric(**kw), value, baseline)[0] == want


PROPORTION = {"compare": {"mode": "proportion", "total": Q, "tolerance": 0.005}}
HISTOGRAM = {"compare": {"mode": "histogram", "tolerance": 10}}
STABLE_H = Buckets.of({0.04: 25.0, 0.06: 95.0, 0.08: 100.0, math.inf: 100.0})


@pytest.mark.parametrize(("kw", "value", "baseline", "want", "shown"), [
    # 15 of 300 errors against none: failed; 1 of 1000 (inside 0.5 points, on enough requests to
    # show it): successful; 2 of 300: not enough requests to show it (inconclusive)
    (PROPORTION, Counts(15, 300), Counts(0, 300), "failed", 0.05),
    (PROPORTION, Counts(1, 1000), Counts(0, 1000), "successful", 1 / 1000),
    (PROPORTION, Counts(2, 300), Counts(0, 300), "inconclusive", 2 / 300),
    (PROPORTION, Counts(0, 0), Counts(0, 300), "inconclusive", None),
    (PROPORTION, None, Counts(0, 300), "inconclusive", None),
    (PROPORTION, Counts(1, 300), None, "inconclusive", 1 / 300),
    (PROPORTION, 0.5, 0.1, "inconclusive", 0.5),  # a number where counts are needed
    (HISTOGRAM, Buckets.of({0.04: 0.0, 0.06: 40.0, 0.08: 90.0, math.inf: 100.0}), STABLE_H, "failed", None),
    (HISTOGRAM, STABLE_H, STABLE_H, "successful", 0.06),
    (HISTOGRAM, None, STABLE_H, "inconclusive", None),
])
def test_judge_statistical_modes(kw: dict[str, Any], value: Any, baseline: Any, want: str,
                                 shown: float | None) -> None:
    m = metric(**kw)
    phase, detail = ev.judge(m, value, baseline)
    assert phase == want, detail
    if shown is not None:
        assert ev.shown(m, value) == pytest.approx(shown)
    if want == "failed":
        assert "alpha=0.01" in detail and "p=" in detail


def test_provider_error_is_an_error() -> None:
    got = ev.judge(metric(successCondition="result < 1"), 0.1, error="timeout")
    assert got == ("error", "timeout")


@pytest.mark.parametrize(("doc", "field", "msg"), [
    ({"metrics": []}, "metrics", "at least 1"),
    ({"metrics": [{"name": "m", "provider": {"prometheus": {"query": Q}}}]}, "metrics.0",
     "give successCondition"),
    ({"metrics": [{"name": "m", "provider": {}, "successCondition": "result<1"}]}, "metrics.0.provider",
     "exactly one"),
    ({"metrics": [{"name": "m", "provider": {"prometheus": {"query": "x{a=\"{{pod}}\"}"}},
                   "successCondition": "result<1"}]}, "metrics.0", "unknown argument {{pod}}"),
    ({"metrics": [{"name": "m", "provider": {"prometheus": {"query": Q}},
                   "successCondition": "result < baseline"}]}, "metrics.0", "no compare block"),
    ({"metrics": [{"name": "m", "provider": {"prometheus": {"query": Q}},
                   "successCondition": "import os"}]}, "metrics.0.successCondition", "syntax error"),
    ({"metrics": [{"name": "m", "provider": {"prometheus": {"query": Q}}, "interval": "soon",
                   "successCondition": "result<1"}]}, "metrics.0.interval", "not a duration"),
    ({"metrics": [{"name": "m", "provider": {"command": {"argv": ["x"]}},
                   "compare": {"tolerance": 1}}]}, "metrics.0", "compare needs the prometheus"),
    ({"metrics": [{"name": "m", "provider": {"smoke": {}, "command": {"argv": ["x"]}},
                   "successCondition": "result<1"}]}, "metrics.0.provider", "exactly one"),
    ({"metrics": [{"name": "m", "provider": {"smoke": {"figure": "ttft_s"}},
                   "successCondition": "result<1"}]}, "metrics.0.provider.smoke", "figure needs check"),
    ({"metrics": [{"name": "m", "provider": {"smoke": {}}, "compare": {"tolerance": 1}}]}, "metrics.0",
     "compare needs the prometheus"),
    ({"metrics": [{"name": "m", "provider": {"prometheus": {"query": Q}},
                   "compare": {"mode": "proportion", "tolerance": 0.005}}]}, "metrics.0.compare",
     "needs total"),
    ({"metrics": [{"name": "m", "provider": {"prometheus": {"query": Q}},
                   "compare": {"mode": "relative", "tolerance": 0, "total": Q}}]}, "metrics.0.compare",
     "total is only for mode proportion"),
    ({"metrics": [{"name": "m", "provider": {"prometheus": {"query": Q}},
                   "compare": {"mode": "absolute", "tolerance": 0, "alpha": 0.05}}]}, "metrics.0.compare",
     "alpha is only for modes proportion and histogram"),
    ({"metrics": [{"name": "m", "provider": {"prometheus": {"query": Q}},
                   "compare": {"mode": "proportion", "total": Q, "tolerance": 0.005, "quantile": 0.9}}]},
     "metrics.0.compare", "quantile is only for mode histogram"),
    ({"metrics": [{"name": "m", "provider": {"prometheus": {"query": Q}},
                   "compare": {"mode": "histogram", "tolerance": 10, "better": "higher"}}]},
     "metrics.0.compare", "better must be lower"),
    ({"metrics": [{"name": "m", "provider": {"prometheus": {"query": Q}},
                   "compare": {"mode": "proportion", "total": Q, "tolerance": 5}}]},
     "metrics.0.compare.tolerance", "a ratio's points"),
    ({"metrics": [{"name": "m", "provider": {"prometheus": {"query": Q}},
                   "compare": {"mode": "histogram", "tolerance": 10, "alpha": 0.7}}]},
     "metrics.0.compare.alpha", "less than 0.5"),
    ({"metrics": [{"name": "m", "provider": {"prometheus": {"query": Q}},
                   "compare": {"mode": "proportion", "total": "y[{{since}}]", "tolerance": 0.005}}]},
     "metrics.0", "unknown argument {{since}}"),
])
def test_bad_specs_name_the_field(doc: dict[str, Any], field: str, msg: str) -> None:
    with pytest.raises(InvalidInput) as err:
        validate_spec(doc)
    assert err.value.field == field
    assert msg in str(err.value)


def _spec(**kw: Any) -> AnalysisSpec:
    doc = {"name": "ttft", "provider": {"prometheus": {"query": Q}}, "interval": "10s", "count": 4,
           "compare": {"mode": "relative", "tolerance": 10}, **kw}
    return validate_spec({"metrics": [doc]})


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, s: float) -> None:
        self.now += s


def _run(spec: AnalysisSpec, values: list[tuple[float | None, float | None] | Exception]) -> Any:
    clock, seen = FakeClock(), []
    it = iter(values)

    def measure(m: Metric, args: dict[str, str]) -> tuple[float | None, float | None]:
        seen.append(args)
        v = next(it)
        if isinstance(v, Exception):
            raise v
        return v

    res = run_analysis(spec, {"revision": "new", "stable_revision": "old"}, measure, sleep=clock.sleep,
                       clock=clock)
    return res, seen, clock.now


def test_good_release_passes_after_count_measurements_on_schedule() -> None:
    res, seen, elapsed = _run(_spec(), [(1.0, 1.0)] * 4)
    assert res.phase == "successful" and len(res.measurements) == 4
    assert [m.at for m in res.measurements] == [0.0, 10.0, 20.0, 30.0] and elapsed == 30.0
    assert seen[0]["window"] == "10000ms"
    # {{elapsed}}: one window before the analysis began up to now, so evidence accumulates
    assert [a["elapsed"] for a in seen] == ["10000ms", "20000ms", "30000ms", "40000ms"]


def test_slower_release_fails_at_the_first_failure_beyond_the_limit() -> None:
    res, _, elapsed = _run(_spec(failureLimit=1), [(1.4, 1.0), (1.05, 1.0), (1.4, 1.0), (1.0, 1.0)])
    assert res.phase == "failed" and len(res.measurements) == 3 and elapsed == 20.0


def test_gaps_are_inconclusive_past_the_limit_and_errors_counted_apart() -> None:
    gaps = [(None, 1.0), ProviderError("down"), (None, 1.0), (1.0, 1.0)]
    res, _, _ = _run(_spec(inconclusiveLimit=1), gaps)
    assert res.phase == "inconclusive" and len(res.measurements) == 3
    assert res.measurements[1].phase == "error" and res.measurements[1].detail == "down"
    # one gap and one provider error are within inconclusiveLimit 1 and consecutiveErrorLimit 4
    res, _, _ = _run(_spec(inconclusiveLimit=1), [(None, 1.0), ProviderError("down"), (1.0, 1.0), (1.0, 1.0)])
    assert res.phase == "successful"


def test_compare_without_stable_revision_is_bad_input() -> None:
    with pytest.raises(InvalidInput, match="--stable-revision"):
        run_analysis(_spec(), {"revision": "new"}, lambda m, a: (1.0, 1.0), sleep=lambda s: None)


def test_argument_values_cannot_inject_promql() -> None:
    with pytest.raises(InvalidInput) as err:
        run_analysis(_spec(), {"revision": 'x"} or vector(1) #', "stable_revision": "a"},
                     lambda m, a: (1.0, 1.0), sleep=lambda s: None)
    assert err.value.field == "revision"


@pytest.mark.parametrize("name", sorted(TEMPLATES))
def test_builtin_templates_are_valid_and_use_the_reference_names(name: str) -> None:
    spec = validate_spec(TEMPLATES[name]())
    queries = {m.name: m.provider.prometheus.query for m in spec.metrics if m.provider.prometheus}
    engine = name.split("-")[0]
    assert f"{engine}:time_to_first_token_seconds_bucket" in queries["ttft-p95"]
    assert f"{engine}:inter_token_latency_seconds_bucket" in queries["itl-p95"]
    assert {"ttft-p95", "itl-p95", "error-ratio", "queue-length"} <= set(queries)
    assert ("kv-transfer-failures" in queries) is name.endswith("-pd")
    assert all(m.compare for m in spec.metrics)
    modes = {m.name: m.compare.mode for m in spec.metrics if m.compare}
    assert modes["ttft-p95"] == modes["itl-p95"] == "histogram"
    assert modes["error-ratio"] == modes.get("kv-transfer-failures", "proportion") == "proportion"
    assert "sum by (le) (increase(" in queries["ttft-p95"] and "[{{elapsed}}]" in queries["ttft-p95"]


@pytest.mark.parametrize(("scale", "want"), [(0.2, "inconclusive"), (0.25, "inconclusive"), (1.0, "failed")])
def test_too_few_requests_cannot_fail(scale: float, want: str) -> None:
    """Minimum evidence (issue 17): the same shares that fail at 100 requests are inconclusive at 20
    or 25 (below stats.MIN_REQUESTS = 30), though their p-values are below alpha: one stalled burst is
    a large share of a few requests. Proportions alike: half of them errors against none."""
    def hist(counts: dict[float, float]) -> Buckets:
        return Buckets.of({le: c * scale for le, c in counts.items()})
    slower = hist({0.04: 0.0, 0.06: 0.0, 0.08: 90.0, math.inf: 100.0})
    stable = hist({0.04: 25.0, 0.06: 95.0, 0.08: 100.0, math.inf: 100.0})
    phase, detail = ev.judge(metric(**HISTOGRAM), slower, stable)
    assert phase == want, detail
    if want == "inconclusive":
        assert "too few requests" in detail and "p=" in detail
    # the comparison alone (the absolute guard off: it fails half of 20 at once, tested elsewhere)
    unguarded = {"compare": {**PROPORTION["compare"], "maxRatio": 1}}
    errors = ev.judge(metric(**unguarded), Counts(50 * scale, 100 * scale), Counts(0, 100 * scale))
    assert errors[0] == want, errors


def test_per_token_histogram_samples_are_its_requests() -> None:
    """ITL: 100 tokens from 20 requests are 20 samples, too few to show the shift (or anything: not
    successful); from 100 they do."""
    slower = Buckets.of({0.04: 0.0, 0.06: 40.0, 0.08: 90.0, math.inf: 100.0})
    m = metric(compare={"mode": "histogram", "tolerance": 10, "requests": Q})
    assert ev.judge(m, replace(slower, requests=20.0), replace(STABLE_H, requests=20.0))[0] == "inconclusive"
    assert ev.judge(m, replace(slower, requests=100.0), replace(STABLE_H, requests=100.0))[0] == "failed"
    with pytest.raises(InvalidInput, match="requests is only for mode histogram"):
        metric(compare={"mode": "relative", "tolerance": 10, "requests": Q})


@pytest.mark.parametrize("name", sorted(TEMPLATES))
def test_builtin_itl_counts_requests(name: str) -> None:
    itl = next(m for m in validate_spec(TEMPLATES[name]()).metrics if m.name == "itl-p95")
    assert itl.compare is not None
    engine = name.split("-")[0]
    assert f"{engine}:time_to_first_token_seconds_count" in itl.compare.requests
    assert "[{{elapsed}}]" in itl.compare.requests
