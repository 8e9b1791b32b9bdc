"""The TPU variables of the LWS pod webhook (sim/tpu_env.py; upstream pkg/utils/accelerators/tpu.go),
on pods built as the embedded LWS controller builds them. The conformance tier compares the same on
the reference cluster (upstream v0.9.0) for the TPU examples."""

from __future__ import annotations

from typing import Any

from lwsflow.controller.api import labels as L
from lwsflow.sim import tpu_env
from lwsflow.sim.lws_webhook import mutate_pod


def _pod(name: str, worker_index: str | None, *, size: int, tpus: int = 4, leader_tpus: bool = False,
         containers: int = 1, subgroup: int | None = None) -> dict[str, Any]:
    labels = {L.NAME: "tpu", **({L.WORKER_INDEX: worker_index} if worker_index is not None else {})}
    ann = {L.SIZE_ANNOTATION: str(size)}
    if worker_index != "0":
        ann[L.LEADER_NAME_ANNOTATION] = name.rsplit("-", 1)[0]
    if leader_tpus:
        ann[tpu_env.LEADER_REQUESTS_TPUS] = "true"
    if subgroup:
        ann[tpu_env.SUBGROUP_SIZE] = str(subgroup)
    return {"metadata": {"name": name, "namespace": "ns", "labels": labels, "annotations": ann},
            "spec": {"subdomain": "tpu", "containers": [
                {"name": f"c{i}", "resources": {"limits": {tpu_env.TPU: str(tpus)}}}
                for i in range(containers)]}}


def _env(pod: dict[str, Any], i: int = 0) -> dict[str, str]:
    env = pod["spec"]["containers"][i]["env"]
    return {e["name"]: e["value"] for e in env if e["name"].startswith("TPU_")}


def test_workers_only_leader_without_tpus() -> None:
    pod = _pod("tpu-0-2", None, size=4)
    mutate_pod(pod, 2)
    assert _env(pod) == {
        "TPU_WORKER_HOSTNAMES": "tpu-0-1.tpu,tpu-0-2.tpu,tpu-0-3.tpu", "TPU_WORKER_ID": "1",
        "TPU_NAME": "tpu-0", "TPU_PROCESS_ADDRESSES": "tpu-0-1.tpu:8476,tpu-0-2.tpu:8476,tpu-0-3.tpu:8476",
        "TPU_PROCESS_PORT": "8476"}
    # the LWS variables are there too
    names = {e["name"] for e in pod["spec"]["containers"][0]["env"]}
    assert names >= {L.ENV_LEADER_ADDRESS, L.ENV_WORKER_INDEX}


def test_leader_requesting_tpus_is_the_first_host() -> None:
    leader = _pod("tpu-1", "0", size=2)
    mutate_pod(leader, 1)
    assert _env(leader)["TPU_WORKER_HOSTNAMES"] == "tpu-1.tpu,tpu-1-1.tpu"
    assert _env(leader)["TPU_WORKER_ID"] == "0"
    worker = _pod("tpu-1-1", None, size=2, leader_tpus=True)
    mutate_pod(worker, 1)
    assert _env(worker)["TPU_WORKER_ID"] == "1"
    assert _env(worker)["TPU_WORKER_HOSTNAMES"] == "tpu-1.tpu,tpu-1-1.tpu"


def test_two_tpu_containers_get_a_host_and_port_each() -> None:
    pod = _pod("tpu-0-1", None, size=2, containers=2)
    mutate_pod(pod, 1)
    assert _env(pod, 1)["TPU_WORKER_ID"] == "1"
    assert _env(pod, 1)["TPU_PROCESS_ADDRESSES"] == "tpu-0-1.tpu:8476,tpu-0-1.tpu:8477"
    assert _env(pod, 1)["TPU_PROCESS_PORT"] == "8477"


def test_no_tpus_no_variables_and_given_ones_kept() -> None:
    pod = _pod("tpu-0-1", None, size=2, tpus=0)
    mutate_pod(pod, 1)
    assert _env(pod) == {}
    pod = _pod("tpu-0-1", None, size=2)
    pod["spec"]["containers"][0]["env"] = [{"name": "TPU_WORKER_ID", "value": "7"}]
    mutate_pod(pod, 1)
    assert _env(pod) == {"TPU_WORKER_ID": "7"}


def test_subgroup_hosts_are_the_subgroups() -> None:
    # size 5, sub-groups of 2, leader without TPUs: workers 1-2 are sub-group 0, 3-4 sub-group 1
    pod = _pod("tpu-0-4", None, size=5, subgroup=2)
    mutate_pod(pod, 4)
    assert pod["metadata"]["labels"][L.SUBGROUP_INDEX] == "1"
    assert _env(pod)["TPU_WORKER_HOSTNAMES"] == "tpu-0-3.tpu,tpu-0-4.tpu"
    assert _env(pod)["TPU_WORKER_ID"] == "1"
