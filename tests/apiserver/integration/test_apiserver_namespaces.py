"""Namespaces as kube-apiserver treats them: they exist only when created (the four system ones from
the start), a create in a missing namespace is 404 (NamespaceLifecycle admission), and deleting a
namespace deletes what is in it. Issue 12 item 4."""

from __future__ import annotations

from tests.apiserver.apiserver_helpers import http

CM = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"}, "data": {"k": "v"}}
MISSING = {
    "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
    "message": 'namespaces "team-a" not found', "reason": "NotFound",
    "details": {"name": "team-a", "kind": "namespaces"}, "code": 404,
}


def test_system_namespaces_exist_at_start(server) -> None:
    items = http(server, "GET", "/api/v1/namespaces")[2]["items"]
    names = [n["metadata"]["name"] for n in items]
    assert names == ["default", "kube-node-lease", "kube-public", "kube-system"]
    for ns in items:
        assert ns["metadata"]["labels"] == {"kubernetes.io/metadata.name": ns["metadata"]["name"]}
        assert ns["spec"] == {"finalizers": ["kubernetes"]} and ns["status"] == {"phase": "Active"}


def test_create_in_a_missing_namespace_is_404_and_creates_no_namespace(server) -> None:
    """NamespaceLifecycle admission: POST, server-side apply and dry-run alike answer the real Status
    body; nothing (neither the object nor the namespace) is written."""
    path = "/api/v1/namespaces/team-a/configmaps"
    assert http(server, "POST", path, CM)[::2] == (404, MISSING)
    assert http(server, "POST", path + "?dryRun=All", CM)[::2] == (404, MISSING)
    status, _, body = http(server, "PATCH", path + "/cfg?fieldManager=kubectl", CM,
                           headers={"Content-Type": "application/apply-patch+yaml"})
    assert (status, body) == (404, MISSING)
    lws = {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet", "metadata": {"name": "x"},
           "spec": {"leaderWorkerTemplate": {"workerTemplate": {"spec": {"containers": [
               {"name": "c", "image": "nginx"}]}}}}}
    lws_path = "/apis/leaderworkerset.x-k8s.io/v1/namespaces/team-a/leaderworkersets"
    assert http(server, "POST", lws_path, lws)[::2] == (404, MISSING)
    assert http(server, "GET", "/api/v1/namespaces/team-a")[0] == 404
    assert http(server, "GET", "/api/v1/configmaps")[2]["items"] == []


def test_namespace_create_then_delete_takes_its_objects(server) -> None:
    """A created Namespace gets the name label, the ``kubernetes`` finalizer and phase Active; deleting
    it deletes its contents (at once: the Terminating phase is not modelled), other namespaces keep
    theirs, and creating in it is 404 again."""
    status, _, ns = http(server, "POST", "/api/v1/namespaces",
                         {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}})
    assert status == 201
    assert ns["metadata"]["labels"] == {"kubernetes.io/metadata.name": "team-a"}
    assert ns["status"] == {"phase": "Active"}
    assert http(server, "POST", "/api/v1/namespaces/team-a/configmaps", CM)[0] == 201
    assert http(server, "POST", "/api/v1/namespaces/default/configmaps", CM)[0] == 201
    assert http(server, "DELETE", "/api/v1/namespaces/team-a")[0] == 200
    assert http(server, "GET", "/api/v1/namespaces/team-a/configmaps/cfg")[0] == 404
    assert http(server, "GET", "/api/v1/namespaces/default/configmaps/cfg")[0] == 200
    assert http(server, "POST", "/api/v1/namespaces/team-a/configmaps", CM)[::2] == (404, MISSING)


def test_system_namespace_cannot_be_deleted(server) -> None:
    status, _, body = http(server, "DELETE", "/api/v1/namespaces/default")
    assert status == 403
    assert body["message"] == 'namespaces "default" is forbidden: this namespace may not be deleted'


def test_kubectl_apply_needs_the_namespace_first(kubectl, tmp_path) -> None:
    """What a user sees with real kubectl: the NotFound error, then ``kubectl create namespace``."""
    manifest = tmp_path / "cm.yaml"
    manifest.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cfg, namespace: team-a}\n")
    proc = kubectl("apply", "-f", str(manifest), check=False)
    assert proc.returncode == 1
    assert 'namespaces "team-a" not found' in proc.stderr
    assert kubectl("create", "namespace", "team-a").stdout == "namespace/team-a created\n"
    assert kubectl("apply", "-f", str(manifest)).stdout == "configmap/cfg created\n"
    assert kubectl("delete", "namespace", "team-a").stdout == 'namespace "team-a" deleted\n'
    assert kubectl("get", "configmaps", "-A", "-o", "name").stdout == ""
