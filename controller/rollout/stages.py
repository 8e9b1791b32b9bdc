"""Rollout stages: ``1,25%,50%,100%`` -> the number of groups updated after each stage.

A stage is an absolute group count or a percent of ``spec.replicas`` rounded **up** (so ``25%`` of 3
is 1 group, never 0). Counts must be strictly increasing and the last stage must update every group;
anything else is refused with :class:`lwsflow.controller.errors.InvalidInput` naming the ``stages`` field.
"""

from __future__ import annotations

import math
import re

from lwsflow.controller.errors import InvalidInput

_ITEM = re.compile(r"(\d+)(%?)")  # used with fullmatch: "$" would let a trailing newline through
_FIELD = "stages"


def parse_stage_spec(spec: str) -> list[tuple[int, bool]]:
    """Split ``"1,25%,100%"`` into ``[(1, False), (25, True), (100, True)]`` (value, is_percent)."""
    if not isinstance(spec, str) or not spec.strip():
        raise InvalidInput("must list at least one stage, e.g. 1,25%,50%,100%", field=_FIELD)
    items: list[tuple[int, bool]] = []
    for raw in spec.split(","):
        text = raw.strip()
        m = _ITEM.fullmatch(text)
        if not m:
            raise InvalidInput(f"{text!r} is not a group count or a percent like 25%", field=_FIELD)
        value, pct = int(m.group(1)), bool(m.group(2))
        if pct and not 0 < value <= 100:
            raise InvalidInput(f"{text!r}: a percent must be in 1%..100%", field=_FIELD)
        if not pct and value < 1:
            raise InvalidInput(f"{text!r}: a group count must be at least 1", field=_FIELD)
        items.append((value, pct))
    return items


def resolve_stages(spec: str, replicas: int) -> list[int]:
    """Group counts updated after each stage, for an LWS of ``replicas`` groups.

    >>> resolve_stages("1,25%,50%,100%", 8)
    [1, 2, 4, 8]
    """
    if replicas < 1:
        raise InvalidInput(f"spec.replicas is {replicas}: nothing to roll out in stages", field=_FIELD)
    targets: list[int] = []
    for value, pct in parse_stage_spec(spec):
        # Percent of replicas rounded up, as the issue says; keeps a small first stage non-empty.
        count = math.ceil(value * replicas / 100) if pct else value
        label = f"{value}%" if pct else str(value)
        if count > replicas:
            raise InvalidInput(f"stage {label} is {count} groups, more than spec.replicas={replicas}",
                               field=_FIELD)
        if targets and count <= targets[-1]:
            raise InvalidInput(f"stage {label} resolves to {count} groups, not more than the previous "
                               f"stage's {targets[-1]} (stages must strictly increase)", field=_FIELD)
        targets.append(count)
    if targets[-1] != replicas:
        raise InvalidInput(f"the last stage updates {targets[-1]} of {replicas} groups; it must be all "
                           "(100%)", field=_FIELD)
    return targets


def partition_for(target_groups: int, replicas: int) -> int:
    """The LWS partition that lets exactly the ``target_groups`` highest ordinals update."""
    return max(0, replicas - target_groups)


def scale_fraction(targets: list[int], replicas: int, other_replicas: int) -> list[int]:
    """The same stage fractions applied to another role of ``other_replicas`` groups (rounded up).

    Used by the P/D pair: both LWS move through the same fractions. Duplicates are kept (a small
    role may not move at some stage); the last is always all of ``other_replicas``.
    """
    out = [min(other_replicas, math.ceil(t * other_replicas / replicas)) for t in targets]
    out[-1] = other_replicas
    return out


