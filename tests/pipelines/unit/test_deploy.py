"""Stage plans at small replica counts and the release postcondition (pure functions)."""

from __future__ import annotations

import pytest

from lwsflow.components.deploy import feasible_stages
from lwsflow.controller.api.objects import container_images


@pytest.mark.parametrize(("stages", "replicas", "want", "dropped"), [
    pytest.param("1,100%", 1, "100%", ["1"], id="one_replica_collapses_to_all"),
    pytest.param("1,100%", 2, "1,100%", [], id="two_replicas_keep_both"),
    pytest.param("1,50%,100%", 2, "1,100%", ["50%"], id="half_of_two_is_one"),
    pytest.param("25%,50%,100%", 8, "25%,50%,100%", [], id="percent_plan_unchanged"),
    pytest.param("100%", 3, "100%", [], id="single_stage"),
])
def test_feasible_stages(stages: str, replicas: int, want: str, dropped: list[str]) -> None:
    assert feasible_stages(stages, replicas) == (want, dropped)


def test_container_images_finds_every_template() -> None:
    lws = {"spec": {"leaderWorkerTemplate": {
        "leaderTemplate": {"spec": {"containers": [{"name": "l", "image": "r/a@sha256:1"}]}},
        "workerTemplate": {"spec": {"containers": [{"name": "w", "image": "r/a@sha256:1"},
                                                   {"name": "s", "image": "r/side:1"}]}}}}}
    ds = {"spec": {"roles": [{"name": "prefill", "spec": {"template": {"spec": {"containers": [
        {"name": "p", "image": "r/p@sha256:2"}]}}}}]}}
    assert set(container_images(lws)) == {"r/a@sha256:1", "r/side:1"}
    assert set(container_images(ds)) == {"r/p@sha256:2"}
