"""`lwsflow controller run`'s endpoints take free ports by default (issue 31.7): a second controller, a
dashboard or `sim serve` beside it never fails on a taken default port; a port that is taken when
named is one line naming the flag, exit 2."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from lwsflow.sim.testing import EmbeddedCluster

LWSFLOW = str(Path(sys.executable).parent / "lwsflow")


@pytest.fixture
def sim(tmp_path: Path) -> Iterator[EmbeddedCluster]:
    with EmbeddedCluster(tmp_path, engines=False) as cluster:
        yield cluster


def _env() -> dict[str, str]:
    env = {**os.environ, "LWSFLOW_LOG": "text"}
    env.pop("KUBECONFIG", None)
    return env


def _first_line(proc: subprocess.Popen[str], timeout: float = 60) -> str:
    """The line a controller prints once its endpoints listen ("" when it exited first)."""
    got: list[str] = []
    reader = threading.Thread(target=lambda: got.append(proc.stdout.readline() if proc.stdout else ""),
                              daemon=True)
    reader.start()
    reader.join(timeout)
    return got[0] if got else ""


def test_two_controllers_with_the_default_addresses_both_serve(sim: EmbeddedCluster) -> None:
    procs = [subprocess.Popen([LWSFLOW, "controller", "run", "-n", f"team-{i}",
                               f"--kubeconfig={sim.kubeconfig}"],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=_env())
             for i in range(2)]
    try:
        lines = [_first_line(p) for p in procs]
        ports = []
        for line, proc in zip(lines, procs, strict=True):
            m = re.search(r"metrics http://127\.0\.0\.1:(\d+)/metrics, health http://127\.0\.0\.1:(\d+)/healthz",
                          line)
            assert m and proc.poll() is None, (line, proc.poll())
            metrics_port, health_port = int(m[1]), int(m[2])
            assert httpx.get(f"http://127.0.0.1:{health_port}/healthz", timeout=10).status_code == 200
            assert b"lwsflow_" in httpx.get(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10).content
            ports += [metrics_port, health_port]
        assert len(set(ports)) == 4 and not {8080, 8081} & set(ports), ports
    finally:
        for p in procs:
            p.terminate()
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def test_a_taken_port_is_one_line_naming_the_flag(sim: EmbeddedCluster) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        flags = ("metrics-addr", "health-addr")
        procs = [subprocess.Popen([LWSFLOW, "controller", "run", f"--kubeconfig={sim.kubeconfig}",
                                   f"--{flag}=127.0.0.1:{port}"], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True, env=_env())
                 for flag in flags]  # both at once: their start-up is the test's time
        for flag, proc in zip(flags, procs, strict=True):
            try:
                _out, stderr = proc.communicate(timeout=60)
            finally:
                proc.kill()
            err = stderr.strip().splitlines()
            assert proc.returncode == 2 and len(err) == 1, stderr
            assert err[0] == f"error: {flag}: cannot listen on 127.0.0.1:{port}: Address already in use", err
