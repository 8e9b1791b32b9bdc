"""Statistics for comparing a new revision with the stable one on counts (pure: no I/O).

Two tests, each one-sided with a stated false-positive rate ``alpha`` per measurement:

* **Rare-event ratios** (errors, KV-transfer failures), ``compare.mode: proportion``: events and
  totals of each revision; the new revision fails when a score test (Farrington-Manning, with a
  continuity correction of half an event per revision, which keeps the false-positive rate at or
  below alpha at small counts and at the tolerance's boundary with rare events, where the count's
  skew made a quarter event reject 1.2-1.5% at alpha 1% (the pass test keeps a quarter):
  ``tests/analysis/unit/test_sequential.py``) rejects "its ratio is at most the stable's plus
  ``tolerance`` points".
* **Latency quantiles from histograms**, ``compare.mode: histogram``: Prometheus histograms only
  know bucket counts, and an interpolated quantile jumps across a bucket when it sits near a
  boundary. The test compares shares of requests instead, where the counts are exact: ``b`` is the
  largest bucket boundary at or below the stable's quantile times ``1 + tolerance``; the new
  revision's share above ``b`` is tested against the stable's share above ``b / (1 + tolerance)``
  (a release at most ``tolerance`` percent slower, at every latency, has at most that share above
  ``b``). The stable's share at ``b / (1 + tolerance)``, inside its bucket, is interpolated with its
  normal quantile linear in log-latency (``Buckets.share_above_smooth``: exact for a log-normal
  latency; the linear interpolation of ``histogram_quantile`` overstated it where the density falls,
  so a release at the tolerance passed and one twice as slow was rarely failed); it is never below
  the stable's own share above ``b``, so an equally fast release keeps a margin of the stable's
  requests between the two points. No request above the bucket counts as half a one there (a share
  of 0 has no normal quantile), so the reading does not jump when one request crosses the boundary;
  the pass test counts the reading's own variance (``Buckets.smooth_reading``: the share above the
  bucket often rests on a handful of requests, and the reading magnifies its noise).
  ``resolution`` says what slowdown the buckets register whatever the latencies inside them.

  Where ``b`` may lie: never inside the body of the stable's distribution. Every boundary from the
  upper bound of the bucket holding the stable's 75th percentile (``BODY_QUANTILE``, from the
  histogram accumulated over the whole analysis) up to the ``b`` above is tested, and the smallest
  p-value is multiplied by their number (Bonferroni). Near the median a millisecond of CPU wait or
  interpolation error moves a fifth of the requests across a boundary (ITL: median 10 ms, p75 11.5 ms:
  ``b`` is never 0.01 s); further out, the lower boundaries carry most of a slower release's excess
  when CPU stalls have lifted the stable's quantile (``tests/analysis/unit/test_stats.py``).
* **Sample size**: a per-token histogram (ITL) counts every token of a request, and a request's
  tokens share its latency, so they are not independent samples: ``Buckets.requests`` (the requests
  the observations come from) scales the counts down to requests (a design effect of
  observations/requests), which keeps the p-value honest.
* **Minimum evidence to fail**: with fewer than ``MIN_REQUESTS`` requests in either revision a
  measurement cannot fail on the comparison (``evaluate.py`` makes it inconclusive): a single stall is
  a large share of a few.
* **Evidence to pass** (no pass without evidence): a measurement passes only when its sample was
  large enough to have caught the effect the tolerance names, with power ``POWER`` (80%). The
  comparison's mirror test does this on the data: the new revision passes when a one-sided test at
  ``1 - POWER`` rejects "it is worse than the stable by the tolerance or more" (proportion: its
  ratio at least the stable's plus ``tolerance``; histogram: its share above ``b`` at least the
  stable's above ``b / (1 + tolerance)``, at the boundary ``b`` about the quantile). A release worse
  by exactly the tolerance is then held back in at least 80% of measurements, at any traffic; a
  measurement neither failed nor shown within tolerance is inconclusive (too little traffic).
  ``needed_scale`` says how many times the requests seen would have sufficed at the same ratios,
  ``requests_to_judge`` the requests per revision an equal release needs (docs/analysis.md's table).
* **Sequential decisions** (``sequential_levels``): a stage's analysis looks at the accumulating
  counts at every measurement and stops as soon as one side decides. Each side is a one-sided
  group-sequential test with error spending (Lan & DeMets 1983, Biometrika 70:659; the spending
  functions of Kim & DeMets 1987, Biometrics 43:857): by the fraction ``t`` of the analysis's planned
  information the fail test has spent ``alpha * t`` (Pocock-like: a clear fault fails at an early
  look) and the pass test ``beta * t**3`` (O'Brien-Fleming-like: the last look keeps nearly the
  fixed test's power). A latency comparison's fail test spends nothing until the first look's
  fraction ``t1`` and ``alpha * (t - t1) / (1 - t1)`` after (``spent``'s ``delay``): the first look's
  counts are mostly a fresh engine's warm-up, which no test on them tells from a slower release.
  The nominal level of each look comes from the exact joint distribution of the accumulating
  statistic (independent normal increments, Jennison & Turnbull 2000, ch. 19, computed by recursive
  numerical integration, Armitage, McPherson & Rowe 1969), so the chance of ever failing a
  release at the tolerance over all looks is at most ``alpha``, and of ever passing a release worse
  by the tolerance at most ``beta``. The sides are non-binding (each is computed ignoring the
  other's stop), which only makes them conservative.
* **Absolute guard** (``guard_p_value``): a ratio far above any sane level fails whatever the
  stable's: an exact one-sided binomial test of "the ratio is at most ``bound``" at ``alpha``.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import lru_cache
from statistics import NormalDist

# the stable's quantile whose bucket's upper bound is the lowest boundary a histogram test may use
BODY_QUANTILE = 0.75
# fewer requests than this in either revision: a statistical measurement cannot fail on the comparison
MIN_REQUESTS = 30.0
# the share of releases worse by exactly the tolerance that a passing measurement must have caught
POWER = 0.8
# error spending of the sequential design (Kim-DeMets power family: level * t**rho)
FAIL_RHO = 1.0
PASS_RHO = 3.0
# the continuity correction of the ratio tests, in events per revision: half an event for the fail
# test (module docstring), a quarter for the pass test, whose rejections lie in the count's lighter
# lower tail (a release worse by the tolerance still passes at most POWER's complement: test_evidence)
CONTINUITY = 0.5
PASS_CONTINUITY = 0.25


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

    def share_above_smooth(self, x: float) -> float:
        """The share above ``x``, interpolated inside its bucket on the scale latencies follow: the
        share's normal quantile linear in log-latency, exact for a log-normal latency (the linear
        interpolation of ``share_above`` overstates the share where the density falls: at TTFT 45 / 60
        ms it put 24% of requests above 54.5 ms where 14% are, so a release 10% slower looked well
        within 10%, one 20% slower barely beyond). Between the bucket's two boundaries' shares, as
        the linear one; linear where a share is 0 or 1, or the bucket starts at 0."""
        return self.smooth_reading(x)[0]

    def smooth_reading(self, x: float) -> tuple[float, float | None]:
        """``share_above_smooth(x)`` and its sampling variance (None where it is read linearly): by
        the delta method through the two boundaries' shares, binomial on the samples and nested (the
        share above the upper one is part of the lower one's). The pass test needs it: the upper
        share often rests on a handful of requests, and the reading magnifies its noise."""
        lo = 0.0
        for le, _ in self.cumulative:
            if x <= le:
                if math.isinf(le) or lo <= 0 or x <= lo:
                    return self.share_above(x), None
                s_lo, s_hi = self.share_above(lo), self.share_above(le)
                if 0.0 < s_lo < 1.0 and s_hi <= 0.0 < self.samples:
                    # no request above the bucket: half a one (the ratio tests' continuity), not the
                    # linear reading, which put 10 times the share above 18 ms of an ITL whose p95 is
                    # 14 ms, so whether one request of 400 lay above 20 ms decided pass or hold
                    s_hi = min(0.5 / self.samples, s_lo / 2)
                if not (0.0 < s_hi < s_lo < 1.0):
                    return self.share_above(x), None
                z_lo, z_hi = z_of(s_lo), z_of(s_hi)
                f = math.log(x / lo) / math.log(le / lo)
                z = z_lo + f * (z_hi - z_lo)
                # d share / d s_lo and d share / d s_hi
                a, b = _phi(z) * (1 - f) / _phi(z_lo), _phi(z) * f / _phi(z_hi)
                var = (a * a * s_lo * (1 - s_lo) + b * b * s_hi * (1 - s_hi)
                       + 2 * a * b * s_hi * (1 - s_lo)) / self.samples
                return norm_sf(z), var
            lo = le
        return self.share_above(x), None

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


def proportion_p_value(new: Counts, stable: Counts, margin: float = 0.0,
                       continuity: float = CONTINUITY) -> float:
    """One-sided p-value of "new's ratio is at most stable's ratio + margin" (Farrington-Manning score
    test with a continuity correction of ``continuity`` events per revision). Small: the new one is
    worse."""
    x1, n1, x0, n0 = new.events, new.total, stable.events, stable.total
    if n1 <= 0 or n0 <= 0:
        raise ValueError("both revisions need requests")
    x1, x0 = min(max(x1, 0.0), n1), min(max(x0, 0.0), n0)
    diff = x1 / n1 - x0 / n0 - margin - continuity * (1 / n1 + 1 / n0)
    if diff <= 0:
        return 1.0
    p1, p0 = _restricted_mle(x1, n1, x0, n0, margin)
    var = p1 * (1 - p1) / n1 + p0 * (1 - p0) / n0
    return 0.0 if var <= 0 else norm_sf(diff / math.sqrt(var))


def proportion_pass_p_value(new: Counts, stable: Counts, margin: float) -> float:
    """One-sided p-value of "new's ratio is at least stable's ratio + margin" (the mirror of
    ``proportion_p_value``). Small: the data show the new one within the margin. With no margin an
    equal release never shows it (the continuity correction keeps the p-value at 1)."""
    return proportion_p_value(stable, new, -margin, PASS_CONTINUITY)


def guard_p_value(new: Counts, bound: float) -> float:
    """Exact one-sided binomial p-value of "new's ratio is at most ``bound``" (the absolute guard).
    Counts from ``increase()`` are extrapolated, so not whole: the events are rounded down and the
    total to the nearest, which keeps the test conservative."""
    k, n = math.floor(max(new.events, 0.0)), max(round(new.total), 0)
    n = max(n, k)
    if k <= 0 or bound >= 1:
        return 1.0
    if bound <= 0:
        return 0.0
    if k <= n * bound:
        return 1.0  # at or below the expected count: no evidence against the bound
    # P(X >= k) for X ~ Binomial(n, bound): terms fall from k on (k is above the mode)
    log_p, log_q = math.log(bound), math.log1p(-bound)
    total, i = 0.0, k
    while i <= n:
        term = math.exp(math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1)
                        + i * log_p + (n - i) * log_q)
        total += term
        if term < 1e-17 * total:
            break
        i += 1
    return min(1.0, total)


def z_of(p: float) -> float:
    """The standard normal's upper ``p`` quantile (``norm_sf(z_of(p)) == p``)."""
    return NormalDist().inv_cdf(1.0 - p)


