"""The statistics behind ``compare.mode: proportion`` and ``histogram`` (issue 17), on seeded synthetic
counts: the false-positive rate stays at or below the stated alpha, and the faults the bench plants
(5% errors or KV failures, a release 40% slower at p95 TTFT) are found with near certainty once the
evidence of a ~30 s analysis at 10 requests a second has accumulated."""

from __future__ import annotations

import math
import random

import pytest

from lwsflow.controller.analysis import stats
from lwsflow.controller.analysis.stats import Buckets, Counts

ALPHA = 0.01
# the stand-in engine's and vLLM's latency bucket boundaries around TTFT (sim/engine/metrics.py)
BOUNDS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0)


def _binomial(rng: random.Random, n: int, p: float) -> int:
    return sum(rng.random() < p for _ in range(n))


def _rejects(rng: random.Random, trials: int, n: int, p_new: float, p_stable: float, margin: float) -> float:
    hits = sum(stats.proportion_p_value(Counts(_binomial(rng, n, p_new), n),
                                        Counts(_binomial(rng, n, p_stable), n), margin) < ALPHA
               for _ in range(trials))
    return hits / trials


@pytest.mark.parametrize(("n", "p", "margin"), [
    (100, 0.01, 0.0), (300, 0.01, 0.0), (300, 0.03, 0.0), (300, 0.002, 0.0),
    # on the boundary of the null hypothesis: new exactly tolerance (0.5 points) worse
    (300, 0.015, 0.005),
])
def test_proportion_false_positive_rate_is_at_most_alpha(n: int, p: float, margin: float) -> None:
    """Equal ratios (or new worse by exactly the tolerance): rejected in at most alpha of 1000 seeded
    trials, with room for the Monte Carlo error (3 standard errors)."""
    rng = random.Random(17)
    worse = p + margin if margin else p
    rate = _rejects(rng, 1000, n, worse, p, margin)
    assert rate <= ALPHA + 3 * math.sqrt(ALPHA * (1 - ALPHA) / 1000), rate


@pytest.mark.parametrize(("margin", "n", "power"), [(0.0, 300, 0.97), (0.005, 300, 0.95), (0.0, 100, 0.15)])
def test_proportion_power_on_a_five_percent_fault(margin: float, n: int, power: float) -> None:
    """5% failures against a clean stable: ~300 requests per revision (the bench's ~30 s at 10/s) are
    enough for near certainty; ~100 (one 10 s window) are not, which is why the counts accumulate."""
    rate = _rejects(random.Random(5), 400, n, 0.05, 0.0, margin)
    assert rate >= power, rate
    if n == 100:
        assert rate < 0.6, rate  # one short window alone misses most of them


def test_proportion_edges() -> None:
    assert stats.proportion_p_value(Counts(0, 100), Counts(0, 100)) == 1.0
    assert stats.proportion_p_value(Counts(3, 100), Counts(5, 100)) == 1.0  # new is better
    assert stats.proportion_p_value(Counts(50, 100), Counts(0, 100)) < 1e-9
    # fractional counts (Prometheus's increase() extrapolates) are fine
    assert 0 < stats.proportion_p_value(Counts(7.4, 150.2), Counts(0.6, 149.8)) < 0.05
    with pytest.raises(ValueError):
        stats.proportion_p_value(Counts(0, 0), Counts(0, 10))


def _hist(samples: list[float]) -> Buckets:
    counts = {b: float(sum(x <= b for x in samples)) for b in BOUNDS}
    counts[math.inf] = float(len(samples))
    return Buckets.of(counts)


def _lognormal(rng: random.Random, n: int, median: float, p95: float, stall: float = 0.0) -> list[float]:
    """Latencies log-normal around median/p95, as the stand-in engine draws them; ``stall``: the share
    of requests that also wait for a CPU (exponential, 50 ms mean), as on a loaded 2-core machine."""
    sigma = math.log(p95 / median) / 1.6449
    return [rng.lognormvariate(math.log(median), sigma)
            + (rng.expovariate(1 / 0.05) if rng.random() < stall else 0.0) for _ in range(n)]


def test_buckets_quantile_and_shares_interpolate_like_histogram_quantile() -> None:
    h = Buckets.of({0.04: 20.0, 0.06: 95.0, 0.08: 100.0, math.inf: 100.0})
    assert h.total == 100
    assert h.quantile(0.95) == pytest.approx(0.06)
    assert h.quantile(0.5) == pytest.approx(0.04 + 0.02 * 30 / 75)
    assert h.share_above(0.05) == pytest.approx(1 - (20 + 75 / 2) / 100)
    assert h.share_above(1.0) == 0.0
    # increase() extrapolates each bucket on its own: cumulative counts never fall
    assert Buckets.of({0.04: 21.0, 0.06: 20.5, math.inf: 30.0}).below(0.06) == 21.0


@pytest.mark.parametrize(("median", "p95", "n", "fails_at_most", "fails_at_least"), [
    # an equal release, its p95 (60 ms) on a bucket boundary: the interpolated p95 flips between two
    # buckets (the old comparison failed 6 of 50 such releases); the share test does not
    (0.045, 0.060, 150, ALPHA, 0.0),
    (0.045, 0.060, 300, ALPHA, 0.0),
    # 5% slower: inside the 10% tolerance
    (0.04725, 0.063, 300, ALPHA, 0.0),
    # the bench's slower release, 40% slower
    (0.063, 0.084, 150, 1.0, 0.97),
    (0.063, 0.084, 300, 1.0, 0.99),
])
def test_histogram_test_rates(median: float, p95: float, n: int, fails_at_most: float,
                              fails_at_least: float) -> None:
    """Stable TTFT median 45 ms, p95 60 ms, both revisions with 3% of requests stalled for a CPU; the
    measured failure rate over 300 seeded trials."""
    rng = random.Random(int(median * 1e5) + n)
    trials = 300
    fails = sum(stats.histogram_test(_hist(_lognormal(rng, n, median, p95, 0.03)),
                                     _hist(_lognormal(rng, n, 0.045, 0.060, 0.03)), 0.95, 10).p_value < ALPHA
                for _ in range(trials)) / trials
    assert fails_at_least <= fails <= fails_at_most, fails


def test_histogram_test_reports_the_boundary_it_compared() -> None:
    stable = Buckets.of({0.04: 25.0, 0.06: 95.0, 0.08: 100.0, math.inf: 100.0})
    slower = Buckets.of({0.04: 0.0, 0.06: 40.0, 0.08: 90.0, math.inf: 100.0})
    t = stats.histogram_test(slower, stable, 0.95, 10)
    # the stable p95 is 0.06; 0.06 * 1.1 = 0.066: b = 0.06, against the stable's share above 0.0545
    assert t.boundary == 0.06 and t.reference == pytest.approx(0.06 / 1.1)
    assert t.new_share == pytest.approx(0.6)
    assert t.stable_share == pytest.approx(1 - (25 + 70 * (0.06 / 1.1 - 0.04) / 0.02) / 100)
    assert t.p_value < 1e-6 and "share above 0.06s" in t.detail()
    assert stats.histogram_test(stable, stable, 0.95, 10).p_value == 1.0
    with pytest.raises(ValueError, match="need requests"):
        stats.histogram_test(Buckets.of({0.04: 0.0, math.inf: 0.0}), stable, 0.95, 10)
