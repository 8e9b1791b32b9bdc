"""Capacity check: surge groups are gangs that must fit whole in free GPUs."""

from __future__ import annotations

from rollout_builders import lws

from controller.rollout import capacity, gate


def node(name: str, gpus: int, *, pool: str = "h100", taint: bool = True, ready: bool = True) -> dict:
    return {"metadata": {"name": name, "labels": {"lwsflow.io/node-pool": pool}},
            "spec": {"taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
                     if taint else []},
            "status": {"allocatable": {"nvidia.com/gpu": str(gpus)},
                       "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def pod(node_name: str, gpus: int) -> dict:
    return {"spec": {"nodeName": node_name, "containers": [
        {"name": "c", "resources": {"requests": {"nvidia.com/gpu": str(gpus)}}}]},
        "status": {"phase": "Running"}}


def gpu_lws(surge: int, size: int = 2, gpus: int = 8) -> dict:
    obj = lws(replicas=4, max_surge=surge)
    tmpl = obj["spec"]["leaderWorkerTemplate"]
    tmpl["size"] = size
    tmpl["workerTemplate"]["spec"].update(
        nodeSelector={"lwsflow.io/node-pool": "h100"},
        tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}])
    tmpl["workerTemplate"]["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": gpus}}
    return obj


def test_surge_fits_when_whole_groups_fit() -> None:
    nodes = [node(f"n{i}", 8) for i in range(10)]
    pods = [pod(f"n{i}", 8) for i in range(8)]  # 8 nodes busy, 2 free = one group of 2 x 8 GPUs
    rep = capacity.check(gpu_lws(1), nodes, pods)
    assert rep.fits and rep.groups_that_fit == 1 and rep.free_gpus == 16 and rep.gpus_per_group == 16


def test_infeasible_surge_refused_with_numbers() -> None:
    nodes = [node(f"n{i}", 8) for i in range(10)]
    pods = [pod(f"n{i}", 8) for i in range(8)]
    rep = capacity.check(gpu_lws(2), nodes, pods)
    assert not rep.fits and rep.surge_groups == 2 and rep.groups_that_fit == 1
    assert "2 surge group(s) x 16 GPUs do NOT fit" in rep.message and "16 free GPUs" in rep.message


def test_gang_needs_every_pod_placed_not_just_gpu_total() -> None:
    # 16 free GPUs in total, but as 4 x 4 fragments: no node takes an 8-GPU pod
    nodes = [node(f"n{i}", 8) for i in range(4)]
    pods = [pod(f"n{i}", 4) for i in range(4)]
    rep = capacity.check(gpu_lws(1), nodes, pods)
    assert rep.free_gpus == 16 and not rep.fits


def test_ineligible_nodes_do_not_count() -> None:
    nodes = [node("a", 8, pool="other"), node("b", 8, ready=False), node("c", 8, taint=True)]
    obj = gpu_lws(1, size=1)
    obj["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"].pop("tolerations")
    rep = capacity.check(obj, nodes, [])
    assert rep.eligible_nodes == 0 and not rep.fits


def test_no_surge_always_fits_and_auto_budget() -> None:
    assert capacity.check(gpu_lws(0), [], []).fits
    obj, msg = capacity.auto_budget(gpu_lws(2))
    assert gate.max_surge(obj) == 0 and gate.max_unavailable(obj) >= 1 and "maxSurge 0" in msg
