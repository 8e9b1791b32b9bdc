"""``serve_engines``: the cluster plugs the stand-in engine into its pod hooks, so a leader pod
really serves HTTP on its loopback pod IP while it runs, and stops when the pod goes."""

from __future__ import annotations

import json
import random
import urllib.error
import urllib.request

import pytest

from lwsflow.controller.api import labels as L
from lwsflow.sim.cluster import Cluster
from lwsflow.sim.faults import Fault, inject
from lwsflow.sim.lws_controller import LWS
from tests.sim.sim_helpers import available, make_lws, small_config


def test_leader_pods_serve_on_their_pod_ip():
    cfg = small_config(nodes=2, domains=1)
    cfg.serve_engines = True
    c = Cluster(cfg)
    port = random.randint(20_000, 32_000)  # pod IPs repeat across clusters; below ephemeral ports
    lws = make_lws("demo", replicas=1, size=2, gpus=8)
    lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["metadata"]["annotations"] = {
        L.SERVING_PORT: str(port)}
    c.store.create(LWS, lws)
    try:
        c.run_until(available(), 3600)
        ip = c.store.get("pods", "default", "demo-0")["status"]["podIP"]
        with urllib.request.urlopen(f"http://{ip}:{port}/v1/models", timeout=5) as r:
            assert json.load(r)["object"] == "list"
        worker_ip = c.store.get("pods", "default", "demo-0-1")["status"]["podIP"]
        with pytest.raises(urllib.error.URLError):  # workers hold shards, they serve nothing
            urllib.request.urlopen(f"http://{worker_ip}:{port}/v1/models", timeout=2)
        inject(c, Fault(kind="delete-pod", pod="demo-0"))
        c.advance(c.config.timings.container_stop_s)  # the engine stops with its container
        with pytest.raises(urllib.error.URLError):
            urllib.request.urlopen(f"http://{ip}:{port}/v1/models", timeout=2)
    finally:
        c.close()


def test_stopped_engine_drops_its_keep_alive_connections() -> None:
    """A pod that goes away takes its connections with it: a client holding a keep-alive connection
    to a stopped engine must not keep being answered by it when a replacement serves on the same
    address (found by the P/D analysis test: the replaced pod's successor saw no traffic)."""
    import httpx

    from lwsflow.sim.engine import start_engine

    old = start_engine(model="m", version="1.0.0")
    with httpx.Client(base_url=old.url) as c:
        assert c.get("/version").json()["version"] == "1.0.0"  # the connection stays open
        old.stop()
        with start_engine(host=old.host, port=old.port, model="m", version="2.0.0"):
            answers = []
            for _ in range(3):
                try:
                    answers.append(c.get("/version").json()["version"])
                except httpx.TransportError:
                    answers.append("reset")
    assert "1.0.0" not in answers and "2.0.0" in answers, answers
