"""No pass without evidence (issue 23): a measurement passes only when it had the traffic to catch a
release worse by the tolerance; an absolute guard beside the comparison; provider errors counted
apart; the proportion tolerance's unit."""

from __future__ import annotations

import math
import random
import socket
from pathlib import Path
from typing import Any

import pytest

from lwsflow.cli import main
from lwsflow.controller.analysis import evaluate as ev
from lwsflow.controller.analysis import stats
from lwsflow.controller.analysis.providers import ProviderError
from lwsflow.controller.analysis.run import run_analysis
from lwsflow.controller.analysis.spec import Metric, validate_spec
from lwsflow.controller.analysis.stats import Buckets, Counts
from lwsflow.controller.analysis.templates import vllm
from lwsflow.controller.errors import InvalidInput
from tests.analysis.buckets_kit import binned

Q = 'x{revision="{{revision}}"}'


def builtin(name: str) -> Metric:
    return next(m for m in validate_spec(vllm(pd=True)).metrics if m.name == name)


@pytest.mark.parametrize(("new", "stable"), [
    pytest.param(Counts(5, 10), Counts(0, 10), id="5/10-vs-0/10"),
    pytest.param(Counts(3, 10), Counts(0, 10), id="3/10-vs-0/10"),
    pytest.param(Counts(4, 40), Counts(0, 40), id="4/40-vs-0/40"),
    pytest.param(Counts(10, 29), Counts(0, 29), id="10/29-vs-0/29"),
    pytest.param(Counts(30, 1000), Counts(0, 1000), id="30/1000-vs-0/1000"),
])
def test_issue_table_gives_no_successful(new: Counts, stable: Counts) -> None:
    """The table of issue 23: the built-in error-ratio compare (0.5 points, alpha 0.01) judged each of
    these "successful" or would pass; none may (failed, or inconclusive for too little traffic)."""
    phase, detail = ev.judge(builtin("error-ratio"), new, stable)
    assert phase in ("failed", "inconclusive"), detail
    # and without the absolute guard the comparison alone passes none of them either
    plain = metric({"mode": "proportion", "total": Q, "tolerance": 0.005, "maxRatio": 1})
    phase, detail = ev.judge(plain, new, stable)
    assert phase != "successful", detail


def metric(compare: dict[str, Any], **kw: Any) -> Metric:
    doc = {"name": "m", "provider": {"prometheus": {"query": Q}}, "compare": compare, **kw}
    return validate_spec({"metrics": [doc]}).metrics[0]


def test_absolute_guard_fails_whatever_the_stable() -> None:
    """20% errors against a stable at 20%: the comparison sees no difference, the guard fails it."""
    m = builtin("error-ratio")
    phase, detail = ev.judge(m, Counts(40, 200), Counts(40, 200))
    assert phase == "failed" and "absolute guard 0.05" in detail
    # at 2% the guard stays quiet: the comparison decides
    assert ev.judge(m, Counts(40, 2000), Counts(40, 2000))[0] == "successful"


def test_equal_release_with_enough_traffic_passes_and_the_console_says_what_a_short_one_needs() -> None:
    m = builtin("error-ratio")
    assert ev.judge(m, Counts(5, 5000), Counts(5, 5000))[0] == "successful"
    phase, detail = ev.judge(m, Counts(1, 100), Counts(1, 100))
    assert phase == "inconclusive"
    need = int(detail.split("about ")[1].split()[0])
    # the figure is what would pass at those ratios: at the said traffic it passes, well below it not
    assert ev.judge(m, Counts(need / 100, need), Counts(need / 100, need))[0] == "successful"
    assert ev.judge(m, Counts(need / 200, need / 2), Counts(need / 200, need / 2))[0] == "inconclusive"


def _binomial(rng: random.Random, n: int, p: float) -> int:
    return sum(rng.random() < p for _ in range(n))


@pytest.mark.parametrize("n", [50, 400, 3000])
def test_a_release_worse_by_the_tolerance_passes_at_most_one_measurement_in_five(n: int) -> None:
    """The stated power: at any traffic, a release exactly the tolerance worse (1.5% errors against
    1%) is held back in at least 80% of measurements (seeded draws)."""
    rng, m, passed, trials = random.Random(n), builtin("error-ratio"), 0, 300
    for _ in range(trials):
        new, stable = Counts(_binomial(rng, n, 0.015), n), Counts(_binomial(rng, n, 0.01), n)
        passed += ev.judge(m, new, stable)[0] == "successful"
    assert passed / trials <= 1 - stats.POWER


