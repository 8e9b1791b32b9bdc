"""Built-in validation and defaulting of core kinds, as kube-apiserver answers them: names, a Pod's
containers, fields that cannot change after creation (Pod spec, StatefulSet spec), Secret
``stringData``. A manifest the real API refuses must not pass here (issue 12, API conventions)."""

from __future__ import annotations

import base64

from tests.apiserver.apiserver_helpers import http

PODS = "/api/v1/namespaces/default/pods"
POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
       "spec": {"containers": [{"name": "c", "image": "nginx:1", "env": [{"name": "A", "value": "1"}]}]}}
SUBDOMAIN = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
             "and must start and end with an alphanumeric character (e.g. 'example.com', regex used for "
             r"validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")


def test_names_are_validated_per_kind(server) -> None:
    status, _, body = http(server, "POST", PODS, {**POD, "metadata": {"name": "Bad_Name"}})
    assert status == 422 and body["reason"] == "Invalid"
    invalid = f'Invalid value: "Bad_Name": {SUBDOMAIN}'
    assert body["message"] == f'Pod "Bad_Name" is invalid: metadata.name: {invalid}'
    assert body["details"]["causes"] == [{"reason": "FieldValueInvalid", "field": "metadata.name",
                                          "message": invalid}]
    svc = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "8b-leader"}, "spec": {}}
    status, _, body = http(server, "POST", "/api/v1/namespaces/default/services", svc)
    assert status == 422 and "a DNS-1035 label must consist of" in body["message"]
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team.a"}}
    status, _, body = http(server, "POST", "/api/v1/namespaces", ns)
    assert status == 422 and "a lowercase RFC 1123 label must consist of" in body["message"]


def test_pod_needs_containers_with_name_and_image(server) -> None:
    status, _, body = http(server, "POST", PODS, {**POD, "spec": {"containers": []}})
    assert (status, body["message"]) == (422, 'Pod "p" is invalid: spec.containers: Required value')
    status, _, body = http(server, "POST", PODS, {**POD, "spec": {"containers": [{"name": "c"}]}})
    assert (status, body["message"]) == (422, 'Pod "p" is invalid: spec.containers[0].image: Required value')


def test_pod_spec_is_immutable_but_image_and_labels_change(server) -> None:
    assert http(server, "POST", PODS, POD)[0] == 201
    env_patch = {"spec": {"containers": [{"name": "c", "env": [{"name": "A", "value": "2"}]}]}}
    status, _, body = http(server, "PATCH", f"{PODS}/p", env_patch,
                           headers={"Content-Type": "application/strategic-merge-patch+json"})
    assert status == 422
    assert body["message"].startswith('Pod "p" is invalid: spec: Forbidden: pod updates may not change '
                                      "fields other than `spec.containers[*].image`")
    image = {"spec": {"containers": [{"name": "c", "image": "nginx:2"}]}, "metadata": {"labels": {"a": "b"}}}
    status, _, body = http(server, "PATCH", f"{PODS}/p", image,
                           headers={"Content-Type": "application/strategic-merge-patch+json"})
    assert status == 200 and body["spec"]["containers"][0]["image"] == "nginx:2"


def test_statefulset_spec_fields_other_than_the_mutable_ones_are_forbidden(server) -> None:
    sts = {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "s"},
           "spec": {"replicas": 1, "serviceName": "s", "selector": {"matchLabels": {"app": "s"}},
                    "template": {"metadata": {"labels": {"app": "s"}}, "spec": POD["spec"]}}}
    path = "/apis/apps/v1/namespaces/default/statefulsets"
    assert http(server, "POST", path, sts)[0] == 201
    merge = {"Content-Type": "application/merge-patch+json"}
    assert http(server, "PATCH", f"{path}/s", {"spec": {"replicas": 3}}, headers=merge)[0] == 200
    status, _, body = http(server, "PATCH", f"{path}/s", {"spec": {"serviceName": "other"}}, headers=merge)
    assert status == 422
    assert body["message"] == (
        'StatefulSet.apps "s" is invalid: spec: Forbidden: updates to statefulset spec for fields other than '
        "'replicas', 'ordinals', 'template', 'updateStrategy', 'revisionHistoryLimit', "
        "'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden")


def test_secret_string_data_is_stored_as_data(server) -> None:
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "hf"},
              "stringData": {"token": "t0k"}, "data": {"other": "eA=="}}
    status, _, body = http(server, "POST", "/api/v1/namespaces/default/secrets", secret)
    assert status == 201 and "stringData" not in body and body["type"] == "Opaque"
    assert body["data"] == {"other": "eA==", "token": base64.b64encode(b"t0k").decode()}


def test_generate_name_uses_the_api_name_generator(server) -> None:
    """``generateName``: the base (cut to 58 characters) plus 5 characters of the API's alphabet."""
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"generateName": "x" * 60}}
    status, _, body = http(server, "POST", "/api/v1/namespaces/default/configmaps", cm)
    name = body["metadata"]["name"]
    assert status == 201 and len(name) == 63 and name.startswith("x" * 58)
    assert set(name[58:]) <= set("bcdfghjklmnpqrstvwxz2456789")


