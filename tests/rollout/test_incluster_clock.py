"""`lwsflow controller run` keeps wall time and never asks the cluster for the embedded cluster's clock
(``GET /lwsflow/v1/clock``) unless ``--cluster-clock`` says so (the demo and the tests do)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from reliability.rollout_env import NS, Env

LWSFLOW = Path(sys.executable).parent / "lwsflow"


def _clock_reads(env: Env, tmp_path: Path, *flags: str) -> int:
    """How often the controller read the clock endpoint while it ran two resyncs."""
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
    try:
        with log.open("wb") as sink:
            proc = subprocess.Popen([str(LWSFLOW), "controller", "run", "-n", NS, "--resync=1s", *flags,
                                     "--metrics-addr=127.0.0.1:0", "--health-addr=127.0.0.1:0",
                                     f"--kubeconfig={env.kubeconfig}"], stdout=sink, stderr=subprocess.STDOUT,
                                    env=penv)
            end = time.monotonic() + 60
            while "watching" not in log.read_text() and time.monotonic() < end and proc.poll() is None:
                time.sleep(0.1)
            time.sleep(2.5)  # two resyncs
            alive = proc.poll() is None
            proc.terminate()
            proc.wait(timeout=20)
        assert alive and "watching" in log.read_text(), log.read_text()
    finally:
        api.current_speed = speed  # type: ignore[method-assign]
    return reads[0]


def test_wall_clock_unless_told(env: Env, tmp_path: Path) -> None:
    assert _clock_reads(env, tmp_path) == 0
    assert _clock_reads(env, tmp_path, "--cluster-clock") >= 1
