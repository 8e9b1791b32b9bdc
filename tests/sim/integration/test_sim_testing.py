"""The public test harness (``lwsflow.sim.testing``): an embedded cluster served over HTTPS, and a
recorder of the store's own history from a chosen moment."""

from __future__ import annotations

import socket
import ssl
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from lwsflow.controller.kube.client import Kube
from lwsflow.controller.kube.resources import LWS
from lwsflow.controller.yamlio import load_yaml_documents
from lwsflow.sim.config import ClusterConfig, PoolConfig, Timings
from lwsflow.sim.lws_controller import LWS as LWS_KEY
from lwsflow.sim.testing import EmbeddedCluster, StoreRecorder, written_by

NS = "default"


def config() -> ClusterConfig:
    return ClusterConfig(pools=[PoolConfig(name="cpu", count=4)],
                         timings=Timings(pull_gbps=100.0, cpu_image_gb=0.1, container_start_s=1.0))


def lws(name: str, replicas: int = 2) -> dict:
    return {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
            "metadata": {"name": name, "namespace": NS},
            "spec": {"replicas": replicas, "leaderWorkerTemplate": {"size": 2, "workerTemplate": {
                "spec": {"containers": [{"name": "c", "image": "app:1"}]}}}}}


def partition(obj: dict) -> int:
    return int(((obj["spec"].get("rolloutStrategy") or {}).get("rollingUpdateConfiguration") or {})
               .get("partition") or 0)


def _get(url: str, token: str | None, ca: bytes) -> int:
    req = urllib.request.Request(url + "/api/v1/namespaces")
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, context=ssl.create_default_context(cadata=ca.decode()),
                                    timeout=5) as resp:
            return resp.status
    except urllib.error.HTTPError as err:
        return err.code


def _wait(pred: object, timeout: float = 20.0) -> None:
    end = time.monotonic() + timeout
    while not pred():  # type: ignore[operator]
        assert time.monotonic() < end, "condition not reached"
        time.sleep(0.02)


def test_serves_https_with_a_token_and_a_private_kubeconfig(tmp_path: Path) -> None:
    with EmbeddedCluster(tmp_path / "kc", config(), speed=300) as sim:
        assert sim.url.startswith("https://127.0.0.1:") and sim.kubeconfig == tmp_path / "kc" / "kubeconfig"
        assert sim.kubeconfig.stat().st_mode & 0o777 == 0o600
        doc = load_yaml_documents(sim.kubeconfig)[0]
        assert doc["users"][0]["user"]["token"] == sim.token
        assert doc["clusters"][0]["cluster"]["server"] == sim.url
        assert sim.api.ca_pem is not None
        assert _get(sim.url, sim.token, sim.api.ca_pem) == 200
        assert _get(sim.url, None, sim.api.ca_pem) == 401
        kube = Kube.connect(str(sim.kubeconfig))
        kube.create(LWS, NS, lws("web"))
        _wait(lambda: (kube.get(LWS, NS, "web").get("status") or {}).get("readyReplicas") == 2)
        kube.api.close()
        t0 = sim.cluster.now()
        time.sleep(0.1)
        assert sim.cluster.now() - t0 >= 300 * 0.05  # realtime at the given speed
        url = sim.url
    with pytest.raises(OSError):  # closed: nothing listens any more
        socket.create_connection(("127.0.0.1", int(url.rsplit(":", 1)[1])), timeout=1).close()


