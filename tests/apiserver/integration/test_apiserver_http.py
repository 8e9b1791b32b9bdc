"""Wire details over raw HTTP: Table printing, paging, bookmarks, deletecollection, virtual timestamps."""

from __future__ import annotations

import copy
import socket

from lwsflow.sim.apiserver.tables import human_duration
from tests.apiserver.apiserver_helpers import LWS_PATH, LWS_SAMPLE, example, http

TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
CM_PATH = "/api/v1/namespaces/default/configmaps"


def _lws(name: str) -> dict:
    obj = copy.deepcopy(example(LWS_SAMPLE))
    obj["metadata"]["name"] = name
    return obj


def test_human_duration_like_kubectl() -> None:
    cases = {
        0: "0s",
        119: "119s",
        125: "2m5s",
        600: "10m",
        3 * 3600 + 60: "3h1m",
        10 * 3600: "10h",
        3 * 86400 + 3600: "3d1h",
        30 * 86400: "30d",
        800 * 86400: "2y70d",
    }
    assert {s: human_duration(s) for s in cases} == cases


def test_lws_table_in_virtual_time(make_server, clock) -> None:
    srv = make_server()
    http(srv, "POST", LWS_PATH, _lws("a"))
    clock.now += 125  # virtual time moves; the Age column follows it, not the wall clock
    status, _, body = http(srv, "GET", LWS_PATH, headers={"Accept": TABLE})
    assert status == 200 and body["kind"] == "Table"
    assert [c["name"] for c in body["columnDefinitions"]] == ["Name", "Ready", "Desired", "Up-to-date", "Age"]
    assert body["rows"][0]["cells"] == ["a", None, 3, None, "2m5s"]
    assert body["rows"][0]["object"]["kind"] == "PartialObjectMetadata"
    one = http(srv, "GET", f"{LWS_PATH}/a?includeObject=Object", headers={"Accept": TABLE})[2]
    assert one["rows"][0]["object"]["spec"]["replicas"] == 3


def test_paging_with_limit_and_continue(server) -> None:
    for i in range(5):
        http(server, "POST", CM_PATH, {"metadata": {"name": f"c{i}"}})
    page = http(server, "GET", f"{CM_PATH}?limit=2")[2]
    names = [i["metadata"]["name"] for i in page["items"]]
    while page["metadata"].get("continue"):
        page = http(server, "GET", f"{CM_PATH}?limit=2&continue={page['metadata']['continue']}")[2]
        names += [i["metadata"]["name"] for i in page["items"]]
    assert names == ["c0", "c1", "c2", "c3", "c4"]


def test_bookmarks_when_idle(make_server) -> None:
    srv = make_server(bookmark_interval_s=0.1)
    rv = http(srv, "GET", CM_PATH)[2]["metadata"]["resourceVersion"]
    _, _, body = http(
        srv, "GET", f"{CM_PATH}?watch=true&allowWatchBookmarks=true&resourceVersion={rv}&timeoutSeconds=1"
    )
    lines = [ln for ln in body.splitlines() if ln] if isinstance(body, str) else [body]
    assert lines and all('"type":"BOOKMARK"' in ln or ln["type"] == "BOOKMARK" for ln in lines)


def test_deletecollection_and_delete_status(server) -> None:
    for i in range(3):
        http(
            server, "POST", CM_PATH, {"metadata": {"name": f"d{i}", "labels": {"del": "yes" if i else "no"}}}
        )
    status, _, body = http(server, "DELETE", f"{CM_PATH}?labelSelector=del%3Dyes")
    assert status == 200 and [i["metadata"]["name"] for i in body["items"]] == ["d1", "d2"]
    status, _, body = http(server, "DELETE", f"{CM_PATH}/d0")
    assert (status, body["kind"], body["status"]) == (200, "Status", "Success")
    assert http(server, "GET", CM_PATH)[2]["items"] == []
    assert http(server, "DELETE", f"{CM_PATH}/d0")[0] == 404


def test_event_times_are_virtual(make_server, clock) -> None:
    srv = make_server()
    clock.now = 1_767_225_600.0 + 3600
    ev = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": "e"},
        "reason": "R",
        "message": "m",
        "involvedObject": {"kind": "Pod", "name": "p", "namespace": "default"},
    }
    body = http(srv, "POST", "/api/v1/namespaces/default/events", ev)[2]
    assert (
        body["firstTimestamp"]
        == body["lastTimestamp"]
        == body["metadata"]["creationTimestamp"]
        == "2026-01-01T01:00:00Z"
    )


def test_server_side_apply_over_http(server) -> None:
    apply = {"Content-Type": "application/apply-patch+yaml"}
    obj = _lws("ssa")
    status, _, body = http(server, "PATCH", f"{LWS_PATH}/ssa?fieldManager=ctrl", obj, headers=apply)
    assert status == 201 and body["metadata"]["managedFields"][0]["manager"] == "ctrl"
    assert http(server, "PATCH", f"{LWS_PATH}/ssa", obj, headers=apply)[0] == 400  # fieldManager required
    st = {
        "apiVersion": obj["apiVersion"],
        "kind": obj["kind"],
        "metadata": {"name": "ssa"},
        "status": {"replicas": 3, "readyReplicas": 2},
    }
    status, _, body = http(server, "PATCH", f"{LWS_PATH}/ssa/status?fieldManager=ctrl", st, headers=apply)
    assert status == 200 and body["status"] == {"replicas": 3, "readyReplicas": 2}
    assert body["metadata"]["generation"] == 1


def test_hostile_bodies_are_400_and_the_server_survives(server) -> None:
    bomb = b'a: &a ["x","x","x","x","x","x","x","x","x"]\n' + b"".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)},*{chr(97 + i)},*{chr(97 + i)},*{chr(97 + i)},"
        f"*{chr(97 + i)},*{chr(97 + i)},*{chr(97 + i)},*{chr(97 + i)},*{chr(97 + i)}]\n".encode()
        for i in range(8)
    )
    for body in (b"\xff\xfe not utf-8", b"{not json: [", bomb, b"[1, 2]", b"42", b"[" * 5000 + b"]" * 5000):
        status, _, answer = http(server, "POST", CM_PATH, body)
        assert status == 400, (body[:20], answer)
        assert answer["kind"] == "Status"
    json_patch = {"Content-Type": "application/json-patch+json"}
    http(server, "POST", CM_PATH, {"metadata": {"name": "ok"}})
    assert http(server, "PATCH", f"{CM_PATH}/ok", {"op": "add"}, headers=json_patch)[0] == 400
    assert (
        http(server, "PATCH", f"{CM_PATH}/ok", [{"op": "nope", "path": "/a"}], headers=json_patch)[0] == 400
    )
    assert http(server, "PATCH", f"{CM_PATH}/ok", b"{}", headers={"Content-Type": "text/plain"})[0] == 415
    assert http(server, "GET", CM_PATH)[0] == 200


def test_http09_request_gets_the_bare_body(make_server) -> None:
    srv = make_server(token=None)  # plain HTTP: an HTTP/0.9 request line has no headers, so no TLS
    with socket.create_connection((srv.host, srv.port), timeout=5) as conn:
        conn.sendall(b"GET /healthz\r\n\r\n")  # Python reads a (blank) header block even here
        data = b""
        while chunk := conn.recv(4096):  # HTTP/0.9: the server closes after the body
            data += chunk
    assert data == b"ok"  # no status line, no headers: HTTP/0.9 has neither
