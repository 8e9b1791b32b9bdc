"""`lwsflow sim serve`: the default cluster over HTTPS with a token, used through the official client."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from apiserver_helpers import LWS_SAMPLE, G, P, V, example
from kubernetes import client, config

from pipelines.cli import main

LWSFLOW = Path(sys.executable).parent / "lwsflow"


@pytest.mark.slow
def test_sim_serve_end_to_end(tmp_path: Path) -> None:
    kc = tmp_path / "sim.kubeconfig"
    proc = subprocess.Popen(
        [str(LWSFLOW), "sim", "serve", "--kubeconfig", str(kc), "--duration", "60"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        banner = proc.stdout.readline()  # printed once the server listens and the kubeconfig exists
        assert banner.startswith("serving https://127.0.0.1:"), proc.stderr.read() if proc.stderr else ""
        assert kc.stat().st_mode & 0o777 == 0o600
        assert "token" not in banner
        api = config.new_client_from_config(str(kc))
        # raw JSON: the client's V1NodeSystemInfo model insists on fields the simulated nodes omit
        nodes = json.loads(client.CoreV1Api(api).list_node(_preload_content=False).data)["items"]
        assert len(nodes) == 20  # the default cluster: 4 CPU nodes and 16 x 8 H100
        co = client.CustomObjectsApi(api)
        co.create_namespaced_custom_object(G, V, "default", P, example(LWS_SAMPLE))
        deadline = time.monotonic() + 20
        ready = 0
        while time.monotonic() < deadline and ready != 3:
            obj = co.get_namespaced_custom_object(G, V, "default", P, "leaderworkerset-sample")
            ready = (obj.get("status") or {}).get("readyReplicas", 0)
            time.sleep(0.1)
        assert ready == 3  # virtual time runs x600: the groups come up within wall seconds
        api.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=10)
    assert proc.returncode == 0


def test_sim_serve_rejects_bad_speed(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code = main(["sim", "serve", "--speed", "0", "--kubeconfig", str(tmp_path / "kc")])
    err = capsys.readouterr().err
    assert code == 2
    assert err.strip() == "error: --speed: must be greater than 0, got 0"
    assert not (tmp_path / "kc").exists()
