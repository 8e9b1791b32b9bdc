"""Check 4: the rollout controller's staged rollout to the equality on the reference cluster, with only
its shipped ServiceAccount and RBAC (overlays/rbac), compared with the same rollout on the embedded
cluster (docs/rollout.md; the gate is lws-semantics §c: updated == ready == replicas).
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
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
    reference.kubectl("create", "namespace", SA_NS)
    reference.kubectl("apply", "-k", str(REPO / "overlays" / "rbac"))
    token = reference.kubectl("create", "token", SA, "-n", SA_NS, "--duration", "1h").stdout.strip()
    admin = yaml.safe_load(reference.kubeconfig.read_text())
    cluster = admin["clusters"][0]["cluster"]
    return write_kubeconfig(path, cluster["server"], token, "lwsflow-rollout",
                            ca_pem=base64.b64decode(cluster["certificate-authority-data"]))


def _rollout(target: Target, kubeconfig: Path, tmp: Path) -> dict[str, Any]:
    ns = target.namespace("rollout")
    target.kubectl("apply", "--server-side", "-n", ns, "-f", "-", stdin=dump_yaml(lws("m", "engine:v1")))
    wait_for(f"[{target.name}] v1 ready", lambda: _equal(target, ns, "m", 4), timeout=120)
    manifest, report = tmp / f"{target.name}.yaml", tmp / f"{target.name}-report.json"
    manifest.write_text(dump_yaml(lws("m", "engine:v2")))
    lwsflow = Path(sys.executable).with_name("lwsflow")
    proc = subprocess.run([str(lwsflow), "rollout", "lws/m", "-n", ns, "--kubeconfig", str(kubeconfig),
                           "--manifest", str(manifest), "--stages", "1,50%,100%", "--deadline", "3m",
                           "--report", str(report)], capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, f"[{target.name}] rollout failed: {proc.stderr.strip()}"
    images = {c["image"] for p in target.items("pods", ns) for c in p["spec"]["containers"]}
    assert images == {"engine:v2"}, f"[{target.name}] pods still on {images}"
    assert _equal(target, ns, "m", 4)
    return dict(json.loads(report.read_text()))


@pytest.mark.timeout(900)
def test_staged_rollout_to_equality_with_the_shipped_rbac(reference: Target, embedded: Target,
                                                           tmp_path: Path) -> None:
    sa_kubeconfig = _service_account_kubeconfig(reference, tmp_path / "sa.kubeconfig")
    ref = _rollout(reference, sa_kubeconfig, tmp_path)
    emb = _rollout(embedded, embedded.kubeconfig, tmp_path)
    for doc in (ref, emb):
        assert doc["result"] == "succeeded"

    def stages(doc: dict[str, Any]) -> list[tuple[Any, ...]]:
        return [(s["index"], s["target_groups"], s["partition"], s["result"]) for s in doc["stages"]]

    assert stages(ref) == stages(emb)
    assert ref["partitions_written"] == emb["partitions_written"]
    assert ref["floor"] == emb["floor"] and ref["min_ready_groups"] >= ref["floor"]
