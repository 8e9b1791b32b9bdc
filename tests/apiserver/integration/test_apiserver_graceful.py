"""Graceful deletion and StatefulSet history as kubectl shows them: a deleted pod is Terminating,
``--grace-period=0 --force`` removes it at once, ``kubectl rollout history`` lists revisions."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

from lwsflow.sim.config import ClusterConfig, PoolConfig
from lwsflow.sim.store import Store
from lwsflow.sim.testing import EmbeddedCluster
from tests.apiserver.apiserver_helpers import KUBECTL

POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
       "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "nginx:1"}]}}


def test_deleted_pod_shows_terminating_until_forced(kubectl, store: Store) -> None:
    # a pod a node holds, and no kubelet behind this bare API server to confirm its containers stopped
    kubectl("apply", "-f", "-", stdin=json.dumps(POD))
    kubectl("delete", "pod", "p", "--wait=false")
    meta = store.get("pods", "default", "p")["metadata"]
    assert meta["deletionGracePeriodSeconds"] == 30 and meta["deletionTimestamp"]
    row = kubectl("get", "pods", "--no-headers").stdout.split()
    assert row[0] == "p" and row[2] == "Terminating"
    out = kubectl("delete", "pod", "p", "--grace-period=0", "--force")
    assert 'pod "p" force deleted' in out.stdout
    assert store.try_get("pods", "default", "p") is None


def _kubectl(kubeconfig: Path, *args: str, stdin: str | None = None) -> str:
    proc = subprocess.run([str(KUBECTL), "--kubeconfig", str(kubeconfig), *args], input=stdin,
                          capture_output=True, text=True, timeout=30, check=False)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_rollout_history_lists_statefulset_revisions(tmp_path: Path) -> None:
    sts = {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "web"}, "spec": {
        "replicas": 0, "serviceName": "web", "selector": {"matchLabels": {"app": "web"}},
        "template": {"metadata": {"labels": {"app": "web"}},
                     "spec": {"containers": [{"name": "c", "image": "nginx:1"}]}}}}
    config = ClusterConfig(pools=[PoolConfig(name="cpu", count=1)], serve_engines=False)
    with EmbeddedCluster(tmp_path, config) as ec:
        _kubectl(ec.kubeconfig, "apply", "-f", "-", stdin=json.dumps(sts))
        sts["spec"]["template"]["spec"]["containers"][0]["image"] = "nginx:2"
        _kubectl(ec.kubeconfig, "apply", "-f", "-", stdin=json.dumps(sts))
        deadline = time.monotonic() + 20
        rows: list[str] = []
        while time.monotonic() < deadline:
            rows = _kubectl(ec.kubeconfig, "rollout", "history", "statefulset/web").split("\n")
            if [r.split()[:1] for r in rows if r.strip()][-2:] == [["1"], ["2"]]:
                break
            time.sleep(0.1)
        assert rows[0].startswith("statefulset.apps/web")
        assert [r.split()[0] for r in rows[2:] if r.strip()] == ["1", "2"], rows