def test_pod_naming_a_missing_service_account_is_forbidden(server) -> None:
    """kube-apiserver's ServiceAccount admission plugin (plugin/pkg/admission/serviceaccount) refuses
    a pod whose serviceAccountName does not exist: 403 before any validation; once the
    ServiceAccount exists the same pod is created. ``default`` always passes (its controller makes it)."""
    pod = {**POD, "spec": {**POD["spec"], "serviceAccountName": "tensorrt-sa"}}
    status, _, body = http(server, "POST", PODS, pod)
    assert (status, body["reason"]) == (403, "Forbidden")
    assert body["message"] == ('pods "p" is forbidden: error looking up service account default/tensorrt-sa: '
                               'serviceaccount "tensorrt-sa" not found')
    sa = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "tensorrt-sa"}}
    assert http(server, "POST", "/api/v1/namespaces/default/serviceaccounts", sa)[0] == 201
    assert http(server, "POST", PODS, pod)[0] == 201
    default_sa = {**POD, "metadata": {"name": "q"}, "spec": {**POD["spec"], "serviceAccountName": "default"}}
    assert http(server, "POST", PODS, default_sa)[0] == 201


def test_field_ref_api_version_is_defaulted(server) -> None:
    """SetDefaults_ObjectFieldSelector: an env fieldRef without apiVersion is stored with ``v1`` (the
    upstream tensorrt-llm example's GROUP_KEY), in a Pod and in a StatefulSet's template."""
    env = [{"name": "K", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]
    pod = {**POD, "metadata": {"name": "fr"},
           "spec": {"containers": [{"name": "c", "image": "x:1", "env": env}]}}
    status, _, body = http(server, "POST", PODS, pod)
    assert status == 201 and body["spec"]["containers"][0]["env"][0]["valueFrom"]["fieldRef"] == {
        "apiVersion": "v1", "fieldPath": "metadata.name"}
    sts = {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "s"},
           "spec": {"selector": {"matchLabels": {"a": "b"}}, "serviceName": "s",
                    "template": {"metadata": {"labels": {"a": "b"}}, "spec": pod["spec"]}}}
    status, _, body = http(server, "POST", "/apis/apps/v1/namespaces/default/statefulsets", sts)
    container = body["spec"]["template"]["spec"]["containers"][0]
    assert status == 201 and container["env"][0]["valueFrom"]["fieldRef"]["apiVersion"] == "v1"


def _lws(name: str, size: int = 2, **subgroups: object) -> dict:
    lwt: dict = {"size": size, "workerTemplate": {"spec": {"containers": [{"name": "c", "image": "nginx"}]}}}
    if subgroups:
        lwt["subGroupPolicy"] = subgroups
    return {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
            "metadata": {"name": name}, "spec": {"replicas": 1, "leaderWorkerTemplate": lwt}}


LWS_PATH = "/apis/leaderworkerset.x-k8s.io/v1/namespaces/default/leaderworkersets"


def test_custom_resource_name_is_an_rfc1123_subdomain_before_the_webhook_rule(server) -> None:
    """As on the reference cluster: kube-apiserver refuses a name that is no RFC 1123 subdomain before
    the LWS webhook runs; a subdomain that is no DNS-1035 label reaches the webhook's rule."""
    status, _, body = http(server, "POST", LWS_PATH, _lws("Bad_Name"))
    assert status == 422
    assert body["message"] == ('LeaderWorkerSet.leaderworkerset.x-k8s.io "Bad_Name" is invalid: '
                               f'metadata.name: Invalid value: "Bad_Name": {SUBDOMAIN}')
    status, _, body = http(server, "POST", LWS_PATH, _lws("1abc"))
    assert status == 422 and 'Invalid value: "1abc": a DNS-1035 label must consist of' in body["message"]


def test_subgroup_divisibility_reports_upstreams_errors_and_path(server) -> None:
    """v0.9.0's validateUpdateSubGroupPolicy, as the reference cluster answers: the Go field's path,
    and both failing rules for LeaderExcluded."""
    path = "spec.leaderWorkerTemplate.SubGroupPolicy.subGroupSize"
    status, _, body = http(server, "POST", LWS_PATH, _lws("sg", 5, subGroupSize=3))
    assert status == 422
    assert [(c["field"], c["message"]) for c in body["details"]["causes"]] == [
        (path, "Invalid value: 3: size or size - 1 must be divisible by subGroupSize")]
    status, _, body = http(server, "POST", LWS_PATH,
                           _lws("sg", 5, subGroupSize=3, subGroupPolicyType="LeaderExcluded"))
    assert [c["message"] for c in body["details"]["causes"]] == [
        "Invalid value: 3: size or size - 1 must be divisible by subGroupSize",
        "Invalid value: 3: size-1 must be divisible by subGroupSize when using LeaderExcluded"]
