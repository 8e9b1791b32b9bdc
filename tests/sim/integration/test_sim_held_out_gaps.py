"""Gaps a held-out differential found against the reference cluster (issue 36 item 6), each closed:
pods of a template without containers refused as kube-apiserver refuses them, qosClass kept once
Running, random uids, a group's leader Terminating before its workers, the events of the real
control plane, and a type error in a custom resource answered with kube-apiserver's code and words."""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
import uuid
from typing import Any

import pytest

from lwsflow.sim import kinds
from lwsflow.sim.apiserver import ApiServer
from lwsflow.sim.apiserver.admission import admit
from lwsflow.sim.cluster import Cluster
from lwsflow.sim.lws_controller import LWS
from lwsflow.sim.store import MODIFIED, Event, Store
from tests.sim.sim_helpers import NS, available, make_ds, make_lws, pod_template, set_image, small_config

STS = "statefulsets.apps"


def _events(c: Cluster, reason: str | None = None) -> list[dict]:
    return [e for e in c.store.list("events", NS)[0] if reason is None or e["reason"] == reason]


def _empty_leader(name: str = "empty") -> dict:
    lws = make_lws(name, replicas=1, size=2)
    lws["spec"]["leaderWorkerTemplate"]["leaderTemplate"] = {"spec": {"containers": []}}
    return lws


def test_template_without_containers_gets_no_pod_and_failed_create_events(cluster: Cluster):
    """Both clusters admit the LeaderWorkerSet (the schema has no minItems and the webhook does not
    look); kube-apiserver then refuses every leader pod, so the StatefulSet records FailedCreate and
    no group ever runs - not a 0/0 leader pod and an Available LeaderWorkerSet."""
    lws = _empty_leader()
    admit(kinds.LWS, json.loads(json.dumps(lws)), None, "Strict")  # the API server admits it
    cluster.store.create(LWS, lws)
    cluster.advance(600)
    assert [p["metadata"]["name"] for p in cluster.store.iter_raw("pods")] == []
    failed = _events(cluster, "FailedCreate")
    assert [(e["involvedObject"]["kind"], e["involvedObject"]["name"], e["type"]) for e in failed] == [
        ("StatefulSet", "empty", "Warning")]
    assert failed[0]["message"] == ('create Pod empty-0 in StatefulSet empty failed error: '
                                    'Pod "empty-0" is invalid: spec.containers: Required value')
    assert failed[0]["source"]["component"] == "statefulset-controller"
    status = cluster.store.get(LWS, NS, "empty").get("status") or {}
    assert not available("empty")(cluster) and not status.get("readyReplicas")