BOUNDS = (0.02, 0.04, 0.06, 0.08, 0.1, 0.25)
STABLE_SHARES = (0.02, 0.25, 0.68, 0.04, 0.007, 0.003)  # of requests per bucket; p95 ~0.06


def _latency_buckets(rng: random.Random, n: int, slower: float) -> Buckets:
    """n latencies spread evenly inside each bucket (where linear interpolation is exact), times
    ``1 + slower``."""
    def draw() -> float:
        i = rng.choices(range(len(BOUNDS)), STABLE_SHARES)[0]
        lo = BOUNDS[i - 1] if i else 0.0
        return rng.uniform(lo, BOUNDS[i]) * (1 + slower)

    return binned((draw() for _ in range(n)), (*BOUNDS, math.inf))


@pytest.mark.parametrize("n", [20, 200, 1000])
def test_histogram_release_slower_by_the_tolerance_rarely_passes(n: int) -> None:
    """Histogram mode alike, at the buckets' resolution: TTFT 10% slower at every latency against a
    10% tolerance passes at most one measurement in five; an equal one at 1000 requests passes most.
    (Inside a bucket the test reads the stable's share as histogram_quantile does, linearly: where the
    density falls across the bucket that overstates it, and a release slower by less than a bucket's
    width can pass: docs/analysis.md.)"""
    rng, m = random.Random(n), builtin("ttft-p95")
    passed = sum(ev.judge(m, _latency_buckets(rng, n, 0.10), _latency_buckets(rng, n, 0.0))[0]
                 == "successful" for _ in range(100))
    assert passed <= 100 * (1 - stats.POWER)
    if n == 1000:
        equal = sum(ev.judge(m, _latency_buckets(rng, n, 0.0), _latency_buckets(rng, n, 0.0))[0]
                    == "successful" for _ in range(50))
        assert equal >= 40


def _run(metric_doc: dict[str, Any], outcomes: list[Any], sequential: bool = True) -> Any:
    spec = validate_spec({"metrics": [metric_doc]})
    it = iter(outcomes)

    def measure(m: Metric, args: dict[str, str]) -> Any:
        v = next(it)
        if isinstance(v, Exception):
            raise v
        return v

    return run_analysis(spec, {"revision": "a", "stable_revision": "b"}, measure, sleep=lambda s: None,
                        sequential=sequential)


REL = {"name": "m", "provider": {"prometheus": {"query": Q}},
       "compare": {"mode": "relative", "tolerance": 10}}


def test_provider_errors_never_pass() -> None:
    """Every measurement an error, within inconclusiveLimit: the metric is in error, not successful."""
    res = _run({**REL, "count": 2, "inconclusiveLimit": 5}, [ProviderError("ConnectError")] * 2)
    assert res.phase == "error" and [m.phase for m in res.measurements] == ["error", "error"]


def test_consecutive_errors_past_the_limit_end_the_metric() -> None:
    outcomes: list[Any] = [(1.0, 1.0), ProviderError("down"), ProviderError("down"), (1.0, 1.0)] + \
        [ProviderError("down")] * 3
    res = _run({**REL, "count": 7, "consecutiveErrorLimit": 2}, outcomes)
    assert res.phase == "error" and len(res.measurements) == 7
    # two in a row are within the limit of two: the metric goes on and passes
    ok = _run({**REL, "count": 4, "consecutiveErrorLimit": 2}, outcomes[:4])
    assert ok.phase == "successful"


