"""Free-GPU levels under the scheduler and the evaluator pool: order within a level, empty levels go."""

from __future__ import annotations

import pytest

from lwsflow.sim.freelevels import FreeLevels


def test_nodes_keep_the_order_they_reached_a_level_and_empty_levels_disappear() -> None:
    lv = FreeLevels()
    for name in ("a", "b", "c"):
        lv.add(name, 8)
    lv.move("a", 8, 4)
    lv.move("a", 4, 8)  # back at the end of its old level
    assert lv.names(8) == ["b", "c", "a"]
    assert lv.first(8) == "b"
    assert sorted(lv.at_least(0)) == [8]  # level 4 emptied and is gone
    assert lv.names(4) == []
    lv.move("b", 8, 8)  # no change: keeps its place
    assert lv.names(8) == ["b", "c", "a"]
    lv.move("c", 8, 2)
    assert sorted(lv.at_least(3)) == [8] and sorted(lv.at_least(2)) == [2, 8]
    assert sorted(lv.sizes()) == [(2, 1), (8, 2)]


def test_removing_a_node_not_at_that_level_is_an_error() -> None:
    lv = FreeLevels()
    lv.add("a", 8)
    with pytest.raises(KeyError):
        lv.remove("a", 4)
    lv.remove("a", 8)
    assert list(lv.sizes()) == []