def test_a_taken_port_raises_and_leaves_nothing_running(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        before = {t.name for t in threading.enumerate()}
        sim = EmbeddedCluster(tmp_path, config(), port=busy.getsockname()[1])
        with pytest.raises(OSError):
            sim.start()
    assert not sim.kubeconfig.exists()
    assert {t.name for t in threading.enumerate()} - before == set()


def test_config_from_a_file_and_engines_on_request(tmp_path: Path) -> None:
    path = tmp_path / "cluster.yaml"
    path.write_text("pools: [{name: small, count: 3}]\nserve_engines: true\n")
    sim = EmbeddedCluster(tmp_path, path, engines=False)
    assert sim.engines is None and sim.cluster.pod_hooks == []
    assert len(sim.store.list("nodes")[0]) == 3
    sim.close()
    sim = EmbeddedCluster(tmp_path, path, engine_options={"side_channel_port": 0})  # the config says on
    assert sim.engines is not None and sim.cluster.pod_hooks == [sim.engines]
    sim.close()


def test_recorder_starts_at_the_first_write_of_a_field_manager(tmp_path: Path) -> None:
    """Not at subscription: the object's creation and status updates before that write are left out,
    and every change from it on is recorded with the live pods at that instant."""
    with EmbeddedCluster(tmp_path, config(), speed=300) as sim:
        rec = StoreRecorder(sim, keys=[LWS_KEY], start=written_by("the-client"))
        kube = Kube.connect(str(sim.kubeconfig))
        kube.create(LWS, NS, lws("web"))
        _wait(lambda: (kube.get(LWS, NS, "web").get("status") or {}).get("readyReplicas") == 2)
        assert not rec.started and rec.entries() == []
        kube.merge_patch(LWS, NS, "web", {"spec": {"rolloutStrategy": {"rollingUpdateConfiguration": {
            "partition": 1}}}}, field_manager="the-client")
        kube.merge_patch(LWS, NS, "web", {"spec": {"leaderWorkerTemplate": {"workerTemplate": {"spec": {
            "containers": [{"name": "c", "image": "app:2"}]}}}}}, field_manager="someone-else")
        # updated and ready again: updatedReplicas counts the new worker StatefulSet before its pods exist
        _wait(lambda: ((st := kube.get(LWS, NS, "web").get("status") or {}).get("updatedReplicas"),
                       st.get("readyReplicas")) == (1, 2))
        kube.api.close()
        first = rec.entries()[0]
        assert rec.started and first.index == 0 and partition(first.object) == 1
        assert [partition(r.object) for r in rec.changes(LWS_KEY, "web", partition)] == [1]
        assert all(r.key == LWS_KEY for r in rec.entries())
        assert [r.at for r in rec.entries()] == sorted(r.at for r in rec.entries())
        # pods at each change: group 1 runs app:2 once it is updated and ready
        last = rec.entries(LWS_KEY, "web")[-1]
        images = {n: p["spec"]["containers"][0]["image"] for (_ns, n), p in last.pods.items()}
        assert images == {"web-0": "app:1", "web-0-1": "app:1", "web-1": "app:2", "web-1-1": "app:2"}
        assert rec.pods().keys() == last.pods.keys()
        rec.stop()
        n = rec.position()
        kube = Kube.connect(str(sim.kubeconfig))
        kube.merge_patch(LWS, NS, "web", {"spec": {"rolloutStrategy": {"rollingUpdateConfiguration": {
            "partition": 0}}}}, field_manager="the-client")
        kube.api.close()
        time.sleep(0.1)
        assert rec.position() == n  # stopped: nothing more


def test_since_positions_restart_a_history(tmp_path: Path) -> None:
    sim = EmbeddedCluster(tmp_path, config())
    rec = StoreRecorder(sim.cluster)  # no start predicate: from now on, every kind
    sim.store.create(LWS_KEY, lws("a"))
    sim.cluster.run_until(lambda c: (c.store.get(LWS_KEY, NS, "a").get("status") or {})
                          .get("readyReplicas") == 2, timeout_virtual=600)
    assert {r.key for r in rec.entries()} >= {LWS_KEY, "pods", "statefulsets.apps"}
    assert rec.last_position(LWS_KEY, "a") == rec.entries(LWS_KEY, "a")[-1].index
    assert rec.last_position(LWS_KEY, "nothing") == rec.position()
    since = rec.last_position(LWS_KEY, "a")
    sim.store.mutate(LWS_KEY, NS, "a", lambda o: o["spec"].update(
        {"rolloutStrategy": {"rollingUpdateConfiguration": {"partition": 2}}}))
    assert [partition(r.object) for r in rec.changes(LWS_KEY, "a", partition, since=since)] == [0, 2]
    assert [partition(r.object) for r in rec.changes(LWS_KEY, "a", partition)] == [0, 2]
    assert [partition(r.object) for r in rec.changes(LWS_KEY, "a", partition, since=rec.position())] == []
    sim.close()
