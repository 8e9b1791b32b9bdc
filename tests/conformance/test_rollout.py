"""Check 4: the rollout controller's staged rollout to the equality on the reference cluster, with only
its shipped ServiceAccount and RBAC (overlays/rbac), compared with the same rollout on the embedded
cluster, driven there with the same ServiceAccount's token (docs/rollout.md; the gate is lws-semantics
§c: updated == ready == replicas).
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import rolloutkit
import yaml
from clusters import Target, wait_for

from lwsflow.controller.yamlio import dump_yaml
from lwsflow.sim.kubeconfig import write_kubeconfig

REPO = Path(__file__).resolve().parents[2]
SA_NS, SA = "lwsflow-system", "lwsflow-rollout"


def lws(name: str, image: str, replicas: int = 4) -> dict[str, Any]:
    return {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
            "metadata": {"name": name},
            "spec": {"replicas": replicas,
                     "rolloutStrategy": {"type": "RollingUpdate",
                                         "rollingUpdateConfiguration": {"maxSurge": 0, "maxUnavailable": 1}},
                     "leaderWorkerTemplate": {"size": 2, "workerTemplate": {"spec": {"containers": [
                         {"name": "engine", "image": image}]}}}}}


def _status(target: Target, ns: str, name: str) -> dict[str, Any]:
    out = target.kubectl("get", "lws", name, "-n", ns, "-o", "json")
    return json.loads(out.stdout).get("status") or {}


def _equal(target: Target, ns: str, name: str, replicas: int) -> bool:
    st = _status(target, ns, name)
    return st.get("readyReplicas") == st.get("updatedReplicas") == st.get("replicas") == replicas


def _service_account_kubeconfig(reference: Target, path: Path) -> Path:
    """A kubeconfig holding a TokenRequest token of the shipped ServiceAccount, nothing more."""
    reference.kubectl("apply", "-k", str(REPO / "overlays" / "rbac"))  # its namespace too
    return _service_account_kubeconfig_only(reference, path)


def _service_account_kubeconfig_only(reference: Target, path: Path) -> Path:
    token = reference.kubectl("create", "token", SA, "-n", SA_NS, "--duration", "1h").stdout.strip()
    admin = yaml.safe_load(reference.kubeconfig.read_text())
    cluster = admin["clusters"][0]["cluster"]
    return write_kubeconfig(path, cluster["server"], token, "lwsflow-rollout",
                            ca_pem=base64.b64decode(cluster["certificate-authority-data"]))


def _rollout(target: Target, kubeconfig: Path, tmp: Path, image: str = "engine:v2",
             expect_rc: int = 0) -> dict[str, Any]:
    ns = target.namespace("rollout")
    target.kubectl("apply", "--server-side", "-n", ns, "-f", "-", stdin=dump_yaml(lws("m", "engine:v1")))
    wait_for(f"[{target.name}] v1 ready", lambda: _equal(target, ns, "m", 4), timeout=120)
    manifest, report = tmp / f"{target.name}.yaml", tmp / f"{target.name}-report.json"
    manifest.write_text(dump_yaml(lws("m", image)))
    lwsflow = Path(sys.executable).with_name("lwsflow")
    deadline = "30s" if expect_rc else "2m"  # a bad release fails its first gate at the deadline
    proc = subprocess.run([str(lwsflow), "rollout", "lws/m", "-n", ns, "--kubeconfig", str(kubeconfig),
                           "--manifest", str(manifest), "--stages", "1,50%,100%", "--deadline", deadline,
                           "--report", str(report)], capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == expect_rc, f"[{target.name}] exit {proc.returncode}: {proc.stderr.strip()}"
    final = "engine:v1" if expect_rc else image
    wait_for(f"[{target.name}] all on {final}", lambda: {
        c["image"] for p in target.items("pods", ns) for c in p["spec"]["containers"]} == {final})
    wait_for(f"[{target.name}] equality", lambda: _equal(target, ns, "m", 4))
    return dict(json.loads(report.read_text()))


@pytest.mark.timeout(900)
def test_staged_rollout_to_equality_with_the_shipped_rbac(reference: Target, embedded: Target,
                                                           tmp_path: Path) -> None:
    sa_kubeconfig = _service_account_kubeconfig(reference, tmp_path / "sa.kubeconfig")
    ref = _rollout(reference, sa_kubeconfig, tmp_path)
    emb = _rollout(embedded, rolloutkit.sa_kubeconfig(embedded, tmp_path / "emb-sa.kubeconfig"), tmp_path)
    for doc in (ref, emb):
        assert doc["result"] == "succeeded"

    def stages(doc: dict[str, Any]) -> list[tuple[Any, ...]]:
        return [(s["index"], s["target_groups"], s["partition"], s["result"]) for s in doc["stages"]]

    assert stages(ref) == stages(emb)
    assert ref["partitions_written"] == emb["partitions_written"]
    assert ref["floor"] == emb["floor"] and ref["min_ready_groups"] >= ref["floor"]


@pytest.mark.timeout(900)
def test_bad_release_rolled_back_with_the_floor_held(reference: Target, embedded: Target,
                                                      tmp_path: Path) -> None:
    """An image that never gets Ready (conftest's never-ready pattern) fails stage 1's gate at the
    deadline; the controller rolls back to v1 and never drops below the floor of ready groups."""
    sa_kubeconfig = tmp_path / "sa.kubeconfig"
    if reference.kubectl("get", "namespace", SA_NS, check=False).returncode != 0:
        _service_account_kubeconfig(reference, sa_kubeconfig)
    else:
        _service_account_kubeconfig_only(reference, sa_kubeconfig)
    ref = _rollout(reference, sa_kubeconfig, tmp_path, "engine:never-ready-2", expect_rc=1)
    emb = _rollout(embedded, rolloutkit.sa_kubeconfig(embedded, tmp_path / "emb-sa.kubeconfig"), tmp_path,
                   "engine:never-ready-2", expect_rc=1)
    assert ref["result"] == emb["result"] != "succeeded"
    assert [s["result"] for s in ref["stages"]] == [s["result"] for s in emb["stages"]]
    for doc in (ref, emb):
        assert doc["min_ready_groups"] >= doc["floor"], doc
