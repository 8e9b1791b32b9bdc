"""GPU accounting for the evaluator: nodes bucketed by free GPUs, so no event scans every node.

Placing a pod asks the policy for the order of the (few) non-empty free-GPU levels and takes the first
node of the first level that fits: O(levels). ``capacity(g)`` (how many g-GPU pods fit right now) is
exact for gangs of identical pods and costs O(levels) too. Utilisation and fragmentation (free GPUs
stranded on partially used nodes) are kept as running totals updated on every change.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Protocol

from lwsflow.sim.freelevels import FreeLevels

OrderLevels = Callable[[Iterable[int], int], list[int]]


class Holder(Protocol):
    """Running work as the pool sees it: GPUs per pod and one node name per pod."""

    gpus: int
    nodes: list[str]


class GpuPool:
    """Nodes, their total and used GPUs, and the free-GPU buckets over them."""

    def __init__(self) -> None:
        self.total: dict[str, int] = {}
        self.used: dict[str, int] = {}
        self._levels = FreeLevels()
        self.total_gpus = 0
        self.used_gpus = 0
        self.stranded = 0  # free GPUs on nodes that are partially used

    def __len__(self) -> int:
        return len(self.total)

    # -- node membership -------------------------------------------------------------------------------
    def add_node(self, name: str, gpus: int) -> bool:
        if name in self.total:
            return False
        self.total[name], self.used[name] = gpus, 0
        self._levels.add(name, gpus)
        self.total_gpus += gpus
        return True

    def remove_node(self, name: str) -> bool:
        """Forget a node; the caller evicts what ran on it first (so it is empty here)."""
        if name not in self.total:
            return False
        if self.used[name]:
            self._change(name, -self.used[name])
        self._levels.remove(name, self.total[name])
        self.total_gpus -= self.total.pop(name)
        del self.used[name]
        return True

    # -- allocation ------------------------------------------------------------------------------------
    def free(self, name: str) -> int:
        return self.total[name] - self.used[name]

    def _stranded_on(self, name: str) -> int:
        used, total = self.used[name], self.total[name]
        return total - used if 0 < used < total else 0

    def _change(self, name: str, delta: int) -> None:
        before = self.free(name)
        self.stranded -= self._stranded_on(name)
        self.used[name] += delta
        self.used_gpus += delta
        self.stranded += self._stranded_on(name)
        # remove and add even when delta is 0: the node goes to the end of its level, as it always has
        self._levels.remove(name, before)
        self._levels.add(name, before - delta)

    def allocate(self, name: str, gpus: int) -> None:
        self._change(name, gpus)

    def release(self, name: str, gpus: int) -> None:
        if name in self.total:
            self._change(name, -gpus)

    # -- placement -------------------------------------------------------------------------------------
    def pick(self, gpus: int, order: OrderLevels) -> str | None:
        """The best node for one ``gpus``-GPU pod under the policy's node order, or None."""
        for level in order(self._levels.at_least(gpus), gpus):
            return self._levels.first(level)
        return None

    def place(self, pods: int, gpus: int, order: OrderLevels, *, gang: bool) -> list[str]:
        """Allocate up to ``pods`` pods one by one (each re-scored like a real scheduler).

        With ``gang`` it is all or nothing: nothing is allocated unless every pod fits.
        """
        if gang and self.capacity(gpus) < pods:
            return []
        out: list[str] = []
        for _ in range(pods):
            name = self.pick(gpus, order)
            if name is None:
                break
            self.allocate(name, gpus)
            out.append(name)
        return out

    def capacity(self, gpus: int, extra: Mapping[str, int] | None = None) -> int:
        """How many ``gpus``-GPU pods fit now, or if ``extra`` GPUs were freed on the named nodes."""
        if gpus == 0:
            return 1 << 30
        n = sum(count * (f // gpus) for f, count in self._levels.sizes() if f >= gpus)
        for name, more in (extra or {}).items():
            if name in self.total:
                f = self.free(name)
                n += (f + more) // gpus - f // gpus
        return n

    def trial(self, pods: int, gpus: int) -> PreemptionTrial:
        """A tentative preemption for ``pods`` pods of ``gpus`` GPUs (see ``policies.Trial``)."""
        return PreemptionTrial(self, pods, gpus)


class PreemptionTrial:
    """Counts what fits if some running work went away, incrementally: O(victim pods) per question."""

    def __init__(self, pool: GpuPool, pods: int, gpus: int) -> None:
        self.pool, self.pods, self.gpus = pool, pods, gpus
        self.capacity = pool.capacity(gpus)
        self.freed: dict[str, int] = {}  # node -> GPUs the victims so far would free there

    def _change(self, victim: Holder, sign: int) -> bool:
        g, freed, pool = self.gpus, self.freed, self.pool
        held = victim.gpus * sign
        for n in victim.nodes:
            f = pool.free(n) + freed.get(n, 0)
            self.capacity += (f + held) // g - f // g
            freed[n] = freed.get(n, 0) + held
        return self.capacity >= self.pods

    def add(self, victim: Holder) -> bool:
        return self._change(victim, 1)

    def remove(self, victim: Holder) -> bool:
        return self._change(victim, -1)
