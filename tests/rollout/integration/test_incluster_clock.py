"""`lwsflow controller run` keeps wall time and never asks the cluster for the embedded cluster's clock
(``GET /lwsflow/v1/clock``) unless ``--cluster-clock`` says so (the demo and the tests do)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx

from lwsflow.controller.kube.resources import ROLLOUT_POLICY
from reliability.incluster_env import policy
from reliability.rollout_env import NS, Env

LWSFLOW = Path(sys.executable).parent / "lwsflow"
PASSES = 3  # the first pass and two resyncs, each stamping the policy's status with the controller's time


def _reconciles(metrics_url: str) -> int:
    text = httpx.get(metrics_url, timeout=10).text
    m = re.search(r"^lwsflow_reconcile_duration_seconds_count (\S+)$", text, re.M)
    return int(float(m[1])) if m else 0


def _clock_reads(env: Env, tmp_path: Path, *flags: str) -> int:
    """How often the controller read the clock endpoint while it made ``PASSES`` reconcile passes (its
    /metrics counts them) over a policy whose target is missing."""
    api = env.sim.api
    reads = [0]
    lock = threading.Lock()
    speed = api.current_speed

    def counted() -> float:  # the endpoint's only caller of current_speed: one call per clock read
        with lock:
            reads[0] += 1
        return speed()

    api.current_speed = counted  # type: ignore[method-assign]
    log = tmp_path / f"controller{len(flags)}.log"
    penv = {**os.environ, "LWSFLOW_LOG": "text"}
    penv.pop("KUBECONFIG", None)
    passes = 0
    try:
        with log.open("wb") as sink:
            proc = subprocess.Popen([str(LWSFLOW), "controller", "run", "-n", NS, "--resync=200ms", *flags,
                                     "--metrics-addr=127.0.0.1:0", "--health-addr=127.0.0.1:0",
                                     f"--kubeconfig={env.kubeconfig}"], stdout=sink, stderr=subprocess.STDOUT,
                                    env=penv)
            end = time.monotonic() + 60
            url = None
            while url is None and time.monotonic() < end and proc.poll() is None:
                m = re.search(r"metrics (http://127\.0\.0\.1:\d+/metrics),.*watching", log.read_text())
                url = m[1] if m else None
                time.sleep(0.05)
            while url is not None and passes < PASSES and time.monotonic() < end and proc.poll() is None:
                passes = _reconciles(url)
                time.sleep(0.05)
            alive = proc.poll() is None
            proc.terminate()
            proc.wait(timeout=20)
        assert alive and passes >= PASSES, (passes, log.read_text())
    finally:
        api.current_speed = speed  # type: ignore[method-assign]
    return reads[0]


def test_wall_clock_unless_told(env: Env, tmp_path: Path) -> None:
    env.kube.create(ROLLOUT_POLICY, NS, policy("pc", "missing", [{"groups": "100%"}]))
    assert _clock_reads(env, tmp_path) == 0
    assert _clock_reads(env, tmp_path, "--cluster-clock") >= 1
