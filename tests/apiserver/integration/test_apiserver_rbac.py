"""RBAC served and enforced as kube-apiserver's RBAC authorizer does (k8s.io/kubernetes
plugin/pkg/auth/authorizer/rbac; 403 bodies from apiserver handlers/responsewriters/errors.go), with
ServiceAccount tokens from the TokenRequest subresource."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from lwsflow.controller.api.paths import repo_root
from lwsflow.sim.apiserver import ApiServer
from tests.apiserver.apiserver_helpers import KUBECTL, LWS_SAMPLE, example, http

NS = "team-a"
LWS_NS = f"/apis/leaderworkerset.x-k8s.io/v1/namespaces/{NS}/leaderworkersets"
SA_USER = f"system:serviceaccount:{NS}:bot"
RBAC = "/apis/rbac.authorization.k8s.io/v1"


def _create(server: ApiServer, path: str, obj: dict[str, Any]) -> None:
    status, _, body = http(server, "POST", path, obj)
    assert status == 201, body


def _namespace(server: ApiServer, name: str) -> None:
    status, _, body = http(server, "POST", "/api/v1/namespaces", {"metadata": {"name": name}})
    assert status in (201, 409), body


def _sa_token(server: ApiServer, ns: str = NS, name: str = "bot", **spec: Any) -> str:
    _namespace(server, ns)
    status, _, body = http(server, "POST", f"/api/v1/namespaces/{ns}/serviceaccounts",
                           {"metadata": {"name": name}})
    assert status in (201, 409), body
    status, _, body = http(server, "POST", f"/api/v1/namespaces/{ns}/serviceaccounts/{name}/token",
                           {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec})
    assert status == 201, body
    assert body["kind"] == "TokenRequest" and body["status"]["expirationTimestamp"]
    return body["status"]["token"]


def _role(server: ApiServer, name: str, rules: list[dict], ns: str = NS) -> None:
    _create(server, f"{RBAC}/namespaces/{ns}/roles", {"metadata": {"name": name}, "rules": rules})


def _bind(server: ApiServer, role_kind: str, role: str, ns: str | None = NS, name: str = "b") -> None:
    ref = {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": role}
    body = {"metadata": {"name": name}, "roleRef": ref,
            "subjects": [{"kind": "ServiceAccount", "name": "bot", "namespace": NS}]}
    _create(server, f"{RBAC}/namespaces/{ns}/rolebindings" if ns else f"{RBAC}/clusterrolebindings", body)


def _lws(ns: str = NS, name: str = "x") -> dict[str, Any]:
    doc = example(LWS_SAMPLE)
    doc["metadata"] = {"name": name, "namespace": ns}
    return doc


def test_service_account_without_bindings_gets_the_real_403(server: ApiServer) -> None:
    tok = _sa_token(server)
    assert http(server, "POST", LWS_NS,
                _lws())[0] == 201  # the admin (system:masters) may do anything
    status, _, body = http(server, "PATCH", f"{LWS_NS}/x",
                           b'{"spec":{"replicas":2}}', token=tok,
                           headers={"Content-Type": "application/merge-patch+json"})
    assert status == 403
    assert body["message"] == (
        f'leaderworkersets.leaderworkerset.x-k8s.io "x" is forbidden: User "{SA_USER}" cannot patch '
        f'resource "leaderworkersets" in API group "leaderworkerset.x-k8s.io" in the namespace "{NS}"')
    assert (body["reason"], body["code"], body["details"]) == (
        "Forbidden", 403, {"name": "x", "group": "leaderworkerset.x-k8s.io", "kind": "leaderworkersets"})
    status, _, body = http(server, "GET", f"/api/v1/namespaces/{NS}/pods", token=tok)
    assert (status, body["message"]) == (403, f'pods is forbidden: User "{SA_USER}" cannot list resource '
                                              f'"pods" in API group "" in the namespace "{NS}"')
    status, _, body = http(server, "GET", "/api/v1/nodes", token=tok)
    assert body["message"] == (f'nodes is forbidden: User "{SA_USER}" cannot list resource "nodes" in API '
                               'group "" at the cluster scope')
    # discovery is public to every authenticated user (system:discovery); a bad token is 401
    assert http(server, "GET", "/apis", token=tok)[0] == 200
    assert http(server, "GET", "/api/v1/nodes", token=tok + "x")[0] == 401


def test_role_rules_verbs_subresources_and_resource_names(server: ApiServer) -> None:
    tok = _sa_token(server)
    http(server, "POST", LWS_NS, _lws(name="x"))
    http(server, "POST", LWS_NS, _lws(name="y"))
    _role(server, "r", [
        {"apiGroups": ["leaderworkerset.x-k8s.io"], "resources": ["leaderworkersets"],
         "verbs": ["get", "list"]},
        {"apiGroups": ["leaderworkerset.x-k8s.io"], "resources": ["leaderworkersets/status"],
         "verbs": ["patch"], "resourceNames": ["x"]},
    ])
    _bind(server, "Role", "r")
    base = LWS_NS
    assert http(server, "GET", base, token=tok)[0] == 200
    assert http(server, "GET", f"{base}/y", token=tok)[0] == 200
    merge = {"Content-Type": "application/merge-patch+json"}
    assert http(server, "PATCH", f"{base}/x/status", b'{"status":{}}', token=tok, headers=merge)[0] == 200
    status, _, body = http(server, "PATCH", f"{base}/y/status", b'{"status":{}}', token=tok, headers=merge)
    assert status == 403 and 'cannot patch resource "leaderworkersets/status"' in body["message"]
    assert http(server, "PATCH", f"{base}/x", b'{"spec":{}}', token=tok, headers=merge)[0] == 403
    # server-side apply: patch updates an existing object; creating one also needs create
    apply = {"Content-Type": "application/apply-patch+yaml"}
    _role(server, "apply", [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["patch"]}])
    _bind(server, "Role", "apply", name="apply")
    cm = b'{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"k": "v"}}'
    cm_path = f"/api/v1/namespaces/{NS}/configmaps/c?fieldManager=t"
    status, _, body = http(server, "PATCH", cm_path, cm, token=tok, headers=apply)
    assert status == 403
    assert body["message"] == (f'configmaps "c" is forbidden: User "{SA_USER}" cannot create resource '
                               f'"configmaps" in API group "" in the namespace "{NS}"')
    assert http(server, "PATCH", cm_path, cm, headers=apply)[0] == 201  # the admin creates it
    assert http(server, "PATCH", cm_path, cm, token=tok, headers=apply)[0] == 200
    # a RoleBinding grants nothing outside its namespace
    _namespace(server, "other")
    http(server, "POST", "/apis/leaderworkerset.x-k8s.io/v1/namespaces/other/leaderworkersets", _lws("other"))
    assert http(server, "GET", "/apis/leaderworkerset.x-k8s.io/v1/namespaces/other/leaderworkersets/x",
                token=tok)[0] == 403
    assert http(server, "GET", "/apis/leaderworkerset.x-k8s.io/v1/leaderworkersets", token=tok)[0] == 403


def test_cluster_role_binding_aggregation_and_missing_role(server: ApiServer) -> None:
    tok = _sa_token(server)
    _bind(server, "ClusterRole", "absent", ns=None, name="dangling")
    status, _, body = http(server, "GET", "/api/v1/nodes", token=tok)
    assert status == 403
    assert body["message"].endswith(
        'at the cluster scope: RBAC: clusterrole.rbac.authorization.k8s.io "absent" not found')
    _create(server, f"{RBAC}/clusterroles", {"metadata": {"name": "agg"}, "rules": [], "aggregationRule": {
        "clusterRoleSelectors": [{"matchLabels": {"example.com/aggregate-to-agg": "true"}}]}})
    _create(server, f"{RBAC}/clusterroles", {
        "metadata": {"name": "nodes-reader", "labels": {"example.com/aggregate-to-agg": "true"}},
        "rules": [{"apiGroups": [""], "resources": ["nodes", "pods"], "verbs": ["list"]}]})
    _bind(server, "ClusterRole", "agg", ns=None, name="agg")
    assert http(server, "GET", "/api/v1/nodes", token=tok)[0] == 200
    assert http(server, "GET", "/api/v1/pods", token=tok)[0] == 200  # all namespaces: a cluster binding
    assert http(server, "GET", "/api/v1/nodes/n1", token=tok)[0] == 403  # list, not get


def test_token_is_bound_to_the_service_account_and_validated(server: ApiServer) -> None:
    tok = _sa_token(server)
    status, _, body = http(server, "POST", f"/api/v1/namespaces/{NS}/serviceaccounts/ghost/token", {})
    assert (status, body["message"]) == (404, 'serviceaccounts "ghost" not found')
    status, _, body = http(server, "POST", f"/api/v1/namespaces/{NS}/serviceaccounts/bot/token",
                           {"spec": {"expirationSeconds": 60}})
    assert status == 422 and "may not specify a duration less than 10 minutes" in body["message"]
    assert http(server, "DELETE", f"/api/v1/namespaces/{NS}/serviceaccounts/bot")[0] == 200
    assert http(server, "GET", "/apis", token=tok)[0] == 401  # the ServiceAccount is gone
    # minting needs create on serviceaccounts/token: a plain ServiceAccount may not mint for others
    tok = _sa_token(server)
    path = f"/api/v1/namespaces/{NS}/serviceaccounts/bot/token"
    status, _, body = http(server, "POST", path, {}, token=tok)
    assert status == 403 and 'cannot create resource "serviceaccounts/token"' in body["message"]


def test_self_subject_access_review(server: ApiServer) -> None:
    tok = _sa_token(server)
    _role(server, "r", [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}])
    _bind(server, "Role", "r", name="rb")
    review = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
              "spec": {"resourceAttributes": {"namespace": NS, "verb": "get", "resource": "pods"}}}
    path = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
    status, _, body = http(server, "POST", path, review, token=tok)
    assert status == 201 and body["status"] == {
        "allowed": True,
        "reason": f'RBAC: allowed by RoleBinding "rb/{NS}" of Role "r" to ServiceAccount "bot/{NS}"'}
    review["spec"]["resourceAttributes"]["verb"] = "delete"
    assert http(server, "POST", path, review, token=tok)[2]["status"] == {"allowed": False}
    assert http(server, "GET", path)[0] == 405  # create-only, never stored
    assert http(server, "GET", f"/api/v1/namespaces/{NS}/serviceaccounts/bot/token")[0] == 405


@pytest.fixture
def kubectl_as(server: ApiServer, tmp_path: Path):
    import subprocess

    def run(kubeconfig: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run([str(KUBECTL), "--kubeconfig", str(kubeconfig), "--cache-dir",
                               str(tmp_path / f"kcache-{kubeconfig.name}"), *args],
                              capture_output=True, text=True, timeout=60, check=False)
        if check and proc.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed ({proc.returncode}): {proc.stderr}")
        return proc

    return run


def test_kubectl_apply_k_rbac_overlay_and_sim_token(server: ApiServer, kubectl_as, tmp_path: Path) -> None:
    """`kubectl apply -k overlays/rbac` works; `lwsflow sim token` writes a 0600 kubeconfig whose
    ServiceAccount kubectl uses: `auth can-i` answers from the shipped ClusterRole."""
    import subprocess
    import sys

    admin = server.write_kubeconfig(tmp_path / "admin.kubeconfig")
    _namespace(server, "lwsflow-system")
    out = kubectl_as(admin, "apply", "-k", str(repo_root() / "overlays" / "rbac")).stdout
    assert "clusterrole.rbac.authorization.k8s.io/lwsflow-rollout created" in out
    assert "serviceaccount/lwsflow-rollout created" in out
    sa_cfg = tmp_path / "sa.kubeconfig"
    lwsflow = Path(sys.executable).parent / "lwsflow"
    proc = subprocess.run([str(lwsflow), "sim", "token", "lwsflow-rollout", "-n", "lwsflow-system",
                           "--kubeconfig", str(admin), "--kubeconfig-out", str(sa_cfg)],
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(
        f"kubeconfig for system:serviceaccount:lwsflow-system:lwsflow-rollout: {sa_cfg}")
    assert stat.S_IMODE(os.stat(sa_cfg).st_mode) == 0o600
    assert kubectl_as(sa_cfg, "auth", "can-i", "patch", "leaderworkersets.leaderworkerset.x-k8s.io",
                      "-n", "prod").stdout.strip() == "yes"
    # create is granted on leaderworkersets (blue-green's green pair), never on disaggregatedsets
    no = kubectl_as(sa_cfg, "auth", "can-i", "create", "disaggregatedsets.disaggregatedset.x-k8s.io",
                    "-n", "prod", check=False)
    assert (no.returncode, no.stdout.strip()) == (1, "no")
    denied = kubectl_as(sa_cfg, "get", "secrets", "-n", "default", check=False)
    assert denied.returncode == 1 and (
        'secrets is forbidden: User "system:serviceaccount:lwsflow-system:lwsflow-rollout" cannot list '
        'resource "secrets" in API group "" in the namespace "default"') in denied.stderr
    assert json.loads(kubectl_as(sa_cfg, "get", "nodes", "-o", "json").stdout)["kind"] == "List"
    # the admin may impersonate (kubectl --as): the usual way to check a role
    as_sa = ("--as", "system:serviceaccount:lwsflow-system:lwsflow-rollout")
    assert kubectl_as(admin, "auth", "can-i", "list", "nodes", *as_sa).stdout.strip() == "yes"
    assert kubectl_as(admin, "auth", "can-i", "list", "secrets", *as_sa, check=False).stdout.strip() == "no"
    assert kubectl_as(admin, "get", "secrets", *as_sa, check=False).returncode == 1
    denied = kubectl_as(sa_cfg, "get", "nodes", "--as", "kubernetes-admin", check=False)
    assert ('users "kubernetes-admin" is forbidden: User "system:serviceaccount:lwsflow-system:'
            'lwsflow-rollout" cannot impersonate resource "users" in API group "" at the cluster scope'
            ) in denied.stderr
    # kubectl's own TokenRequest client (a protobuf body) works too
    minted = kubectl_as(admin, "create", "token", "lwsflow-rollout", "-n", "lwsflow-system").stdout.strip()
    assert http(server, "GET", "/api/v1/nodes", token=minted)[0] == 200
    bad = subprocess.run([str(lwsflow), "sim", "token", "lwsflow-rollout", "-n", "lwsflow-system",
                          "--kubeconfig", str(admin), "--duration", "5m"],
                         capture_output=True, text=True, timeout=60, check=False)
    assert (bad.returncode, bad.stderr.strip()) == (2, "error: --duration: must be at least 10m, got 5m")



def test_rbac_objects_are_validated_like_kube_apiserver(server: ApiServer) -> None:
    """pkg/apis/rbac/validation: rules need verbs, groups and resources; bindings need a valid roleRef
    and subjects; roleRef is immutable (422 Invalid)."""
    _namespace(server, NS)
    status, _, body = http(server, "POST", f"{RBAC}/namespaces/{NS}/roles",
                           {"metadata": {"name": "bad"}, "rules": [{"resources": ["pods"]}]})
    assert (status, body["reason"]) == (422, "Invalid")
    assert body["message"] == (
        'Role.rbac.authorization.k8s.io "bad" is invalid: [rules[0].verbs: Required value: verbs must '
        "contain at least one value, rules[0].apiGroups: Required value: resource rules must supply at "
        "least one api group]")
    status, _, body = http(server, "POST", f"{RBAC}/clusterrolebindings", {
        "metadata": {"name": "bad"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                                 "name": "r"},
        "subjects": [{"kind": "ServiceAccount", "name": "bot"}]})
    assert status == 422 and body["details"]["causes"] == [
        {"reason": "FieldValueNotSupported", "field": "roleRef.kind",
         "message": 'Unsupported value: "Role": supported values: "ClusterRole"'},
        {"reason": "FieldValueRequired", "field": "subjects[0].namespace", "message": "Required value"}]
    _bind(server, "ClusterRole", "view", ns=NS, name="rb")
    rb = http(server, "GET", f"{RBAC}/namespaces/{NS}/rolebindings/rb")[2]
    assert rb["subjects"][0] == {"kind": "ServiceAccount", "name": "bot", "namespace": NS}
    rb["roleRef"]["name"] = "edit"
    status, _, body = http(server, "PUT", f"{RBAC}/namespaces/{NS}/rolebindings/rb", rb)
    assert status == 422 and body["message"] == (
        'RoleBinding.rbac.authorization.k8s.io "rb" is invalid: roleRef: Invalid value: rbac.RoleRef{'
        'APIGroup:"rbac.authorization.k8s.io", Kind:"ClusterRole", Name:"edit"}: cannot change roleRef')


def test_binding_role_ref_api_group_is_defaulted(server: ApiServer) -> None:
    """SetDefaults_RoleBinding: a roleRef without apiGroup gets the RBAC group (kube-apiserver
    defaults it before validation, so the binding is admitted)."""
    _namespace(server, NS)
    status, _, body = http(server, "POST", f"{RBAC}/namespaces/{NS}/rolebindings", {
        "metadata": {"name": "plain"}, "roleRef": {"kind": "ClusterRole", "name": "view"},
        "subjects": [{"kind": "User", "name": "alice"}]})
    assert status == 201, body
    assert body["roleRef"]["apiGroup"] == "rbac.authorization.k8s.io"
    assert body["subjects"][0]["apiGroup"] == "rbac.authorization.k8s.io"
