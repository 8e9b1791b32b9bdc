"""`lwsflow dashboard` and `kubectl lwsflow dashboard` as commands: the URL line, bad input, a stop."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from lwsflow.cli import main
from lwsflow.sim.testing import EmbeddedCluster

BIN = Path(sys.executable).parent


@pytest.mark.parametrize("argv", [["lwsflow", "dashboard"], ["kubectl", "lwsflow", "dashboard"]])
def test_serves_until_stopped(tmp_path: Path, argv: list[str]) -> None:
    with EmbeddedCluster(tmp_path) as sim:
        env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
        proc = subprocess.Popen([str(BIN / argv[0]), *argv[1:], "--kubeconfig", str(sim.kubeconfig), "-A"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        try:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            assert line.startswith("lwsflow dashboard: http://127.0.0.1:") and "all namespaces" in line, (
                line, proc.stderr.read() if proc.poll() is not None and proc.stderr else "")
            url = line.split()[2]
            assert "RolloutPolicies" in httpx.get(url, timeout=30).text
        finally:
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=30) == 0


def test_bad_input_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["dashboard", "--kubeconfig", str(tmp_path / "nope")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error:") and "kubeconfig" in err[0], err
    with EmbeddedCluster(tmp_path) as sim:
        assert main(["dashboard", "--kubeconfig", str(sim.kubeconfig), "--port", "70000"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--port" in err[0], err
