"""Stage parsing: percent of replicas rounded up, strictly increasing, last is all."""

from __future__ import annotations

import pytest

from lwsflow.controller.api.duration import parse_duration
from lwsflow.controller.errors import InvalidInput
from lwsflow.controller.rollout.stages import partition_for, resolve_stages, scale_fraction


@pytest.mark.parametrize(("spec", "replicas", "want"), [
    pytest.param("1,25%,50%,100%", 8, [1, 2, 4, 8], id="canonical_8"),
    pytest.param("1,25%,50%,100%", 32, [1, 8, 16, 32], id="canonical_32"),
    pytest.param("25%,100%", 3, [1, 3], id="percent_rounds_up"),
    pytest.param("1, 2 ,3", 3, [1, 2, 3], id="spaces_and_counts"),
    pytest.param("100%", 5, [5], id="single_stage"),
    pytest.param("10%,100%", 1, None, id="one_group_collapses"),
])
def test_resolve(spec: str, replicas: int, want: list[int] | None) -> None:
    if want is None:
        with pytest.raises(InvalidInput, match="strictly increase"):
            resolve_stages(spec, replicas)
    else:
        assert resolve_stages(spec, replicas) == want


@pytest.mark.parametrize(("spec", "replicas", "match"), [
    pytest.param("", 4, "at least one", id="empty"),
    pytest.param("1,abc", 4, "not a group count", id="garbage"),
    pytest.param("0,100%", 4, "at least 1", id="zero_count"),
    pytest.param("0%,100%", 4, "1%..100%", id="zero_percent"),
    pytest.param("150%", 4, "1%..100%", id="over_100"),
    pytest.param("2,1,100%", 4, "strictly increase", id="decreasing"),
    pytest.param("50%,50%,100%", 4, "strictly increase", id="repeated"),
    pytest.param("1,50%", 4, "must be all", id="last_not_all"),
    pytest.param("1,9", 4, "more than spec.replicas", id="beyond_replicas"),
    pytest.param("-1,100%", 4, "not a group count", id="negative"),
    pytest.param("100%", 0, "nothing to roll", id="zero_replicas"),
])
def test_refused_naming_the_field(spec: str, replicas: int, match: str) -> None:
    with pytest.raises(InvalidInput, match=match) as exc:
        resolve_stages(spec, replicas)
    assert exc.value.field == "stages"
    assert "\n" not in str(exc.value)


def test_partition_and_fraction() -> None:
    assert [partition_for(t, 8) for t in resolve_stages("1,25%,50%,100%", 8)] == [7, 6, 4, 0]
    assert scale_fraction([1, 2, 4, 8], 8, 4) == [1, 1, 2, 4]
    assert scale_fraction([1, 2, 4, 8], 8, 2) == [1, 1, 1, 2]


@pytest.mark.parametrize(("text", "seconds"), [("5m", 300), ("90s", 90), ("1h", 3600), ("250ms", 0.25),
                                               ("12", 12), ("1.5m", 90)])
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text, "bake") == seconds  # plain seconds too: the one grammar


def test_bad_duration() -> None:
    with pytest.raises(InvalidInput, match="duration") as exc:
        parse_duration("5 minutes", "bake")
    assert exc.value.field == "bake"


@pytest.mark.parametrize("spec", ["1\n,100%", "1,100%\n"])
def test_stage_items_match_whole_text(spec: str) -> None:
    # each item is stripped first, so a newline around it is whitespace, never part of the number
    assert resolve_stages(spec, 4) == [1, 4]


@pytest.mark.parametrize("bad", ["5m\nx", "5mx", "m5"])
def test_duration_matches_whole_text(bad: str) -> None:
    with pytest.raises(InvalidInput):
        parse_duration(bad, "bake")


@pytest.mark.parametrize(("text", "ns", "field"), [
    ("lws/a\n", "ns", "target"), ("lws/a", "ns\n", "namespace"), ("pod/a", "ns", "target")])
def test_target_matches_whole_text(text: str, ns: str, field: str) -> None:
    from lwsflow.controller.rollout.session import parse_target

    with pytest.raises(InvalidInput) as exc:
        parse_target(text, ns)
    assert exc.value.field == field
    assert parse_target("pair/a-1", "ns").kind == "pair"
