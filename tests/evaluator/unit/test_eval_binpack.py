"""Fragmentation-aware bin-packing: fewest free GPUs wins, not highest utilisation (evaluator and cluster).

The pool: ``big`` has 8 healthy GPUs with 6 busy (2 free, 75 % utilised); ``small`` has a single
healthy GPU, idle (1 free, 0 % utilised). A 1-GPU job belongs on ``small``: utilisation scoring would
pick ``big`` and strand its last two GPUs apart, so a later 2-GPU job would have to wait.
"""

from __future__ import annotations

import pytest

from lwsflow.sim.cluster import Cluster
from lwsflow.sim.config import ClusterConfig, PoolConfig
from lwsflow.sim.evaluator.events import Event, JobCreate, NodeCreate
from lwsflow.sim.policies import get_policy
from lwsflow.sim.scheduler import NodeInfo, PodNeeds, Scheduler
from tests.evaluator.eval_helpers import HOUR, by_name, run


def _events() -> list[Event]:
    return [NodeCreate(0, "big", 8), NodeCreate(0, "small", 1),
            JobCreate(0, "six", 10 * HOUR, 1, 6),
            JobCreate(60, "one", HOUR, 1, 1),
            JobCreate(120, "two", HOUR, 1, 2)]


def test_evaluator_binpack_puts_the_1_gpu_job_on_the_1_gpu_node():
    jobs = by_name(run(_events(), "binpack-fragmentation"))
    assert jobs["six"].ran_on == ["big"]
    assert jobs["one"].ran_on == ["small"]  # 1 free beats 2 free, although small is 0 % utilised
    assert jobs["two"].ran_on == ["big"] and jobs["two"].wait == 0  # the two GPUs stayed together


def test_evaluator_spread_splits_the_free_gpus_and_the_2_gpu_job_waits():
    jobs = by_name(run(_events(), "default"))
    assert jobs["one"].ran_on == ["big"]  # most free GPUs first
    assert jobs["two"].wait == pytest.approx(HOUR - 60)  # waits for "one" to finish


@pytest.mark.parametrize(("policy", "expect"), [("binpack-fragmentation", "small"), ("default", "big")])
def test_embedded_scheduler_uses_the_policy(policy: str, expect: str):
    s = Scheduler(policy=get_policy(policy))
    s.add_node(NodeInfo("big", "gpu", {}, [], 8, 96_000, 2**40))
    s.add_node(NodeInfo("small", "gpu", {}, [], 1, 96_000, 2**40))
    s.allocate("big", PodNeeds(6, 1000, 2**30, (), ()))
    big = s.nodes["big"]
    assert big.used_gpus / big.gpus == 0.75 and s.nodes["small"].used_gpus == 0
    assert s.place_gang([PodNeeds(1, 1000, 2**30, (), ())]) == [expect]


def _pod(name: str, gpus: int) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
            "spec": {"containers": [{"name": "c", "image": "busybox",
                                     "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}]}}


@pytest.mark.parametrize(("scoring", "expect"), [("binpack", "small-0000"), ("spread", "big-0000")])
def test_embedded_cluster_places_pods_by_the_policy(scoring: str, expect: str):
    """Through the embedded cluster (store, kubelet, scheduler): ``binpack`` is binpack-fragmentation."""
    cfg = ClusterConfig(pools=[PoolConfig(name="big", count=1, gpus_per_node=8),
                               PoolConfig(name="small", count=1, gpus_per_node=1)], scoring=scoring)
    c = Cluster(cfg)
    assert c.scheduler.policy.name == {"binpack": "binpack-fragmentation", "spread": "default"}[scoring]
    c.store.create("pods", _pod("six", 6))
    c.settle()
    assert c.store.get("pods", "default", "six")["spec"]["nodeName"] == "big-0000"
    c.store.create("pods", _pod("one", 1))
    c.settle()
    assert c.store.get("pods", "default", "one")["spec"]["nodeName"] == expect


@pytest.mark.parametrize(("scoring", "policy"), [
    ("spread", "default"), ("binpack", "binpack-fragmentation"), ("gang", "gang"),
    ("binpack-fragmentation", "binpack-fragmentation"), ("least-slack-time", "least-slack-time"),
])
def test_cluster_config_selects_the_policy(scoring: str, policy: str) -> None:
    """Policies are pluggable in the embedded cluster: ClusterConfig.scoring names one."""
    from lwsflow.sim.cluster import Cluster
    from lwsflow.sim.config import ClusterConfig

    cfg = ClusterConfig.default().model_copy(update={"scoring": scoring})
    assert Cluster(cfg).scheduler.policy.name == policy
