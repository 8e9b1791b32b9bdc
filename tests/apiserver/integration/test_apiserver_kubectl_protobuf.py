"""kubectl's imperative commands send protobuf for built-in kinds; the embedded cluster decodes every one.

Each case runs the real ``kubectl create|autoscale`` (``kubectl run`` sends JSON), reads the object
back with ``kubectl get`` and checks its fields, and checks that the decoded body is exactly what
kubectl itself prints for ``--dry-run=client -o json`` (its JSON form of the very object it encoded).
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from lwsflow.sim import kinds
from lwsflow.sim.apiserver import ApiServer
from lwsflow.sim.apiserver import protobuf as pb
from tests.apiserver.apiserver_helpers import http

Kubectl = Callable[..., subprocess.CompletedProcess[str]]

# (kubectl arguments, resource to get, fields the object must read back with)
CASES: list[tuple[list[str], str, dict[str, Any]]] = [
    (["create", "namespace", "team"], "namespace/team", {"metadata": {"name": "team"}}),
    (["create", "configmap", "cm1", "--from-literal=a=b", "--from-file=blob={blob}"], "configmap/cm1",
     {"data": {"a": "b"}, "binaryData": {"blob": "AP+A"}}),
    (["create", "secret", "generic", "s1", "--from-literal=pw=canary-value"], "secret/s1",
     {"data": {"pw": "Y2FuYXJ5LXZhbHVl"}, "type": "Opaque"}),
    (["create", "secret", "docker-registry", "reg", "--docker-server=r.io", "--docker-username=u",
      "--docker-password=p"], "secret/reg", {"type": "kubernetes.io/dockerconfigjson"}),
    (["create", "serviceaccount", "sa1"], "serviceaccount/sa1", {"metadata": {"name": "sa1"}}),
    (["create", "role", "r1", "--verb=get,list", "--resource=pods", "--resource-name=x"], "role/r1",
     {"rules": [{"apiGroups": [""], "resources": ["pods"], "resourceNames": ["x"],
                 "verbs": ["get", "list"]}]}),
    (["create", "clusterrole", "cr1", "--verb=get", "--non-resource-url=/logs/*"], "clusterrole/cr1",
     {"rules": [{"nonResourceURLs": ["/logs/*"], "verbs": ["get"]}]}),
    (["create", "clusterrole", "agg", "--aggregation-rule=example.com/agg=true"], "clusterrole/agg",
     {"aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"example.com/agg": "true"}}]}}),
    (["create", "rolebinding", "rb", "--role=r1", "--user=alice", "--serviceaccount=default:sa1"],
     "rolebinding/rb",
     {"roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "r1"},
      "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "alice"},
                   {"kind": "ServiceAccount", "name": "sa1", "namespace": "default"}]}),
    (["create", "clusterrolebinding", "crb", "--clusterrole=view", "--group=devs"], "clusterrolebinding/crb",
     {"roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
      "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "devs"}]}),
    # replicas 0 is a pointer's zero: kept, where minReadySeconds' zero (omitempty) is left out
    (["create", "deployment", "web", "--image=nginx:1", "--replicas=0", "--port=80"], "deployment/web",
     {"spec": {"replicas": 0, "selector": {"matchLabels": {"app": "web"}},
               "template": {"spec": {"containers": [{"name": "nginx", "image": "nginx:1",
                                                     "ports": [{"containerPort": 80}]}]}}}}),
    (["create", "service", "nodeport", "np", "--tcp=80:8080", "--node-port=30080"], "service/np",
     {"spec": {"type": "NodePort", "ports": [{"name": "80-8080", "port": 80, "targetPort": 8080,
                                              "nodePort": 30080, "protocol": "TCP"}]}}),
    (["create", "poddisruptionbudget", "pdb1", "--selector=app=web", "--min-available=50%"],
     "poddisruptionbudget/pdb1",
     {"spec": {"minAvailable": "50%", "selector": {"matchLabels": {"app": "web"}}}}),
    (["autoscale", "deployment", "web", "--min=1", "--max=3", "--cpu=50%"], "hpa/web",
     {"spec": {"minReplicas": 1, "maxReplicas": 3,
               "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
               "metrics": [{"type": "Resource", "resource": {
                   "name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}}}]}}),
    # kinds the embedded cluster does not serve (the ``unserved`` fixture registers them schemaless)
    (["create", "job", "j1", "--image=busybox", "--", "echo", "hi"], "jobs.batch/j1",
     {"spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [
         {"name": "j1", "image": "busybox", "command": ["echo", "hi"]}]}}}}),
    (["create", "cronjob", "c1", "--image=busybox", "--schedule=*/5 * * * *"], "cronjobs.batch/c1",
     {"spec": {"schedule": "*/5 * * * *", "jobTemplate": {"spec": {"template": {"spec": {
         "restartPolicy": "OnFailure"}}}}}}),
    (["create", "priorityclass", "high", "--value=1000", "--description=d", "--preemption-policy=Never"],
     "priorityclasses.scheduling.k8s.io/high",
     {"value": 1000, "description": "d", "preemptionPolicy": "Never"}),
    (["create", "quota", "q1", "--hard=pods=10,cpu=2", "--scopes=BestEffort"], "resourcequotas/q1",
     {"spec": {"hard": {"pods": "10", "cpu": "2"}, "scopes": ["BestEffort"]}}),
]
UNSERVED = (
    kinds.ResourceType("batch", "v1", "Job", "jobs"),
    kinds.ResourceType("batch", "v1", "CronJob", "cronjobs"),
    kinds.ResourceType("scheduling.k8s.io", "v1", "PriorityClass", "priorityclasses", namespaced=False),
    kinds.ResourceType("", "v1", "ResourceQuota", "resourcequotas"),
)


@pytest.fixture
def unserved() -> Iterator[None]:
    """Serve Job, CronJob, PriorityClass and ResourceQuota as schemaless kinds (as an applied CRD with
    x-kubernetes-preserve-unknown-fields is), so kubectl's own protobuf bodies for them reach the decoder."""
    for t in UNSERVED:
        kinds.register(t, {"type": "object", "x-kubernetes-preserve-unknown-fields": True})
    yield
    for t in UNSERVED:
        kinds.unregister(t.key)