def spent(level: float, t: float, rho: float, delay: float = 0.0) -> float:
    """The error spent by information fraction ``t`` (Kim-DeMets power family), none up to ``delay``
    (a warm-up: the power family on the information after it)."""
    t = min(1.0, max(0.0, t))
    if delay > 0.0:
        t = max(0.0, t - delay) / (1.0 - delay) if delay < 1.0 else float(t >= 1.0)
    return level * float(t ** rho)


_GRID = 241  # points of the continuation density per look (accurate to ~1e-5 of the levels here)


def _phi(x: float) -> float:
    return math.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)


@lru_cache(maxsize=1024)
def sequential_levels(level: float, rho: float, fractions: tuple[float, ...],
                      delay: float = 0.0) -> tuple[float, ...]:
    """Nominal one-sided p-value levels for looks at increasing information ``fractions`` (the last
    1.0) such that the chance of rejecting at any look, when the null holds at its boundary, is at most
    ``level``: look k rejects when its p-value is below the k-th level. The statistic accumulates
    (S_k ~ N(0, t_k), independent increments); the k-th boundary spends ``spent(level, t_k) -
    spent(level, t_(k-1))`` of the paths that crossed no earlier boundary (recursive integration);
    ``delay``: nothing is spent up to that fraction (``spent``), so those looks never reject."""
    out: list[float] = []
    grid: list[float] = []
    mass: list[float] = []  # probability of the continuation region at the previous look, per point
    t_prev = 0.0
    for t in fractions:
        t = max(t, t_prev + 1e-9)
        inc = spent(level, t, rho, delay) - spent(level, t_prev, rho, delay)
        if not out:
            u = math.inf if inc <= 0 else z_of(inc) * math.sqrt(t)
        elif inc <= 0:
            u = math.inf
        else:
            sd = math.sqrt(t - t_prev)

            def crossing(u: float, sd: float = sd, grid: list[float] = grid,
                         mass: list[float] = mass) -> float:
                return sum(w * norm_sf((u - s) / sd) for s, w in zip(grid, mass, strict=True))
            lo, hi = -10.0 * math.sqrt(t), 12.0 * math.sqrt(t)
            for _ in range(60):
                mid = (lo + hi) / 2
                if crossing(mid) > inc:
                    lo = mid
                else:
                    hi = mid
            u = hi
        out.append(norm_sf(u / math.sqrt(t)) if math.isfinite(u) else 0.0)
        # the density of S_k on the continuation region (below u), as masses on a grid
        top = u if math.isfinite(u) else 8.0 * math.sqrt(t)
        bottom = -8.0 * math.sqrt(t)
        h = (top - bottom) / (_GRID - 1)
        points = [bottom + i * h for i in range(_GRID)]
        if not grid:
            new = [_phi(x / math.sqrt(t)) / math.sqrt(t) * h for x in points]
        else:
            sd = math.sqrt(t - t_prev)
            new = [sum(w * _phi((x - s) / sd) for s, w in zip(grid, mass, strict=True)) / sd * h
                   for x in points]
        new[0] *= 0.5  # trapezoid ends
        new[-1] *= 0.5
        grid, mass, t_prev = points, new, t
    return tuple(out)


