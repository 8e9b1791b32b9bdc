"""Discovery, OpenAPI and the clock endpoint: what kubectl and the client read before anything else."""

from __future__ import annotations

from lwsflow.controller.api.crd import crd_info
from lwsflow.sim import kinds
from lwsflow.sim.apiserver import ApiServer
from tests.apiserver.apiserver_helpers import http


def test_version_and_groups(server: ApiServer) -> None:
    assert http(server, "GET", "/version")[2]["minor"] == "37"
    assert http(server, "GET", "/api")[2]["versions"] == ["v1"]
    groups = {g["name"] for g in http(server, "GET", "/apis")[2]["groups"]}
    assert {"apps", "leaderworkerset.x-k8s.io", "disaggregatedset.x-k8s.io"} <= groups
    assert http(server, "GET", "/apis/nope.example.com")[0] == 404


def test_lws_resource_list(server: ApiServer) -> None:
    body = http(server, "GET", "/apis/leaderworkerset.x-k8s.io/v1")[2]
    by_name = {r["name"]: r for r in body["resources"]}
    lws = by_name["leaderworkersets"]
    assert lws["shortNames"] == ["lws"] and lws["kind"] == "LeaderWorkerSet" and lws["namespaced"]
    assert {"get", "list", "watch", "create", "update", "patch", "delete"} <= set(lws["verbs"])
    assert "categories" not in lws  # the upstream CRD declares none: `kubectl get all` omits LWS
    scale = by_name["leaderworkersets/scale"]
    assert (scale["group"], scale["version"], scale["kind"]) == ("autoscaling", "v1", "Scale")
    assert by_name["leaderworkersets/status"]["verbs"] == ["get", "patch", "update"]
    core = {r["name"]: r for r in http(server, "GET", "/api/v1")[2]["resources"]}
    assert core["nodes"]["namespaced"] is False and "pods/status" in core


def test_custom_resource_names_are_the_upstream_crds() -> None:
    """Discovery names come from the packaged upstream CRDs (spec.names): ``lws`` and ``dsrs``, and no
    short name for DisaggregatedSet, since on a real cluster ``ds`` is the DaemonSet short name."""
    for plural in ("leaderworkersets", "disaggregatedsets", "disaggregatedsetrolescalers"):
        info = crd_info(plural)
        t = kinds.BY_KEY[f"{plural}.{info.group}"]
        assert (t.kind, t.short_names, t.categories, t.namespaced) == (
            info.kind, info.short_names, info.categories, info.namespaced)
        assert (t.has_status, t.has_scale) == ("status" in info.subresources, "scale" in info.subresources)


def test_ds_and_dsrs_discovery(server: ApiServer) -> None:
    body = http(server, "GET", "/apis/disaggregatedset.x-k8s.io/v1")[2]
    by_name = {r["name"]: r for r in body["resources"]}
    assert "shortNames" not in by_name["disaggregatedsets"]
    dsrs = by_name["disaggregatedsetrolescalers"]
    assert (dsrs["kind"], dsrs["shortNames"], dsrs["singularName"]) == (
        "DisaggregatedSetRoleScaler", ["dsrs"], "disaggregatedsetrolescaler")
    assert by_name["disaggregatedsetrolescalers/scale"]["kind"] == "Scale"
    assert {"disaggregatedsets/status", "disaggregatedsetrolescalers/status"} <= set(by_name)
    core = {r["name"] for r in http(server, "GET", "/api/v1")[2]["resources"]}
    assert "ds" not in {s for r in body["resources"] for s in r.get("shortNames", [])} and core


def test_openapi_v3_lets_kubectl_validate_on_the_server(server: ApiServer) -> None:
    root = http(server, "GET", "/openapi/v3")[2]["paths"]
    url = root["apis/leaderworkerset.x-k8s.io/v1"]["serverRelativeURL"]
    doc = http(server, "GET", url)[2]
    patch = doc["paths"]["/apis/leaderworkerset.x-k8s.io/v1/namespaces/{namespace}/leaderworkersets/{name}"][
        "patch"
    ]
    assert patch["x-kubernetes-group-version-kind"]["kind"] == "LeaderWorkerSet"
    assert "fieldValidation" in {p["name"] for p in patch["parameters"]}
    # no strategic merge for custom resources: kubectl then sends JSON merge patches, as upstream
    assert "application/strategic-merge-patch+json" not in patch["requestBody"]["content"]
    assert "io.x-k8s.leaderworkerset.v1.LeaderWorkerSet" in doc["components"]["schemas"]


def test_clock_endpoint(make_server, clock) -> None:
    srv = make_server(clock=clock, speed=600.0)
    clock.now = 1_767_225_900.0
    assert http(srv, "GET", "/lwsflow/v1/clock")[2] == {"now": 1_767_225_900.0, "speed": 600.0}


def test_binds_loopback_only(server: ApiServer) -> None:
    assert server.host == "127.0.0.1"
    assert server._httpd is not None and server._httpd.server_address[0] == "127.0.0.1"


def test_write_kubeconfig_finds_the_running_servers_ca(server: ApiServer, tmp_path) -> None:
    import base64
    import stat

    import yaml

    from lwsflow.sim.kubeconfig import write_kubeconfig

    path = write_kubeconfig(tmp_path / "kc", server.base_url, "tok")
    cfg = yaml.safe_load(path.read_text())
    cluster = cfg["clusters"][0]["cluster"]
    assert cluster["server"] == server.base_url
    assert base64.b64decode(cluster["certificate-authority-data"]) == server.ca_pem
    assert cfg["users"][0]["user"] == {"token": "tok"} and cfg["current-context"] == "lwsflow-sim"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
