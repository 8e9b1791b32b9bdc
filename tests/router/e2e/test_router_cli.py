"""`lwsflow sim serve --router` prints the router's URL, and `lwsflow smoke --gateway-url` passes
through it with the P/D hand-off proven (docs/llm-d.md)."""

from __future__ import annotations

import copy
import json
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from kubernetes import client, config

from lwsflow.cli import main
from lwsflow.controller.api.paths import lws_file
from lwsflow.controller.yamlio import load_yaml_documents

LWSFLOW = Path(sys.executable).parent / "lwsflow"
SAMPLE = lws_file("config/samples/leaderworkerset_v1_leaderworkerset.yaml")


def _lws(name: str, role: str) -> dict:
    obj = copy.deepcopy(load_yaml_documents(SAMPLE)[0])
    obj["metadata"]["name"] = name
    obj["spec"]["replicas"] = 1
    obj["spec"]["leaderWorkerTemplate"]["size"] = 1
    obj["spec"]["leaderWorkerTemplate"]["workerTemplate"]["metadata"] = {
        "labels": {"app": "chat", "lwsflow.io/role": role}}
    return obj
def test_sim_serve_router_and_smoke_gateway(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    kc = tmp_path / "sim.kubeconfig"
    proc = subprocess.Popen([str(LWSFLOW), "sim", "serve", "--kubeconfig", str(kc), "--duration", "90",
                             "--router"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        lines = [proc.stdout.readline() for _ in range(3)]
        assert lines[0].startswith("serving https://127.0.0.1:")
        assert lines[2].startswith("router http://127.0.0.1:"), lines
        url = lines[2].split()[1]
        assert lines[2].strip().endswith(f"lwsflow smoke --gateway-url {url}")
        api = config.new_client_from_config(str(kc))
        co = client.CustomObjectsApi(api)
        for name, role in (("chat-prefill", "prefill"), ("chat-decode", "decode")):
            co.create_namespaced_custom_object("leaderworkerset.x-k8s.io", "v1", "default",
                                               "leaderworkersets", _lws(name, role))
        co.create_namespaced_custom_object("inference.networking.k8s.io", "v1", "default", "inferencepools", {
            "apiVersion": "inference.networking.k8s.io/v1", "kind": "InferencePool",
            "metadata": {"name": "chat"},
            "spec": {"selector": {"matchLabels": {"app": "chat"}}, "targetPorts": [{"number": 8080}],
                     "endpointPickerRef": {"name": "chat-epp", "port": {"number": 9002}}}})
        core = client.CoreV1Api(api)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            pods = json.loads(core.list_namespaced_pod("default", _preload_content=False).data)["items"]
            if sum(1 for p in pods if (p.get("status") or {}).get("podIP")
                   and p["status"].get("phase") == "Running") >= 2:
                break
            time.sleep(0.2)
        api.close()
        code = main(["smoke", "--gateway-url", url, "--model", "stub-model", "--timeout", "10"])
        out = capsys.readouterr().out
        assert code == 0, out
        assert "gateway-pd" in out and "KV pulled from" in out
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=10)
    rest = proc.stdout.read() if proc.stdout else ""
    assert "route pool=default/chat" in rest and "prefill default/chat-prefill-0" in rest


def test_bad_router_options_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    kc = tmp_path / "kc"
    assert main(["sim", "serve", "--router", "--pd-threshold", "-1", "--kubeconfig", str(kc)]) == 2
    assert capsys.readouterr().err.strip() == "error: --pd-threshold: must be >= 0, got -1"
    assert main(["sim", "serve", "--router", "--no-engines", "--kubeconfig", str(kc)]) == 2
    assert "--router" in capsys.readouterr().err
    assert main(["sim", "serve", "--router", "--router-port", "70000", "--kubeconfig", str(kc)]) == 2
    assert capsys.readouterr().err.strip() == "error: --router-port: must be between 0 and 65535, got 70000"
    assert not kc.exists()


def test_router_port_is_chosen_and_printed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--router-port`` puts the stand-in router on that port; the printed URL names it."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    kc = tmp_path / "kc"
    assert main(["sim", "serve", "--router", "--router-port", str(port), "--duration", "0",
                 "--kubeconfig", str(kc)]) == 0
    out = capsys.readouterr().out
    assert f"router http://127.0.0.1:{port} " in out
    # the port taken: one error line naming the option
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        taken = busy.getsockname()[1]
        assert main(["sim", "serve", "--router", "--router-port", str(taken), "--duration", "0",
                     "--kubeconfig", str(tmp_path / "kc2")]) == 2
    assert capsys.readouterr().err.startswith(f"error: --router-port: cannot listen on 127.0.0.1:{taken}")
    assert not (tmp_path / "kc2").exists()