def needed_scale(passes: Callable[[float], bool], limit: float = 1e4) -> float | None:
    """The smallest factor k (>= 1) by which the requests seen, at the same ratios, would pass
    (``passes(k)``); None when no factor up to ``limit`` does (the ratios are not within tolerance)."""
    if passes(1.0):
        return 1.0
    if not passes(limit):
        return None
    lo, hi = 1.0, limit
    while hi / lo > 1.02:
        mid = math.sqrt(lo * hi)
        if passes(mid):
            hi = mid
        else:
            lo = mid
    return hi


def requests_to_judge(tolerance: float, ratio: float, power: float = POWER) -> float | None:
    """Proportion mode: the requests per revision at which an equal release (both at ``ratio``)
    passes on its expected counts, i.e. shows at ``1 - power`` that it is within ``tolerance``."""
    def passes(n: float) -> bool:
        c = Counts(ratio * n, n)
        return proportion_pass_p_value(c, c, tolerance) < 1.0 - power
    k = needed_scale(passes, 1e7)
    return None if k is None else math.ceil(k)


@dataclass(frozen=True)
class HistogramTest:
    p_value: float
    boundary: float  # b: the new revision's share above it ...
    reference: float  # ... against the stable's share above this point (b / (1 + tolerance))
    new_share: float
    stable_share: float
    new_quantile: float | None
    stable_quantile: float | None
    # the mirror test at the boundary about the quantile: small when the new revision's share above
    # it is shown below the stable's above its reference point (within tolerance)
    pass_p_value: float = 1.0
    samples: tuple[float, float] = (0.0, 0.0)  # (new, stable) independent samples
    pass_shares: tuple[float, float] = (0.0, 0.0)  # (new, stable) shares the mirror test compares
    # the smallest slowdown (a fraction: 0.5 is 50%) these buckets are sure to register at a tested
    # boundary, whatever the latencies inside a bucket (``resolution``)
    resolution: float | None = None
    # the samples the stable's interpolated share is worth to the mirror test (its variance as a
    # binomial share's: ``Buckets.smooth_reading``); None: its samples
    reference_samples: float | None = None

    def pass_p(self, scale: float = 1.0) -> float:
        """The mirror test on ``scale`` times the samples (``needed_scale``)."""
        n0 = self.samples[1] if self.reference_samples is None else self.reference_samples
        n1, n0 = self.samples[0] * scale, n0 * scale
        (s1, s0) = self.pass_shares
        return proportion_pass_p_value(Counts(s1 * n1, n1), Counts(s0 * n0, n0), 0.0)

    def detail(self) -> str:
        return (f"share above {self.boundary:g}s: new {self.new_share:.3f} vs stable "
                f"{self.stable_share:.3f} above {self.reference:.4g}s, p={self.p_value:.2g}")


