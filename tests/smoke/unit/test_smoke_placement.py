"""Placement rules on pod/node dicts: pool labels, GPU requests, exclusive topology."""

from __future__ import annotations

from lwsflow.components.smoke.placement import Expectation, check_lws_placement
from lwsflow.controller.api import labels as L

TOPO = "topo"


def node(name: str, pool: str = "h100", product: str = "H100", domain: str = "a", gpus: int = 8) -> dict:
    return {"metadata": {"name": name, "labels": {L.NODE_POOL: pool, L.GPU_PRODUCT: product, TOPO: domain}},
            "status": {"allocatable": {L.GPU_RESOURCE: str(gpus)}}}


def pod(name: str, group: str, worker: str, on: str, gpus: int = 8) -> dict:
    return {"metadata": {"name": name, "labels": {L.GROUP_INDEX: group, L.WORKER_INDEX: worker}},
            "spec": {"nodeName": on, "containers": [{"name": "e", "resources": {
                "limits": {L.GPU_RESOURCE: str(gpus)}}}]}}


def lws(exclusive: bool = True) -> dict:
    return {"metadata": {"name": "m", "annotations": {L.EXCLUSIVE_TOPOLOGY: TOPO} if exclusive else {}},
            "spec": {"leaderWorkerTemplate": {"size": 2, "workerTemplate": {"spec": {
                "nodeSelector": {L.NODE_POOL: "h100"},
                "containers": [{"name": "e", "resources": {"limits": {L.GPU_RESOURCE: 8}}}]}}}}}


NODES = {n["metadata"]["name"]: n for n in (node("n1", domain="a"), node("n2", domain="a"),
                                              node("n3", domain="b"), node("n4", domain="b"),
                                              node("x1", pool="a100", product="A100", domain="c"))}
GOOD = [pod("m-0", "0", "0", "n1"), pod("m-0-1", "0", "1", "n2"),
        pod("m-1", "1", "0", "n3"), pod("m-1-1", "1", "1", "n4")]


def test_right_pool_and_domains_pass():
    assert check_lws_placement(lws(), GOOD, NODES, Expectation(gpu_product="H100", gpus_per_pod=8)) == []


def test_pod_on_the_wrong_pool():
    pods = [*GOOD[:3], pod("m-1-1", "1", "1", "x1")]
    problems = check_lws_placement(lws(exclusive=False), pods, NODES, Expectation())
    assert problems == ["pod m-1-1: node x1 has lwsflow.io/node-pool='a100', expected 'h100'"]
    product = check_lws_placement(lws(exclusive=False), pods, NODES, Expectation(gpu_product="H100"))
    assert any("nvidia.com/gpu.product='A100'" in p for p in product)


def test_gpu_request_mismatch_and_node_too_small():
    pods = [*GOOD[:3], pod("m-1-1", "1", "1", "n4", gpus=4)]
    assert check_lws_placement(lws(), pods, NODES, Expectation()) == [
        "pod m-1-1: requests 4 GPU(s), expected 8"]
    nodes = {**NODES, "n4": node("n4", domain="b", gpus=2)}
    assert "pod m-1: needs 8 GPU(s) but node n4 has 2" not in check_lws_placement(lws(), GOOD, nodes,
                                                                                  Expectation())
    assert any("needs 8 GPU(s) but node n4 has 2" in p
               for p in check_lws_placement(lws(), GOOD, nodes, Expectation()))


def test_exclusive_topology_one_domain_per_group_and_no_sharing():
    split = [pod("m-0", "0", "0", "n1"), pod("m-0-1", "0", "1", "n3")]
    assert check_lws_placement(lws(), split, NODES, Expectation()) == [
        "group 0: spans topo domains ['a', 'b'], expected one"]
    shared = [pod("m-0", "0", "0", "n1"), pod("m-1", "1", "0", "n2")]
    assert check_lws_placement(lws(), shared, NODES, Expectation()) == [
        "groups 0 and 1 share topo=a (exclusive topology)"]
    assert check_lws_placement(lws(exclusive=False), shared, NODES, Expectation()) == []


def test_only_selected_groups_and_unscheduled_pods():
    pods = [*GOOD, pod("m-2", "2", "0", "")]
    assert check_lws_placement(lws(), pods, NODES, Expectation(), groups={"0", "1"}) == []
    assert check_lws_placement(lws(), pods, NODES, Expectation(), groups={"2"}) == [
        "pod m-2: not on a known node (nodeName='')"]
    assert check_lws_placement(lws(), pods, NODES, Expectation(), groups={"9"}) == ["no pods to check"]
