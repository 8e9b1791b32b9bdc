"""Capacity check: surge groups are gangs that must fit whole in free GPUs."""

from __future__ import annotations

import pytest

from lwsflow.controller.api import labels as L
from lwsflow.controller.rollout import capacity, gate
from lwsflow.controller.rollout.capacity import Budget
from tests.rollout.rollout_builders import lws


def node(name: str, gpus: int, *, pool: str = "h100", taint: bool = True, ready: bool = True) -> dict:
    return {"metadata": {"name": name, "labels": {"lwsflow.io/node-pool": pool}},
            "spec": {"taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
                     if taint else []},
            "status": {"allocatable": {"nvidia.com/gpu": str(gpus)},
                       "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def pod(node_name: str, gpus: int, *, lws: str = "other", group: int = 0, **labels: str) -> dict:
    return {"metadata": {"namespace": "default", "labels": {
                L.NAME: lws, L.GROUP_INDEX: str(group), **labels}},
            "spec": {"nodeName": node_name, "containers": [
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
    # the 4 groups of "m" keep 8 nodes busy, 2 free = one surge group of 2 x 8 GPUs
    pods = [pod(f"n{i}", 8, lws="m", group=i // 2) for i in range(8)]
    rep = capacity.check(gpu_lws(1), nodes, pods)
    assert rep.fits and rep.groups_that_fit == 1 and rep.free_gpus == 16 and rep.gpus_per_group == 16


def test_infeasible_surge_refused_with_numbers() -> None:
    nodes = [node(f"n{i}", 8) for i in range(10)]
    pods = [pod(f"n{i}", 8, lws="m", group=i // 2) for i in range(8)]
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


def test_a_cpu_node_is_not_eligible_for_a_gpu_group() -> None:
    """Issue 23: three GPU nodes and an untainted CPU node of the same pool; the line counted the CPU
    node as eligible ("on 4 eligible node(s)")."""
    nodes = [node(f"g{i}", 8) for i in range(3)] + [node("cpu", 0, taint=False)]
    rep = capacity.check(gpu_lws(1, size=1), nodes, [])
    assert rep.eligible_nodes == 3 and set(rep.per_node_free) == {"g0", "g1", "g2"}
    assert "on 3 eligible node(s)" in rep.message


def test_same_gpus_without_surge_reuse_the_replaced_groups() -> None:
    # the 4 groups of "m" fill all 8 nodes: without surge each replaced group frees what it needs
    nodes = [node(f"n{i}", 8) for i in range(8)]
    pods = [pod(f"n{2 * g + w}", 8, lws="m", group=g) for g in range(4) for w in range(2)]
    rep = capacity.check(gpu_lws(0), nodes, pods)
    assert rep.fits and rep.replaced_that_fit == 4 and rep.free_gpus == 0
    assert not capacity.check(gpu_lws(1), nodes, pods).fits  # a surge group has nowhere to go
    # a manifest that names no namespace is matched in the target's; another namespace's groups of
    # the same name free nothing for it
    anon = gpu_lws(0)
    anon["metadata"].pop("namespace")
    assert capacity.check(anon, nodes, pods, namespace="default").fits
    assert not capacity.check(gpu_lws(0), nodes, pods, namespace="elsewhere").fits


def test_bigger_new_template_is_checked_with_the_new_gpus() -> None:
    # issue: 1 -> 8 GPUs per pod. Group g's two pods hold 1 GPU on nodes g and g+1 (a ring), so
    # every node keeps a pod of another group: a replaced group frees 2 x 1 GPU, never a whole node
    ring = [pod(f"n{(g + w) % 4}", 1, lws="m", group=g) for g in range(4) for w in range(2)]
    nodes = [node(f"n{i}", 8) for i in range(4)]
    rep = capacity.check(gpu_lws(0), nodes, ring)
    assert not rep.fits and rep.surge_groups == 0
    assert (rep.old_gpus_per_group, rep.gpus_per_group, rep.replaced_that_fit) == (2, 16, 0)
    assert rep.message == (
        "pool h100: 4 group(s) of 2 GPUs replaced by groups of 16 GPUs, 1 at a time (maxSurge 0, "
        "maxUnavailable 1) do NOT fit: new group 1 of 4 finds no room in 26 free GPUs on 4 eligible "
        "node(s) once the old groups ahead of it freed theirs (24 free before the rollout)")
    # two spare nodes take the first new group, then the rollout stalls part-way...
    two = capacity.check(gpu_lws(0), [*nodes, node("s0", 8), node("s1", 8)], ring)
    assert not two.fits and two.replaced_that_fit == 1
    # ...four let each replaced group's freed nodes take the next one
    four = [*nodes, *(node(f"s{i}", 8) for i in range(4))]
    assert capacity.check(gpu_lws(0), four, ring).fits
    # the same nodes with the old GPUs per pod: each replaced group frees what its new group needs
    same = [pod(f"n{(g + w) % 4}", 4, lws="m", group=g) for g in range(4) for w in range(2)]
    obj = gpu_lws(0, gpus=4)
    assert capacity.check(obj, nodes, same).fits


def test_new_node_selector_and_tolerations_decide_where_new_groups_go() -> None:
    nodes = [node("a", 8, pool="a100"), node("b", 8, pool="a100")]
    pods = [pod("a", 8, lws="m", group=0)]
    obj = gpu_lws(0, size=1)
    obj["spec"]["replicas"] = 1
    assert not capacity.check(obj, nodes, pods).fits  # the new template selects h100 nodes
    obj["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["nodeSelector"] = {
        "lwsflow.io/node-pool": "a100"}
    assert capacity.check(obj, nodes, pods).fits


def test_surge_already_running_is_not_placed_twice() -> None:
    # a frozen GitOps sync with maxSurge 1 already created the surge group (index 4)
    nodes = [node(f"n{i}", 8) for i in range(10)]
    pods = ([pod(f"n{2 * g + w}", 8, lws="m", group=g) for g in range(4) for w in range(2)]
            + [pod("n8", 8, lws="m", group=4), pod("n9", 8, lws="m", group=4)])
    assert capacity.check(gpu_lws(1), nodes, pods).fits


@pytest.mark.parametrize(("configured", "replicas", "expected"), [
    (Budget(2, 0), 4, [Budget(1, 0), Budget(0, 1), Budget(0, 2), Budget(0, 3)]),
    (Budget(0, 1), 3, [Budget(0, 2)]),
    (Budget(0, 1), 2, []),
    (Budget(1, 1), 2, [Budget(0, 1)]),
    (Budget(0, 0), 3, [Budget(0, 1), Budget(0, 2)]),
])
def test_auto_budget_candidates(configured: Budget, replicas: int, expected: list[Budget]) -> None:
    assert capacity.candidates(configured, replicas) == expected


def test_auto_budget_picks_less_surge_then_more_unavailable() -> None:
    nodes = [node(f"n{i}", 8) for i in range(8)]
    pods = [pod(f"n{2 * g + w}", 8, lws="m", group=g) for g in range(4) for w in range(2)]
    budget, rep = capacity.choose_budget(gpu_lws(2), nodes, pods)  # type: ignore[misc]
    assert budget == Budget(0, 1) and rep.fits
    obj = capacity.with_budget(gpu_lws(2), budget)
    assert gate.max_surge(obj) == 0 and gate.max_unavailable(obj) == 1
    # three 2-pod groups of 4 GPUs spread so that only two replaced at once free a whole node
    nodes3 = [node(f"n{i}", 8) for i in range(3)]
    spread = [pod(a, 4, lws="m", group=g) for g, pair in enumerate([("n2", "n0"), ("n1", "n2"), ("n0", "n1")])
              for a in pair]
    obj = gpu_lws(0, size=1)
    obj["spec"]["replicas"] = 3
    assert not capacity.check(obj, nodes3, spread).fits
    budget, rep = capacity.choose_budget(obj, nodes3, spread)  # type: ignore[misc]
    assert budget == Budget(0, 2) and rep.fits
    # nothing fits: no budget is chosen
    assert capacity.choose_budget(gpu_lws(0), nodes[:1], []) is None


def ds_doc(*, prefill: int = 1, decode: int = 1, gpus: int = 8, ruc: dict | None = None) -> dict:
    def role(name: str, replicas: int) -> dict:
        spec: dict = {"replicas": replicas, "leaderWorkerTemplate": {"size": 1, "workerTemplate": {"spec": {
            "nodeSelector": {"lwsflow.io/node-pool": "h100"},
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
            "containers": [{"name": "e", "resources": {"limits": {"nvidia.com/gpu": gpus}}}]}}}}
        if ruc is not None:
            spec["rolloutStrategy"] = {"type": "RollingUpdate", "rollingUpdateConfiguration": dict(ruc)}
        return {"name": name, "spec": spec}
    return {"metadata": {"name": "pd", "namespace": "default"},
            "spec": {"roles": [role("prefill", prefill), role("decode", decode)]}}


def ds_pods(prefill: int = 1, decode: int = 1) -> list[dict]:
    out, n = [], 0
    for role, count in (("prefill", prefill), ("decode", decode)):
        for g in range(count):
            out.append(pod(f"n{n}", 8, lws=f"pd-0-old-{role}", group=g,
                           **{L.DS_NAME: "pd", L.DS_ROLE: role}))
            n += 1
    return out


def test_ds_roles_default_to_surge_1_and_are_checked_together() -> None:
    assert capacity.role_budget(ds_doc()["spec"]["roles"][0]) == Budget(1, 0)  # §f defaults
    full = [node(f"n{i}", 8) for i in range(2)]
    rep = capacity.check_ds(ds_doc(), full, ds_pods())
    assert not rep.fits and rep.role == "prefill"
    assert rep.message.startswith("role prefill (pool h100): 1 surge group(s) x 8 GPUs do NOT fit")
    # both roles surge at the same step: one spare node is not enough, two are
    assert capacity.check_ds(ds_doc(), [*full, node("s0", 8)], ds_pods()).role == "decode"
    assert capacity.check_ds(ds_doc(), [*full, node("s0", 8), node("s1", 8)], ds_pods()).fits
    # an explicit budget without surge reuses each role's old GPUs
    assert capacity.check_ds(ds_doc(ruc={"maxSurge": 0, "maxUnavailable": 1}), full, ds_pods()).fits
    # a bigger new template per role is checked with the new GPUs (no room for 16 per pod)
    assert not capacity.check_ds(ds_doc(gpus=16, ruc={"maxSurge": 0, "maxUnavailable": 1}), full,
                                 ds_pods()).fits


def test_ds_auto_budget_is_per_role() -> None:
    full = [node(f"n{i}", 8) for i in range(3)]
    # one spare node: prefill's surge group takes it, decode (the role that ran short) gives up its
    # surge and replaces in place
    budgets, rep = capacity.choose_ds_budgets(ds_doc(), full, ds_pods())  # type: ignore[misc]
    assert rep.fits and budgets == {"prefill": Budget(1, 0), "decode": Budget(0, 1)}
    doc = capacity.ds_with_budgets(ds_doc(), budgets)
    assert doc["spec"]["roles"][1]["spec"]["rolloutStrategy"]["rollingUpdateConfiguration"] == {
        "maxSurge": 0, "maxUnavailable": 1}
    assert "rolloutStrategy" not in doc["spec"]["roles"][0]["spec"] or doc["spec"]["roles"][0][
        "spec"]["rolloutStrategy"]["rollingUpdateConfiguration"] == {"maxSurge": 1, "maxUnavailable": 0}
    assert capacity.choose_ds_budgets(ds_doc(gpus=16), full, ds_pods()) is None
