"""The blue-green tests' share check can fail (issue 23): a router that sends green nothing at the 10%
stage fails it, as does one that ignores the weights; a router honouring them passes in all but a
negligible share of seeded draws."""

from __future__ import annotations

import random

import pytest

from tests.rollout.bluegreen_kit import N_REQUESTS, SHARE_ALPHA, assert_shares, share_fits


@pytest.mark.parametrize(("weight", "share"), [
    (10, 0.0),  # green gets nothing: the old +/-0.1 check accepted this at the 10% stage
    (10, 0.5),  # the weights ignored, requests spread evenly
    (50, 0.1),
    (50, 0.9),
    (100, 0.99),  # blue still served 2 requests at 100%
])
def test_a_router_not_honouring_the_weight_fails(weight: int, share: float) -> None:
    assert not share_fits(weight, share)
    with pytest.raises(AssertionError):
        assert_shares([(weight, share, set())], [weight])


def test_green_nothing_at_every_stage_fails() -> None:
    with pytest.raises(AssertionError):
        assert_shares([(10, 0.0, set()), (50, 0.0, set()), (100, 0.0, set())], [10, 50, 100])


@pytest.mark.parametrize("weight", [10, 50, 100])
def test_a_router_honouring_the_weight_passes(weight: int) -> None:
    """Seeded draws of an honest router: all of 2000 pass (the false alarm rate is SHARE_ALPHA)."""
    rng = random.Random(weight)
    shares = [sum(rng.random() < weight / 100 for _ in range(N_REQUESTS)) / N_REQUESTS for _ in range(2000)]
    assert all(share_fits(weight, s) for s in shares)
    assert SHARE_ALPHA <= 1e-3


def test_the_acceptance_region_at_ten_percent() -> None:
    fits = [k for k in range(N_REQUESTS + 1) if share_fits(10, k / N_REQUESTS)]
    assert fits == list(range(fits[0], fits[-1] + 1)) and 0 < fits[0] < 20 < fits[-1] < 40, fits