def _share_test(new: Buckets, stable: Buckets, b: float, scale: float, quantile: float) -> HistogramTest:
    reference = b / scale
    new_share, (stable_share, var) = new.share_above(b), stable.smooth_reading(reference)
    # the stable's interpolated requests above the reference point, among all of its requests; both
    # as independent samples (requests, not tokens)
    n1, n0 = new.samples, stable.samples
    p = proportion_p_value(Counts(new_share * n1, n1), Counts(stable_share * n0, n0))
    # for passing, the reading's own noise: fewer samples where it magnifies a thin upper share's
    worth = None
    if var is not None and var > 0 and 0.0 < stable_share < 1.0:
        worth = min(n0, stable_share * (1 - stable_share) / var)
    return HistogramTest(p, b, reference, new_share, stable_share, new.quantile(quantile),
                         stable.quantile(quantile), samples=(n1, n0), pass_shares=(new_share, stable_share),
                         reference_samples=worth)


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
    # passing is about the quantile the tolerance names: the boundary at the top of the range
    about = tests[-1]
    return replace(best, p_value=min(1.0, best.p_value * len(tests)), pass_shares=about.pass_shares,
                   reference_samples=about.reference_samples, pass_p_value=about.pass_p(),
                   resolution=resolution(finite, chosen))


def resolution(boundaries: list[float], tested: list[float]) -> float | None:
    """The smallest slowdown the share test is sure to register at the buckets' resolution: at a
    tested boundary ``b`` with lower neighbour ``a``, a release slower by ``b / a`` or more moves every
    request the stable has above ``a`` above ``b``, at least the stable's interpolated share above
    ``b / (1 + tolerance)``, wherever the latencies lie inside the bucket. A smaller slowdown is seen
    only as far as the linear interpolation inside the bucket matches the true latencies (the power
    curve's ``ttft+10`` and ``ttft+20`` in docs/analysis.md). None when no tested boundary has a lower
    neighbour above 0."""
    ratios = [b / a - 1.0 for a, b in itertools.pairwise(boundaries) if b in tested and a > 0]
    return min(ratios) if ratios else None