def test_no_successful_measurement_never_passes() -> None:
    res = _run({**REL, "count": 2, "inconclusiveLimit": 5}, [(None, 1.0), (None, 1.0)])
    assert res.phase == "inconclusive"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_cli_with_prometheus_unreachable_does_not_pass(tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """The issue's run: count 2, inconclusiveLimit 5, nothing listening where Prometheus should be."""
    spec = tmp_path / "a.yaml"
    spec.write_text("metrics:\n- name: ttft\n  interval: 50ms\n  count: 2\n  inconclusiveLimit: 5\n"
                    f"  provider: {{prometheus: {{query: '{Q}'}}}}\n  successCondition: result < 1\n")
    rc = main(["analysis", "run", str(spec), "--revision", "a", "--lws", "x",
               "--prometheus", f"http://127.0.0.1:{_free_port()}"])
    out = capsys.readouterr().out
    assert rc != 0 and "analysis successful" not in out
    assert out.count(": error (") == 2 and "analysis error" in out


@pytest.mark.parametrize(("given", "want"), [(0.005, 0.005), ("0.5%", 0.005), (" 2% ", 0.02)])
def test_proportion_tolerance_takes_a_ratio_or_a_percentage(given: Any, want: float) -> None:
    m = metric({"mode": "proportion", "total": Q, "tolerance": given})
    assert m.compare is not None and m.compare.tolerance == pytest.approx(want)


def test_histogram_tolerance_percent_sign_is_the_percent() -> None:
    m = metric({"mode": "histogram", "tolerance": "10%"})
    assert m.compare is not None and m.compare.tolerance == 10


@pytest.mark.parametrize("given", [0.5, 0, "10%", "abc%"])
def test_meaningless_proportion_tolerance_is_refused(given: Any) -> None:
    with pytest.raises(InvalidInput) as err:
        metric({"mode": "proportion", "total": Q, "tolerance": given})
    assert err.value.field == "metrics.0.compare.tolerance"


def test_cli_refuses_tolerance_half_meaning_fifty_points(tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "a.yaml"
    spec.write_text("metrics:\n- name: errors\n"
                    f"  provider: {{prometheus: {{query: '{Q}'}}}}\n"
                    f"  compare: {{mode: proportion, total: '{Q}', tolerance: 0.5}}\n")
    rc = main(["analysis", "run", str(spec), "--revision", "a", "--stable-revision", "b", "--lws", "x",
               "--prometheus", "http://127.0.0.1:1"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and err[0].startswith("error:")
    assert "metrics.0.compare.tolerance" in err[0] and '"0.5%"' in err[0]


def test_requests_to_judge_shrinks_with_the_tolerance() -> None:
    """The docs' table comes from this: more requests for a finer tolerance or a higher base ratio."""
    half, one = stats.requests_to_judge(0.005, 0.01), stats.requests_to_judge(0.01, 0.01)
    assert half is not None and one is not None and half > one > 0
    low = stats.requests_to_judge(0.005, 0.0)
    assert low is not None and low < half
    c = Counts(0.01 * half, half)
    assert stats.proportion_pass_p_value(c, c, 0.005) < 1 - stats.POWER


ERRORS = {"name": "errors", "provider": {"prometheus": {"query": Q}}, "count": 4, "inconclusiveLimit": 0,
          "compare": {"mode": "proportion", "total": Q, "tolerance": "0.5%"}}


def test_early_measurements_short_of_traffic_wait_for_evidence() -> None:
    """Counts accumulate over the analysis: measurements short of traffic early on do not count
    against inconclusiveLimit, once the traffic suffices the metric passes; a metric whose last
    measurement is still short is inconclusive, whatever came before."""
    grows = [(Counts(1, n), Counts(1, n)) for n in (50, 150, 2000, 3000)]
    res = _run(ERRORS, grows, sequential=False)
    assert [m.phase for m in res.measurements] == ["inconclusive", "inconclusive", "successful", "successful"]
    assert all(ev.short_of_traffic(m) for m in res.measurements[:2]) and res.phase == "successful"
    # sequential (the default): decided at the first look whose evidence suffices, the last not taken
    res = _run(ERRORS, grows)
    assert [m.phase for m in res.measurements] == ["inconclusive", "inconclusive", "successful"]
    assert res.phase == "successful"
    # the fixed horizon: the ratios drift, shown within tolerance at 2000, no longer at 3000 (neither
    # failed)
    drifts = [*grows[:3], (Counts(25, 3000), Counts(1, 3000))]
    res = _run(ERRORS, drifts, sequential=False)
    assert res.measurements[-1].phase == "inconclusive" and res.phase == "inconclusive"
    # a gap in the data (no series) is not short of traffic: it counts against the limit at once
    gap = _run(ERRORS, [(None, Counts(1, 50)), *grows[1:]])
    assert gap.phase == "inconclusive" and len(gap.measurements) == 1


def test_console_says_when_a_stage_had_too_little_traffic() -> None:
    res = _run(ERRORS, [(Counts(0, n), Counts(0, n)) for n in (20, 40, 60, 80)])
    assert res.phase == "inconclusive"
    note = res.summary()
    assert note.startswith("errors=inconclusive; too little traffic to judge (errors: too little traffic to "
                           "pass: 80 requests per revision, about ")
