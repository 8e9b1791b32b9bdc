"""The official kubernetes Python client against the embedded API server: list, watch, patch,
status and scale subresources, and the error statuses a controller must handle (401/409/410/422)."""

from __future__ import annotations

import copy
import json
import threading

import pytest
from kubernetes import client, watch
from kubernetes.client.rest import ApiException

from lwsflow.sim.apiserver import ApiServer
from tests.apiserver.apiserver_helpers import DS_SAMPLE, LWS_PATH, LWS_SAMPLE, G, P, V, example, http


def _create(api_client, name: str = "lws-a", replicas: int = 3) -> dict:
    obj = example(LWS_SAMPLE)
    obj["metadata"]["name"] = name
    obj["spec"]["replicas"] = replicas
    return client.CustomObjectsApi(api_client).create_namespaced_custom_object(G, V, "default", P, obj)


def test_list_patch_status_and_scale(api_client, server: ApiServer) -> None:
    co = client.CustomObjectsApi(api_client)
    created = _create(api_client)
    _create(api_client, "lws-b")
    assert created["metadata"]["generation"] == 1 and created["metadata"]["uid"]
    listed = co.list_namespaced_custom_object(
        G, V, "default", P, label_selector="app.kubernetes.io/part-of=lws"
    )
    assert listed["kind"] == "LeaderWorkerSetList"
    assert [i["metadata"]["name"] for i in listed["items"]] == ["lws-a", "lws-b"]
    assert int(listed["metadata"]["resourceVersion"]) >= 2
    one = co.list_namespaced_custom_object(G, V, "default", P, field_selector="metadata.name=lws-b")
    assert [i["metadata"]["name"] for i in one["items"]] == ["lws-b"]

    patched = co.patch_namespaced_custom_object(G, V, "default", P, "lws-a", {"spec": {"replicas": 2}})
    assert (patched["spec"]["replicas"], patched["metadata"]["generation"]) == (2, 2)
    # a status write through the main resource is ignored; through /status it lands without a generation bump
    co.patch_namespaced_custom_object(G, V, "default", P, "lws-a", {"status": {"readyReplicas": 9}})
    assert "status" not in co.get_namespaced_custom_object(G, V, "default", P, "lws-a")
    st = co.patch_namespaced_custom_object_status(
        G, V, "default", P, "lws-a", {"status": {"replicas": 2, "readyReplicas": 1, "hpaPodSelector": "x=y"}}
    )
    assert st["status"]["readyReplicas"] == 1 and st["metadata"]["generation"] == 2

    scale = co.get_namespaced_custom_object_scale(G, V, "default", P, "lws-a")
    assert scale["kind"] == "Scale" and scale["apiVersion"] == "autoscaling/v1"
    assert scale["spec"]["replicas"] == 2
    assert scale["status"] == {"replicas": 2, "selector": "x=y"}
    co.patch_namespaced_custom_object_scale(G, V, "default", P, "lws-a", {"spec": {"replicas": 4}})
    assert co.get_namespaced_custom_object(G, V, "default", P, "lws-a")["spec"]["replicas"] == 4
    with pytest.raises(ApiException) as err:
        co.patch_namespaced_custom_object_scale(G, V, "default", P, "lws-a", {"spec": {"replicas": -1}})
    assert err.value.status == 422


def test_core_api_and_statefulset_scale(api_client) -> None:
    core, apps = client.CoreV1Api(api_client), client.AppsV1Api(api_client)
    assert "default" in [n.metadata.name for n in core.list_namespace().items]
    pod = client.V1Pod(
        metadata=client.V1ObjectMeta(name="p", labels={"app": "x"}),
        spec=client.V1PodSpec(containers=[client.V1Container(name="c", image="nginx")]),
    )
    with pytest.raises(ApiException) as err:  # namespaces are created explicitly, as on a real cluster
        core.create_namespaced_pod("team-a", pod)
    assert err.value.status == 404
    assert json.loads(err.value.body)["message"] == 'namespaces "team-a" not found'
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name="team-a")))
    core.create_namespaced_pod("team-a", pod)
    assert "team-a" in [n.metadata.name for n in core.list_namespace().items]
    got = core.patch_namespaced_pod("p", "team-a", {"metadata": {"labels": {"tier": "gold"}}})
    assert got.metadata.labels == {"app": "x", "tier": "gold"}
    assert [p.metadata.name for p in core.list_pod_for_all_namespaces(label_selector="tier=gold").items] == [
        "p"
    ]
    sts = client.V1StatefulSet(
        metadata=client.V1ObjectMeta(name="s"),
        spec=client.V1StatefulSetSpec(
            replicas=1,
            service_name="s",
            selector=client.V1LabelSelector(match_labels={"app": "s"}),
            template=client.V1PodTemplateSpec(
                metadata=client.V1ObjectMeta(labels={"app": "s"}),
                spec=client.V1PodSpec(containers=[client.V1Container(name="c", image="nginx")]),
            ),
        ),
    )
    apps.create_namespaced_stateful_set("default", sts)
    apps.patch_namespaced_stateful_set_scale("s", "default", {"spec": {"replicas": 3}})
    scale = apps.read_namespaced_stateful_set_scale("s", "default")
    assert scale.spec.replicas == 3 and scale.status.selector == "app=s"
    core.delete_namespace("team-a")
    assert core.list_namespaced_pod("team-a").items == []


