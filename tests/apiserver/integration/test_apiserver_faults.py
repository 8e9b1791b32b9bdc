"""Seeded fault injection: the statuses a flaky control plane answers, cut watches, forced 410."""

from __future__ import annotations

import time

from lwsflow.sim.apiserver import ApiFaults
from tests.apiserver.apiserver_helpers import LWS_PATH, http

CM_PATH = "/api/v1/namespaces/default/configmaps"


def _cm(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}}


def test_off_by_default(server) -> None:
    assert all(http(server, "GET", CM_PATH)[0] == 200 for _ in range(30))
    assert server.faults.injected == {}


def test_error_statuses_with_retry_after(make_server) -> None:
    srv = make_server(ApiFaults(seed=7, error_rate=1.0, error_statuses=(500, 503, 429), retry_after_s=3))
    answers = [http(srv, "GET", CM_PATH) for _ in range(60)]
    statuses = {s for s, _, _ in answers}
    assert statuses == {500, 503, 429}
    for status, headers, body in answers:
        assert body["kind"] == "Status" and body["code"] == status
        if status == 429:
            assert headers["Retry-After"] == "3" and body["reason"] == "TooManyRequests"
    assert sum(srv.faults.injected.values()) == 60
    # health and discovery of the clock stay reachable: probes must not flap
    assert http(srv, "GET", "/healthz")[0] == 200


def test_rate_is_a_fraction_and_seeded() -> None:
    def run(seed: int) -> list[int]:
        faults = ApiFaults(seed=seed, error_rate=0.3, error_statuses=(503,))
        return [e.status if (e := faults.request_fault("get", CM_PATH)) else 200 for _ in range(1000)]

    a = run(11)
    assert a == run(11)  # the same seed fails the same requests
    assert 250 <= a.count(503) <= 350  # about 30 %
    assert run(12) != a


def test_conflicts_only_on_writes(make_server) -> None:
    srv = make_server(ApiFaults(seed=1, conflict_rate=1.0))
    assert http(srv, "GET", CM_PATH)[0] == 200
    status, _, body = http(srv, "POST", CM_PATH, _cm("x"))
    assert (status, body["reason"]) == (409, "Conflict")
    assert http(srv, "GET", f"{CM_PATH}/x")[0] == 404  # the refused write did not happen


def test_watch_cut_and_forced_gone_on_resume(make_server) -> None:
    srv = make_server(ApiFaults(seed=3, watch_cut_mean_s=0.2, gone_on_resume_rate=1.0))
    t0 = time.monotonic()
    status, _, body = http(srv, "GET", f"{CM_PATH}?watch=true&timeoutSeconds=30")
    assert status == 200 and time.monotonic() - t0 < 5  # cut long before its 30 s timeout
    http(srv, "POST", CM_PATH, _cm("y"))
    rv = http(srv, "GET", CM_PATH)[2]["metadata"]["resourceVersion"]
    status, _, body = http(srv, "GET", f"{LWS_PATH}?watch=true&resourceVersion={rv}&timeoutSeconds=5")
    assert status == 200 and body["type"] == "ERROR" and body["object"]["code"] == 410
    assert srv.faults.injected[410] == 1


def test_gone_as_plain_http_410(make_server, store) -> None:
    srv = make_server(gone_as_http=True)
    for i in range(55):
        http(srv, "POST", CM_PATH, _cm(f"c{i}"))
    status, _, body = http(srv, "GET", f"{CM_PATH}?watch=true&resourceVersion=1")
    assert (status, body["reason"]) == (410, "Expired")
