"""Placement flag parsing: label keys and values must match whole (a trailing newline is not a label)."""

from __future__ import annotations

import pytest

from lwsflow.components.step_placement import parse_node_selector, parse_toleration
from lwsflow.controller.errors import InvalidInput


@pytest.mark.parametrize("item", ["pool=h100\n", "pool\n=h100", "a/pool=h100\n"])
def test_node_selector_refuses_a_trailing_newline(item: str) -> None:
    with pytest.raises(InvalidInput, match="is not a valid label"):
        parse_node_selector([item])


@pytest.mark.parametrize(("text", "what"), [("gpu=yes\n:NoSchedule", "taint value"),
                                           ("gpu\n:NoSchedule", "label key")])
def test_toleration_refuses_a_trailing_newline(text: str, what: str) -> None:
    with pytest.raises(InvalidInput, match=f"is not a valid {what}"):
        parse_toleration(text)


def test_valid_flags_still_parse() -> None:
    selector = parse_node_selector(["cloud.example/pool=h100", "empty="])
    assert selector == {"cloud.example/pool": "h100", "empty": ""}
    tol = parse_toleration("nvidia.com/gpu=present:NoSchedule")
    assert (tol.key, tol.value, tol.effect) == ("nvidia.com/gpu", "present", "NoSchedule")
