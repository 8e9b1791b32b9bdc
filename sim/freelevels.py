"""Node names bucketed by free GPUs, shared by the embedded cluster's scheduler and the evaluator's pool.

Placement asks a policy to order the few distinct free-GPU levels (``Policy.order_levels``) and walks
the nodes of each level in the order they reached it, so no decision scans every node. Only non-empty
levels are kept, which keeps the level list short.
"""

from __future__ import annotations

from collections.abc import Iterator


class FreeLevels:
    """free GPUs -> node names at that level, insertion-ordered (an ordered set per level)."""

    def __init__(self) -> None:
        self._by_free: dict[int, dict[str, None]] = {}

    def add(self, name: str, free: int) -> None:
        self._by_free.setdefault(free, {})[name] = None

    def remove(self, name: str, free: int) -> None:
        level = self._by_free[free]
        del level[name]
        if not level:
            del self._by_free[free]

    def move(self, name: str, before: int, after: int) -> None:
        """``name`` went from ``before`` to ``after`` free GPUs; it joins the end of its new level."""
        if before != after:
            self.remove(name, before)
            self.add(name, after)

    def at_least(self, gpus: int) -> list[int]:
        """The levels with ``gpus`` or more free GPUs, in no particular order (policies sort them)."""
        return [f for f in self._by_free if f >= gpus]

    def names(self, free: int) -> list[str]:
        """The nodes at one level, in the order they reached it (a copy: callers may move nodes)."""
        return list(self._by_free.get(free, ()))

    def first(self, free: int) -> str:
        return next(iter(self._by_free[free]))

    def sizes(self) -> Iterator[tuple[int, int]]:
        """(free GPUs, how many nodes have that many) per non-empty level."""
        return ((f, len(level)) for f, level in self._by_free.items())