def test_qos_class_is_kept_once_running(cluster: Cluster):
    """status.qosClass is set when the pod is created and a real kubelet keeps it in every status."""
    tpl = pod_template()
    tpl["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "1"}, "limits": {"nvidia.com/gpu": "8"}}
    cluster.store.create(LWS, make_lws("demo", replicas=1, size=2,
                                       leaderWorkerTemplate={"size": 2, "workerTemplate": tpl}))
    cluster.run_until(available(), 3600)
    pods = list(cluster.store.iter_raw("pods"))
    assert len(pods) == 2
    assert all(p["status"]["phase"] == "Running" and p["status"]["qosClass"] == "Burstable" for p in pods)


def test_uids_are_random_uuid4_and_reproducible_when_seeded():
    """kube-apiserver's uids are random UUID4s: two clusters never share one (a client that keys on
    uid must not mistake a new cluster's object for an old one); a seeded cluster repeats its own."""
    def uids(seed: int | None) -> list[str]:
        c = Cluster(small_config(), seed=seed)
        c.store.create(LWS, make_lws("demo", replicas=2, size=2))
        c.run_until(available(), 3600)
        return sorted(p["metadata"]["uid"] for p in c.store.iter_raw("pods"))

    first, second = uids(None), uids(None)
    assert all(uuid.UUID(u).version == 4 for u in first)
    assert not set(first) & set(second)
    assert uids(7) == uids(7) and uids(7) != uids(8)


def test_leader_terminates_before_its_workers(cluster: Cluster):
    """A rolling update deletes a group's leader; the worker StatefulSet and its pods go with it
    through the garbage collector, so the leader is marked Terminating first, its workers after."""
    cluster.store.create(LWS, make_lws("demo", replicas=2, size=3))
    cluster.run_until(available(), 3600)
    marked: list[str] = []

    def on_event(ev: Event) -> None:
        meta = ev.object["metadata"]
        if ev.key == "pods" and ev.type == MODIFIED and meta.get("deletionTimestamp") \
                and meta["name"] not in marked:
            marked.append(meta["name"])

    cluster.store.subscribe(on_event)
    set_image(cluster, "demo", "vllm:v2")
    cluster.run_until(available(), 3600)
    assert marked[:3] == ["demo-1", "demo-1-1", "demo-1-2"]
    assert marked[3:6] == ["demo-0", "demo-0-1", "demo-0-2"]


def test_events_of_the_real_control_plane(cluster: Cluster):
    """kube-scheduler's Scheduled, the StatefulSet controller's SuccessfulCreate / SuccessfulDelete and
    upstream LWS's own events (reported as "leaderworkerset", on the LeaderWorkerSet, related to the
    leader pod where upstream names one)."""
    cluster.store.create(LWS, make_lws("demo", replicas=2, size=2, max_surge=1))
    cluster.run_until(available(), 3600)
    set_image(cluster, "demo", "vllm:v2")
    cluster.run_until(available(), 3600)
    by_reason: dict[str, list[dict]] = {}
    for e in _events(cluster):
        by_reason.setdefault(e["reason"], []).append(e)
    scheduled = {e["message"] for e in by_reason["Scheduled"]}
    assert any(m.startswith("Successfully assigned default/demo-0 to gpu-") for m in scheduled)
    assert {e["source"]["component"] for e in by_reason["Scheduled"]} == {"default-scheduler"}
    created = {e["message"] for e in by_reason["SuccessfulCreate"]}
    assert {"create Pod demo-0 in StatefulSet demo successful",
            "create Pod demo-1-1 in StatefulSet demo-1 successful"} <= created
    deleted = {e["message"] for e in by_reason["SuccessfulDelete"]}
    assert "delete Pod demo-1 in StatefulSet demo successful" in deleted
    lws_events = [e for e in _events(cluster) if e["reportingComponent"] == "leaderworkerset"]
    assert lws_events and all(e["involvedObject"]["kind"] == "LeaderWorkerSet" for e in lws_events)
    messages = [e["message"] for e in lws_events]
    revisions = [m for m in messages if m.startswith("Creating revision with key ")]
    assert revisions[0].endswith("for a newly created LeaderWorkerSet")
    assert revisions[1].endswith("for updated LWS")
    assert "Created leader statefulset demo" in messages
    assert "Updating replica 1" in messages and "deleting surge replica demo-2" in messages
    worker = next(e for e in lws_events if e["message"] == "Created worker statefulset for leader pod demo-0")
    assert (worker["reason"], worker["related"]["kind"], worker["related"]["name"]) == (
        "GroupsProgressing", "Pod", "demo-0")
    assert not [e for e in _events(cluster) if e["reportingComponent"] == "lws"]


# -- a type error in a custom resource, over HTTP ------------------------------------------------------
TOKEN = "held-out-token"


@pytest.fixture
def api() -> Any:
    srv = ApiServer(Store(), token=TOKEN)
    url = srv.start()
    yield url
    srv.stop()


def _call(url: str, method: str, path: str, body: Any, ctype: str = "application/json") -> tuple[int, dict]:
    data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
    req = urllib.request.Request(url + path, data=data, method=method,
                                 headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": ctype})
    ctx = ssl.create_default_context()
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    try:
        with urllib.request.urlopen(req, context=ctx, timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def _three(name: str) -> dict:
    lws = make_lws(name, replicas=2, size=2)
    lws["spec"]["replicas"] = "three"
    return lws


LWS_PATH = "/apis/leaderworkerset.x-k8s.io/v1/namespaces/default/leaderworkersets"
DS_PATH = "/apis/disaggregatedset.x-k8s.io/v1/namespaces/default/disaggregatedsets"


def test_type_error_in_a_create_is_the_webhooks_400(api: str):
    """Upstream's mutating webhook decodes the LeaderWorkerSet into its Go types before any schema
    check and denies it with the decoder's words (kube-apiserver passes its 400 on, no reason)."""
    code, status = _call(api, "POST", LWS_PATH, _three("bad"))
    assert code == 400 and status["code"] == 400 and "reason" not in status
    assert status["message"] == ('admission webhook "mleaderworkerset.kb.io" denied the request: json: '
                                 "cannot unmarshal string into Go struct field "
                                 "LeaderWorkerSetSpec.spec.replicas of type int32")


def test_type_error_in_a_server_side_apply_is_a_500(api: str):
    """A server-side apply types the patch first (structured-merge-diff): kube-apiserver answers 500
    failed to create typed patch object, before any webhook."""
    body = _three("bad")
    body["metadata"]["namespace"] = "default"
    code, status = _call(api, "PATCH", f"{LWS_PATH}/bad?fieldManager=kubectl", body,
                         "application/apply-patch+yaml")
    assert code == 500 and "reason" not in status
    assert status["message"] == ("failed to create typed patch object (default/bad; "
                                 "leaderworkerset.x-k8s.io/v1, Kind=LeaderWorkerSet): .spec.replicas: "
                                 "expected numeric (int or float), got string")


@pytest.mark.parametrize(("stop_s", "peak"), [(0.0, 5), (2.0, 4)])
def test_surge_2_unavailable_1_peak_follows_the_pod_shutdown_time(stop_s: float, peak: int):
    """R=4, maxSurge 2, maxUnavailable 1: the rolling computation is upstream's (rollingUpdateParameters,
    the same in v0.9.0 and v0.10), so the leader StatefulSet steps through the same partitions, surge
    and deletion order as on the reference. What decides the updatedReplicas peak is how long a
    deleted leader takes to go: kwok (the reference's kubelet) removes it at once, so group 1 is back
    on the new template before group 2's readiness reclaims a surge group (5 updated at once); with
    the embedded kubelet's modelled shutdown (container_stop_s, default 2 s) group 1's old leader is
    still Terminating then, as on a cluster whose engines take time to stop (4)."""
    cfg = small_config()
    cfg.timings.container_stop_s = stop_s
    c = Cluster(cfg)
    c.store.create(LWS, make_lws("demo", replicas=4, size=2, max_unavailable=1, max_surge=2))
    c.run_until(available(), 3600)
    steps: list[tuple[int, int]] = []
    updated: list[int] = []
    deleted: list[str] = []

    def on_event(ev: Event) -> None:
        o = ev.object
        if ev.key == STS and o["metadata"]["name"] == "demo":
            step = (o["spec"]["updateStrategy"]["rollingUpdate"]["partition"], o["spec"]["replicas"])
            if not steps or steps[-1] != step:
                steps.append(step)
        elif ev.key == LWS:
            updated.append((o.get("status") or {}).get("updatedReplicas", 0))
        elif ev.key == "pods" and ev.type == "DELETED" and o["metadata"]["name"].count("-") == 1:
            deleted.append(o["metadata"]["name"])

    c.store.subscribe(on_event)
    set_image(c, "demo", "vllm:v2")
    c.run_until(available(), 3600)
    assert steps == [(4, 6), (3, 6), (1, 6), (0, 6), (0, 5), (0, 4)]
    assert deleted == ["demo-3", "demo-2", "demo-1", "demo-5", "demo-0", "demo-4"]
    assert max(updated) == peak


def test_type_error_in_a_disaggregatedset_is_the_schemas_422(api: str):
    """A DisaggregatedSet has no mutating webhook: kube-apiserver's schema validation answers, in its
    words (the field, the JSON type given, the type wanted) and its cause reason."""
    ds = make_ds("bad")
    ds["spec"]["roles"][0]["spec"]["replicas"] = "three"
    code, status = _call(api, "POST", DS_PATH, ds)
    assert code == 422 and status["reason"] == "Invalid"
    assert status["message"] == (
        'DisaggregatedSet.disaggregatedset.x-k8s.io "bad" is invalid: spec.roles[0].spec.replicas: Invalid '
        'value: "string": spec.roles[0].spec.replicas in body must be of type integer: "string"')
    assert [c["reason"] for c in status["details"]["causes"]] == ["FieldValueTypeInvalid"]
