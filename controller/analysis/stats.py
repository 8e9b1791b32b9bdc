"""Statistics for comparing a new revision with the stable one on counts (pure: no I/O).

Two tests, each one-sided with a stated false-positive rate ``alpha`` per measurement:

* **Rare-event ratios** (errors, KV-transfer failures), ``compare.mode: proportion``: events and
  totals of each revision; the new revision fails when a score test (Farrington-Manning, with a
  continuity correction of a quarter event per revision, which keeps the false-positive rate at or
  below alpha at small counts: ``tests/analysis/test_stats.py``) rejects "its ratio is at most the
  stable's plus ``tolerance`` points".
* **Latency quantiles from histograms**, ``compare.mode: histogram``: Prometheus histograms only
  know bucket counts, and an interpolated quantile jumps across a bucket when it sits near a
  boundary. The test compares shares of requests instead, where the counts are exact: ``b`` is the
  largest bucket boundary at or below the stable's quantile times ``1 + tolerance``; the new
  revision's share above ``b`` is tested against the stable's share above ``b / (1 + tolerance)``
  (a release at most ``tolerance`` percent slower, at every latency, has at most that share above
  ``b``). The stable's share inside a bucket is interpolated linearly, as ``histogram_quantile``
  does; the interpolated share is never below the stable's own share above ``b``, so an equally fast
  release keeps a margin of the stable's requests between the two points.

  Where ``b`` may lie: never inside the body of the stable's distribution. Every boundary from the
  upper bound of the bucket holding the stable's 75th percentile (``BODY_QUANTILE``, from the
  histogram accumulated over the whole analysis) up to the ``b`` above is tested, and the smallest
  p-value is multiplied by their number (Bonferroni). Near the median a millisecond of CPU wait or
  interpolation error moves a fifth of the requests across a boundary (ITL: median 10 ms, p75 11.5 ms:
  ``b`` is never 0.01 s); further out, the lower boundaries carry most of a slower release's excess
  when CPU stalls have lifted the stable's quantile (``tests/analysis/test_stats.py``).
* **Sample size**: a per-token histogram (ITL) counts every token of a request, and a request's
  tokens share its latency, so they are not independent samples: ``Buckets.requests`` (the requests
  the observations come from) scales the counts down to requests (a design effect of
  observations/requests), which keeps the p-value honest.
* **Minimum evidence**: with fewer than ``MIN_REQUESTS`` requests in either revision a measurement
  cannot fail (``evaluate.py`` makes it inconclusive): a single stall is a large share of a few.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

# the stable's quantile whose bucket's upper bound is the lowest boundary a histogram test may use
BODY_QUANTILE = 0.75
# fewer requests than this in either revision: a statistical measurement may pass, not fail
MIN_REQUESTS = 30.0


@dataclass(frozen=True)
class Counts:
    """Events among a total (a ratio's numerator and denominator) of one revision."""

    events: float
    total: float

    @property
    def ratio(self) -> float | None:
        return self.events / self.total if self.total > 0 else None


@dataclass(frozen=True)
class Buckets:
    """A histogram of one revision: cumulative counts by upper boundary (``le``), ``+Inf`` included."""

    cumulative: tuple[tuple[float, float], ...]  # sorted by boundary
    # the requests the observations come from, when one request makes several (ITL: one a token)
    requests: float | None = None

    @classmethod
    def of(cls, by_le: dict[float, float], requests: float | None = None) -> Buckets:
        """From counts by boundary; ``increase()`` extrapolates each bucket's series on its own, so a
        count below a lower bucket's is raised to it (cumulative counts never fall)."""
        out, top = [], 0.0
        for le, c in sorted(by_le.items()):
            top = max(top, c)
            out.append((le, top))
        return cls(tuple(out), requests)

    @property
    def total(self) -> float:
        return self.cumulative[-1][1] if self.cumulative and math.isinf(self.cumulative[-1][0]) else 0.0

    @property
    def samples(self) -> float:
        """The independent samples the shares rest on: the requests, when fewer than observations."""
        return self.total if self.requests is None else max(0.0, min(self.total, self.requests))

    def below(self, x: float) -> float:
        """Requests at or below ``x``, linear inside a bucket (the first bucket starts at 0)."""
        lo, c_lo = 0.0, 0.0
        for le, c in self.cumulative:
            if x <= le:
                if math.isinf(le) or le == lo:
                    return c_lo if math.isinf(le) else c
                return c_lo + (c - c_lo) * (x - lo) / (le - lo)
            lo, c_lo = le, c
        return c_lo

    def share_above(self, x: float) -> float:
        return 1.0 - self.below(x) / self.total

    def quantile(self, q: float) -> float | None:
        """As PromQL's ``histogram_quantile``: linear inside the bucket holding the q-th request."""
        if self.total <= 0:
            return None
        rank, lo, c_lo = q * self.total, 0.0, 0.0
        for le, c in self.cumulative:
            if c >= rank:
                if math.isinf(le):
                    return lo  # the quantile lies above the highest finite boundary
                return lo if c == c_lo else lo + (le - lo) * (rank - c_lo) / (c - c_lo)
            lo, c_lo = le, c
        return lo

    def boundaries(self) -> list[float]:
        return [le for le, _ in self.cumulative if not math.isinf(le)]


def norm_sf(z: float) -> float:
    """P(Z > z) for a standard normal Z."""
    return 0.5 * math.erfc(z / math.sqrt(2.0))


def _restricted_mle(x1: float, n1: float, x0: float, n0: float, margin: float) -> tuple[float, float]:
    """(p1, p0) maximising the binomial likelihood under p1 = p0 + margin (concave in p0: bisection
    on the derivative, which avoids the closed form's corner cases at zero counts)."""
    eps = 1e-12
    lo, hi = max(0.0, -margin) + eps, min(1.0, 1.0 - margin) - eps

    def slope(p0: float) -> float:
        p1 = p0 + margin
        return x1 / p1 - (n1 - x1) / (1 - p1) + x0 / p0 - (n0 - x0) / (1 - p0)

    if slope(lo) <= 0:
        return lo + margin, lo
    if slope(hi) >= 0:
        return hi + margin, hi
    for _ in range(100):
        mid = (lo + hi) / 2
        if slope(mid) > 0:
            lo = mid
        else:
            hi = mid
    p0 = (lo + hi) / 2
    return p0 + margin, p0


def proportion_p_value(new: Counts, stable: Counts, margin: float = 0.0) -> float:
    """One-sided p-value of "new's ratio is at most stable's ratio + margin" (Farrington-Manning score
    test with a continuity correction of a quarter event per revision). Small: the new one is worse."""
    x1, n1, x0, n0 = new.events, new.total, stable.events, stable.total
    if n1 <= 0 or n0 <= 0:
        raise ValueError("both revisions need requests")
    x1, x0 = min(max(x1, 0.0), n1), min(max(x0, 0.0), n0)
    diff = x1 / n1 - x0 / n0 - margin - 0.25 * (1 / n1 + 1 / n0)
    if diff <= 0:
        return 1.0
    p1, p0 = _restricted_mle(x1, n1, x0, n0, margin)
    var = p1 * (1 - p1) / n1 + p0 * (1 - p0) / n0
    return 0.0 if var <= 0 else norm_sf(diff / math.sqrt(var))


@dataclass(frozen=True)
class HistogramTest:
    p_value: float
    boundary: float  # b: the new revision's share above it ...
    reference: float  # ... against the stable's share above this point (b / (1 + tolerance))
    new_share: float
    stable_share: float
    new_quantile: float | None
    stable_quantile: float | None

    def detail(self) -> str:
        return (f"share above {self.boundary:g}s: new {self.new_share:.3f} vs stable "
                f"{self.stable_share:.3f} above {self.reference:.4g}s, p={self.p_value:.2g}")


def _share_test(new: Buckets, stable: Buckets, b: float, scale: float, quantile: float) -> HistogramTest:
    reference = b / scale
    new_share, stable_share = new.share_above(b), stable.share_above(reference)
    # the stable's interpolated requests above the reference point, among all of its requests; both
    # as independent samples (requests, not tokens)
    n1, n0 = new.samples, stable.samples
    p = proportion_p_value(Counts(new_share * n1, n1), Counts(stable_share * n0, n0))
    return HistogramTest(p, b, reference, new_share, stable_share, new.quantile(quantile),
                         stable.quantile(quantile))


def histogram_test(new: Buckets, stable: Buckets, quantile: float, tolerance_pct: float) -> HistogramTest:
    """The bucket-share test of the module docstring at every boundary from the stable's body's end
    (the upper bound of the bucket holding its ``BODY_QUANTILE``) up to the largest boundary at or
    below the stable's quantile times ``1 + tolerance`` (so the stable's share above that one's
    reference point is at least ``1 - quantile``: the tail the quantile describes). With several, the
    smallest p-value is multiplied by their number (Bonferroni), which keeps the stated false-positive
    rate. ValueError when a revision has no requests."""
    q_stable, q_body = stable.quantile(quantile), stable.quantile(BODY_QUANTILE)
    if new.samples <= 0 or stable.samples <= 0 or q_stable is None or q_body is None:
        raise ValueError("both revisions need requests")
    scale = 1.0 + tolerance_pct / 100.0
    finite = stable.boundaries()
    # b/scale must lie above the first boundary: the first bucket's interpolation assumes requests
    # spread from 0 s, which no latency does
    candidates = [le for le in finite if le / scale > finite[0]] or finite[-1:]
    if not candidates:
        raise ValueError("the histogram has no finite bucket boundary")
    top = max(0, sum(le <= q_stable * scale for le in candidates) - 1)
    # the body's end: the first boundary at or above the stable's 75th percentile
    body = next((i for i, le in enumerate(candidates) if le >= q_body), len(candidates) - 1)
    chosen = candidates[body:top + 1] or [candidates[max(top, body)]]
    tests = [_share_test(new, stable, b, scale, quantile) for b in chosen]
    best = min(tests, key=lambda t: t.p_value)
    return replace(best, p_value=min(1.0, best.p_value * len(tests)))