@pytest.fixture
def decoded(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Every object the server decoded from a protobuf body (resources.decode_body imports it per call)."""
    seen: list[dict[str, Any]] = []
    real = pb.decode_k8s_protobuf

    def record(raw: bytes) -> dict[str, Any]:
        obj = real(raw)
        seen.append(copy.deepcopy(obj))  # the server fills in defaults in place
        return obj

    monkeypatch.setattr(pb, "decode_k8s_protobuf", record)
    return seen


def _contains(got: Any, want: Any, where: str = "") -> None:
    if isinstance(want, dict):
        assert isinstance(got, dict), f"{where}: {got!r}"
        for k, v in want.items():
            assert k in got, f"{where}.{k} missing from {got!r}"
            _contains(got[k], v, f"{where}.{k}")
    elif isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want), f"{where}: {got!r}"
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            _contains(g, w, f"{where}[{i}]")
    else:
        assert got == want, f"{where}: {got!r} != {want!r}"


def _no_nulls(obj: Any) -> Any:
    """kubectl's JSON of an object it built: ``creationTimestamp: null`` is an unset time."""
    if isinstance(obj, dict):
        return {k: _no_nulls(v) for k, v in obj.items() if v is not None}
    if isinstance(obj, list):
        return [_no_nulls(v) for v in obj]
    return obj


@pytest.mark.usefixtures("unserved")
def test_kubectl_creates_every_builtin_kind_over_protobuf(kubectl: Kubectl, decoded: list[dict[str, Any]],
                                                         tmp_path: Path) -> None:
    blob = tmp_path / "blob"
    blob.write_bytes(b"\x00\xff\x80")  # not UTF-8: kubectl puts it in binaryData (protobuf bytes)
    for args, resource, want in CASES:
        args = [a.replace("{blob}", str(blob)) for a in args]
        before = len(decoded)
        kubectl(*args)
        assert len(decoded) == before + 1, f"kubectl {' '.join(args)} sent no protobuf body"
        dry = json.loads(kubectl(args[0], "--dry-run=client", "-o", "json", *args[1:]).stdout)
        assert decoded[-1] == _no_nulls(dry), f"kubectl {' '.join(args)}"
        got = json.loads(kubectl("get", resource, "-o", "json").stdout)
        _contains(got, want, resource)


def test_a_protobuf_body_of_an_unknown_kind_is_refused_with_what_to_do(server: ApiServer) -> None:
    def field(num: int, data: bytes) -> bytes:
        return bytes([num << 3 | 2, len(data)]) + data

    type_meta = field(1, b"example.com/v1") + field(2, b"Widget")
    body = pb.MAGIC + field(1, type_meta) + field(2, field(1, field(1, b"w1")))
    status, _, answer = http(server, "POST", "/api/v1/namespaces/default/configmaps", body,
                             headers={"Content-Type": "application/vnd.kubernetes.protobuf"})
    assert status == 400
    assert answer["message"] == (
        "a protobuf body of kind Widget (example.com/v1) cannot be decoded here (only k8s.io/api kinds can); "
        "send it as JSON, e.g. `kubectl create ... --dry-run=client -o yaml | kubectl apply -f -`")


def test_the_decoding_table_matches_the_pinned_upstream_protos() -> None:
    # scripts/pack_protobuf.py derives it from k8s.io/api's generated.proto (scripts/upstream/go.mod)
    script = Path(__file__).resolve().parents[3] / "scripts" / "pack_protobuf.py"
    proc = subprocess.run([sys.executable, str(script), "--check"],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert pb.table()["source"] == "k8s.io/api@v0.36.3 k8s.io/apimachinery@v0.36.3"
    refcluster = (script.parents[1] / "scripts" / "refcluster" / "cluster" / "go.mod").read_text()
    assert "k8s.io/api v0.36.3" in refcluster  # the kinds of the Kubernetes the reference cluster runs
