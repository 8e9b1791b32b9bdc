"""The seeded load generator: a reproducible mix of chat and completions, streaming and not, sent at a
rate to the endpoints it is given, counted by answer (issue 17)."""

from __future__ import annotations

import time

from lwsflow.components.loadgen import LoadGenerator, LoadSpec
from lwsflow.sim.engine import start_engine


def test_same_seed_same_requests_and_a_real_mix() -> None:
    a = LoadGenerator(LoadSpec(model="m", seed=5), list)
    b = LoadGenerator(LoadSpec(model="m", seed=5), list)
    reqs = [a.request() for _ in range(200)]
    assert reqs == [b.request() for _ in range(200)]
    assert {p for p, _ in reqs} == {"/v1/completions", "/v1/chat/completions"}
    assert {body["stream"] for _, body in reqs} == {True, False}
    assert len({body["max_tokens"] for _, body in reqs}) > 10


def test_drives_engines_at_about_the_rate_and_counts_errors() -> None:
    with start_engine(model="m") as good, start_engine(model="m", error_ratio=1.0) as bad:
        with LoadGenerator(LoadSpec(model="m", rate=50, seed=1, max_tokens=(1, 3)),
                           lambda: [good.url]) as load:
            time.sleep(1.0)
        assert 20 <= load.stats.sent <= 100 and load.stats.ok == load.stats.sent
        with LoadGenerator(LoadSpec(model="m", rate=50, seed=1, max_tokens=(1, 3)),
                           lambda: [bad.url]) as load:
            time.sleep(0.5)
        assert load.stats.errors == load.stats.sent > 0 and set(load.stats.by_status) == {500}


def test_no_answer_from_a_replaced_address_is_lost_not_an_error() -> None:
    """A request that got no answer counts as lost only when its address no longer serves at the end
    (a replaced pod); no answer from an address still listed stays an error."""
    import socket

    with socket.socket() as s:  # a port nothing listens on: connection refused, no answer
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"
    with start_engine(model="m") as good:
        urls = [good.url, dead]
        load = LoadGenerator(LoadSpec(model="m", rate=100, seed=2, max_tokens=(1, 2)), lambda: list(urls))
        with load:
            while load.stats.by_status.get(0, 0) < 5:
                time.sleep(0.05)
            urls.remove(dead)  # the rollout replaced that pod
        assert load.stats.lost == load.stats.by_status[0] >= 5 and load.stats.errors == 0, load.stats
        assert load.stats.ok + load.stats.lost == load.stats.sent
        urls.append(dead)
        load = LoadGenerator(LoadSpec(model="m", rate=100, seed=2, max_tokens=(1, 2)), lambda: list(urls))
        with load:
            while load.stats.by_status.get(0, 0) < 5:
                time.sleep(0.05)
        assert load.stats.lost == 0 and load.stats.errors == load.stats.by_status[0] >= 5, load.stats
