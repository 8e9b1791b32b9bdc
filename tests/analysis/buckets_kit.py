"""Histogram readings for the analysis tests: latencies binned into cumulative ``le`` buckets."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence

from lwsflow.controller.analysis.stats import Buckets


def binned(samples: Iterable[float], bounds: Sequence[float], *, weight: float = 1.0,
           requests: float | None = None) -> Buckets:
    """Each sample counted ``weight`` times in the first bucket whose bound holds it (the last bound
    is ``math.inf``), as Prometheus's cumulative ``_bucket`` series."""
    counts = dict.fromkeys(bounds, 0.0)
    for x in samples:
        counts[next(le for le in bounds if x <= le)] += weight
    return Buckets.of(dict(zip(counts, itertools.accumulate(counts.values()), strict=True)),
                      requests=requests)