def test_watch_from_resource_version(api_client, server: ApiServer) -> None:
    co = client.CustomObjectsApi(api_client)
    _create(api_client)
    rv = co.list_namespaced_custom_object(G, V, "default", P)["metadata"]["resourceVersion"]

    def writer() -> None:
        co.patch_namespaced_custom_object(G, V, "default", P, "lws-a", {"spec": {"replicas": 5}})
        _create(api_client, "lws-b")
        co.delete_namespaced_custom_object(G, V, "default", P, "lws-a")

    seen = []
    w = watch.Watch()
    t = threading.Timer(0.2, writer)
    t.start()
    for ev in w.stream(
        co.list_namespaced_custom_object, G, V, "default", P, resource_version=rv, timeout_seconds=5
    ):
        seen.append((ev["type"], ev["object"]["metadata"]["name"]))
        if len(seen) == 3:
            w.stop()
    t.join()
    assert seen == [("MODIFIED", "lws-a"), ("ADDED", "lws-b"), ("DELETED", "lws-a")]
    # without a resourceVersion a watch starts with the current objects as ADDED
    first = next(
        iter(watch.Watch().stream(co.list_namespaced_custom_object, G, V, "default", P, timeout_seconds=2))
    )
    assert (first["type"], first["object"]["metadata"]["name"]) == ("ADDED", "lws-b")


def test_too_old_resource_version_is_410(api_client, server: ApiServer) -> None:
    co = client.CustomObjectsApi(api_client)
    _create(api_client)
    core = client.CoreV1Api(api_client)
    for i in range(55):  # more changes than the store keeps (50 in these tests); the history is global
        core.create_namespaced_config_map(
            "default", client.V1ConfigMap(metadata=client.V1ObjectMeta(name=f"c{i}"))
        )
    with pytest.raises(ApiException) as err:
        list(
            watch.Watch().stream(
                co.list_namespaced_custom_object, G, V, "default", P, resource_version="1", timeout_seconds=2
            )
        )
    assert err.value.status == 410
    # the raw wire form: HTTP 200 with one ERROR event carrying a 410 Expired Status
    status, _, body = http(server, "GET", f"{LWS_PATH}?watch=true&resourceVersion=1&timeoutSeconds=1")
    assert status == 200
    assert body["type"] == "ERROR"
    assert (body["object"]["code"], body["object"]["reason"]) == (410, "Expired")


def test_stale_put_is_409(api_client) -> None:
    co = client.CustomObjectsApi(api_client)
    old = _create(api_client)
    fresh = copy.deepcopy(old)
    fresh["spec"]["replicas"] = 1
    co.replace_namespaced_custom_object(G, V, "default", P, "lws-a", fresh)
    old["spec"]["replicas"] = 7
    with pytest.raises(ApiException) as err:
        co.replace_namespaced_custom_object(G, V, "default", P, "lws-a", old)
    assert err.value.status == 409
    assert "the object has been modified" in err.value.body


def test_invalid_lws_is_422_with_causes(api_client) -> None:
    obj = example(LWS_SAMPLE)
    obj["spec"]["replicas"] = -2
    obj["spec"]["leaderWorkerTemplate"]["size"] = 0
    with pytest.raises(ApiException) as err:
        client.CustomObjectsApi(api_client).create_namespaced_custom_object(G, V, "default", P, obj)
    import json

    status = json.loads(err.value.body)
    assert (err.value.status, status["reason"]) == (422, "Invalid")
    fields = {c["field"] for c in status["details"]["causes"]}
    assert {"spec.replicas", "spec.leaderWorkerTemplate.size"} <= fields
    assert status["details"]["kind"] == "LeaderWorkerSet"


def test_unknown_field_strict_rejected_warn_pruned(server: ApiServer) -> None:
    obj = example(DS_SAMPLE)
    obj["spec"]["surprise"] = True
    path = "/apis/disaggregatedset.x-k8s.io/v1/namespaces/default/disaggregatedsets"
    status, _, body = http(server, "POST", f"{path}?fieldValidation=Strict", obj)
    assert status == 400 and 'unknown field "spec.surprise"' in body["message"]
    status, headers, body = http(server, "POST", path, obj)  # no parameter: Warn, like kube-apiserver
    assert status == 201 and "surprise" not in body["spec"]
    assert 'unknown field \\"spec.surprise\\"' in headers["Warning"]


def test_token_required(server: ApiServer) -> None:
    assert http(server, "GET", "/api/v1/namespaces", token=None)[0] == 401
    assert http(server, "GET", "/api/v1/namespaces", token="wrong")[0] == 401
    assert http(server, "GET", "/api/v1/namespaces")[0] == 200
    assert http(server, "GET", "/healthz", token=None)[0] == 200
    assert server.base_url.startswith("https://127.0.0.1:")


def test_request_log_gives_rbac_verbs(api_client, server: ApiServer) -> None:
    co = client.CustomObjectsApi(api_client)
    _create(api_client)
    co.get_namespaced_custom_object(G, V, "default", P, "lws-a")
    co.patch_namespaced_custom_object_status(G, V, "default", P, "lws-a", {"status": {"replicas": 0}})
    co.get_namespaced_custom_object_scale(G, V, "default", P, "lws-a")
    list(watch.Watch().stream(co.list_namespaced_custom_object, G, V, "default", P, timeout_seconds=1))
    assert server.verbs_used() == {
        (G, P, "create"),
        (G, P, "get"),
        (G, f"{P}/status", "patch"),
        (G, f"{P}/scale", "get"),
        (G, P, "watch"),
    }
    assert server.request_log[0] == ("create", G, P, "", "default", "")
