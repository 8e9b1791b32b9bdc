"""Gang scheduler for the embedded cluster: node model, filters, scoring and group placement.

An LWS group is placed all together or not at all (like a Volcano PodGroup with minMember=size):
when the leader is placed, nodes for every worker are reserved at once; worker pods created later
bind to their reservation. With the exclusive-topology annotation the whole group goes into one
topology domain that holds no other group (the webhook's required affinity/anti-affinity).

Scoring ``binpack`` is fragmentation-aware: the fitting node with the FEWEST FREE GPUs wins (not the
most utilised one: a node that lost GPUs has few free GPUs at low utilisation). ``spread`` picks the
least allocated node. Nodes are kept in buckets by free GPUs so placement stays O(buckets), not
O(nodes), per pod.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field

from lwsflow.controller.api.scheduling import tolerates
from lwsflow.sim.freelevels import FreeLevels
from lwsflow.sim.podutil import requests
from lwsflow.sim.policies import Policy, for_scoring


@dataclass
class NodeInfo:
    """One node as the scheduler accounts it: allocatable, used, readiness, group keys."""

    name: str
    pool: str
    labels: dict[str, str]
    taints: list[dict]
    gpus: int  # allocatable
    cpu_m: int
    mem: int
    used_gpus: int = 0
    used_cpu_m: int = 0
    used_mem: int = 0
    ready: bool = True
    cordoned: bool = False  # spec.unschedulable (kubectl cordon / drain)
    group_keys: Counter = field(default_factory=Counter)  # exclusive-topology occupancy

    @property
    def free_gpus(self) -> int:
        return self.gpus - self.used_gpus

    def fits(self, gpu: int, cpu: int, mem: int) -> bool:
        return (
            self.ready
            and not self.cordoned
            and gpu <= self.free_gpus
            and cpu <= self.cpu_m - self.used_cpu_m
            and mem <= self.mem - self.used_mem
        )


@dataclass(frozen=True)
class PodNeeds:
    """What one pod asks of a node: resources, nodeSelector, tolerations."""

    gpu: int
    cpu: int
    mem: int
    node_selector: tuple[tuple[str, str], ...]
    tolerations: tuple[dict, ...]

    @classmethod
    def of(cls, pod_spec: dict) -> PodNeeds:
        gpu, cpu, mem = requests(pod_spec)
        return cls(
            gpu,
            cpu,
            mem,
            tuple(sorted((pod_spec.get("nodeSelector") or {}).items())),
            tuple(pod_spec.get("tolerations") or ()),
        )


class Scheduler:
    """Node accounting plus placement. Pure in-memory; the cluster writes bindings to the store."""

    def __init__(self, scoring: str = "binpack", policy: Policy | None = None) -> None:
        self.scoring = scoring
        self.policy: Policy = policy or for_scoring(scoring)  # node order comes from the policy
        self.nodes: dict[str, NodeInfo] = {}
        self._levels = FreeLevels()
        self._domains: dict[str, dict[str, list[str]]] = {}  # topology key -> value -> node names
        # FailedScheduling messages by pod shape, valid until anything that can change a placement
        self.fit_errors: dict[tuple[object, ...], str] = {}

    # -- node accounting -------------------------------------------------------------------------------
    def _changed(self) -> None:
        if self.fit_errors:
            self.fit_errors.clear()

    def add_node(self, node: NodeInfo) -> None:
        self._changed()
        self.nodes[node.name] = node
        self._levels.add(node.name, node.free_gpus)
        self._domains.clear()

    def _rebucket(self, node: NodeInfo, before: int) -> None:
        self._levels.move(node.name, before, node.free_gpus)

    def allocate(self, node_name: str, needs: PodNeeds, group_key: str = "", sign: int = 1) -> None:
        self._changed()
        node = self.nodes[node_name]
        before = node.free_gpus
        node.used_gpus += sign * needs.gpu
        node.used_cpu_m += sign * needs.cpu
        node.used_mem += sign * needs.mem
        if group_key:
            node.group_keys[group_key] += sign
            if node.group_keys[group_key] <= 0:
                del node.group_keys[group_key]
        self._rebucket(node, before)

    def release(self, node_name: str, needs: PodNeeds, group_key: str = "") -> None:
        if node_name in self.nodes:
            self.allocate(node_name, needs, group_key, sign=-1)

    def set_node_state(self, node_name: str, *, ready: bool | None = None,
                       cordoned: bool | None = None) -> None:
        """Readiness (node lifecycle) or ``spec.unschedulable`` (cordon) of one node changed."""
        self._changed()
        node = self.nodes[node_name]
        if ready is not None:
            node.ready = ready
        if cordoned is not None:
            node.cordoned = cordoned

    def set_gpus(self, node_name: str, gpus: int) -> None:
        self._changed()
        node = self.nodes[node_name]
        before = node.free_gpus
        node.gpus = gpus
        self._rebucket(node, before)

    # -- filtering and scoring -------------------------------------------------------------------------
    def feasible(self, node: NodeInfo, needs: PodNeeds, taken: tuple[int, int, int] = (0, 0, 0)) -> bool:
        """Whether ``needs`` fits on ``node`` on top of ``taken`` (GPUs, CPU millis, memory bytes)."""
        if not node.fits(needs.gpu + taken[0], needs.cpu + taken[1], needs.mem + taken[2]):
            return False
        for k, v in needs.node_selector:
            if node.labels.get(k) != v:
                return False
        return all(tolerates(needs.tolerations, t) for t in node.taints)

    def _ordered(self, needs: PodNeeds, among: set[str] | None = None) -> Iterator[str]:
        """Candidate node names, best first, lazily by free-GPU bucket."""
        for f in self.policy.order_levels(self._levels.at_least(needs.gpu), needs.gpu):
            for name in self._levels.names(f):
                if among is None or name in among:
                    yield name

    def pick(
        self,
        needs: PodNeeds,
        among: set[str] | None = None,
        taken: dict[str, tuple[int, int, int]] | None = None,
    ) -> str | None:
        """The best feasible node; ``taken`` holds tentative allocations of the same gang."""
        taken = taken or {}
        for name in self._ordered(needs, among):
            if self.feasible(self.nodes[name], needs, taken.get(name, (0, 0, 0))):
                return name
        return None

    def place_gang(
        self, members: list[PodNeeds], exclusive_key: str = "", group_key: str = ""
    ) -> list[str] | None:
        """Nodes for every member, or None when the whole group does not fit (nothing allocated)."""
        if not exclusive_key:
            return self._place_in(members, None)
        for _value, names in sorted(self._domain_map(exclusive_key).items()):
            if any(k != group_key for n in names for k in self.nodes[n].group_keys):
                continue  # anti-affinity: another group already lives in this domain
            placed = self._place_in(members, set(names))
            if placed:
                return placed
        return None

    def _place_in(self, members: list[PodNeeds], among: set[str] | None) -> list[str] | None:
        taken: dict[str, tuple[int, int, int]] = {}
        out = []
        for needs in members:
            name = self.pick(needs, among, taken)
            if name is None:
                return None
            g, c, m = taken.get(name, (0, 0, 0))
            taken[name] = (g + needs.gpu, c + needs.cpu, m + needs.mem)
            out.append(name)
        return out

    def _domain_map(self, key: str) -> dict[str, list[str]]:
        if key not in self._domains:
            dm: dict[str, list[str]] = {}
            for n in self.nodes.values():
                if key in n.labels:
                    dm.setdefault(n.labels[key], []).append(n.name)
            self._domains[key] = dm
        return self._domains[key]
