"""`lwsflow sim serve`: the default cluster over HTTPS with a token, used through the official client."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import pytest
from kubernetes import client, config

from lwsflow.cli import main
from lwsflow.controller.api.paths import repo_root
from tests.apiserver.apiserver_helpers import KUBECTL, LWS_SAMPLE, G, P, V, example

LWSFLOW = Path(sys.executable).parent / "lwsflow"
EXAMPLE_CATALOG = repo_root() / "examples" / "catalog.yaml"


def _serve(kubeconfig: Path, *extra: str) -> subprocess.Popen[str]:
    """``lwsflow sim serve`` as a subprocess; returns once the banner says it listens."""
    proc = subprocess.Popen(
        [str(LWSFLOW), "sim", "serve", "--kubeconfig", str(kubeconfig), "--duration", "90", *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    banner = proc.stdout.readline()  # printed once the server listens and the kubeconfig exists
    assert banner.startswith("serving https://127.0.0.1:"), proc.stderr.read() if proc.stderr else ""
    return proc


def _stop(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=10)
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
        assert len(nodes) == 28  # the default cluster: 4 CPU nodes, 16 x 8 H100, 8 x 4 L40S
        # realtime: virtual time starts at wall time, so kubectl's client-side ages start near 0
        born = datetime.fromisoformat(nodes[0]["metadata"]["creationTimestamp"].replace("Z", "+00:00"))
        assert abs(born.timestamp() - time.time()) < 60
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
@pytest.mark.parametrize("cluster", [[], ["--catalog", str(EXAMPLE_CATALOG)]], ids=["default", "catalog"])
def test_sim_serve_runs_the_rendered_example_catalog(tmp_path: Path, cluster: list[str]) -> None:
    """``lwsflow render examples/catalog.yaml`` + ``kubectl apply -k dev``: every LWS becomes ready, on
    the default cluster and on one built from the catalog (labels, GPU product, taints all match)."""
    assert main(["render", str(EXAMPLE_CATALOG), "--out", str(tmp_path / "out")]) == 0
    kc = tmp_path / "sim.kubeconfig"
    proc = _serve(kc, *cluster)
    kubectl = [str(KUBECTL), "--kubeconfig", str(kc), "--cache-dir", str(tmp_path / "kcache")]
    try:
        subprocess.run([*kubectl, "create", "namespace", "llm-dev"], check=True, capture_output=True,
                       timeout=30)
        # the catalog's pods read HF_TOKEN from this Secret: without it they never start (item 3)
        subprocess.run([*kubectl, "create", "secret", "generic", "hf-token", "-n", "llm-dev",
                        "--from-literal=token=placeholder"], check=True, capture_output=True, timeout=30)
        applied = subprocess.run([*kubectl, "apply", "-k", str(tmp_path / "out" / "dev")],
                                 capture_output=True, text=True, timeout=60)
        assert applied.returncode == 0, applied.stderr
        deadline, pending = time.monotonic() + 45, ["?"]
        while time.monotonic() < deadline and pending:
            got = subprocess.run([*kubectl, "get", "lws", "-n", "llm-dev", "-o", "json"],
                                 capture_output=True, text=True, timeout=30, check=True)
            items = json.loads(got.stdout)["items"]
            pending = [o["metadata"]["name"] for o in items
                       if (o.get("status") or {}).get("readyReplicas", 0) != o["spec"]["replicas"]]
            time.sleep(0.5)
        # 6 LWS from the catalog plus the DS's two role LWS; none left waiting (no Pending pod)
        assert len(items) == 8 and pending == [], pending
        pods = json.loads(subprocess.run([*kubectl, "get", "pods", "-n", "llm-dev", "-o", "json"],
                                         capture_output=True, text=True, timeout=30, check=True).stdout)
        assert {p["status"]["phase"] for p in pods["items"]} == {"Running"}
    finally:
        _stop(proc)
    assert proc.returncode == 0


def test_sim_serve_refuses_config_and_catalog_together(capsys: pytest.CaptureFixture[str],
                                                       tmp_path: Path) -> None:
    code = main(["sim", "serve", "--config", str(tmp_path / "c.yaml"), "--catalog", str(EXAMPLE_CATALOG),
                 "--kubeconfig", str(tmp_path / "kc")])
    assert code == 2
    assert capsys.readouterr().err.strip() == "error: --catalog: give --config or --catalog, not both"


@pytest.mark.parametrize("layout", ["project-subdir", "no-project"])
def test_sim_serve_default_kubeconfig_goes_to_the_state_folder(tmp_path: Path, layout: str) -> None:
    """Issue 13.6: the default kubeconfig (it holds the token) was written into the current folder,
    which .gitignore does not cover. It goes to the project's `.lwsflow/` (ignored), mode 0600, and
    the banner says where."""
    root = tmp_path / "proj"
    cwd = root / "sub" if layout == "project-subdir" else root
    cwd.mkdir(parents=True)
    if layout == "project-subdir":
        (root / ".git").mkdir()
    proc = subprocess.Popen([str(LWSFLOW), "sim", "serve", "--duration", "0", "--no-engines"], cwd=cwd,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    want = root / ".lwsflow" / "sim.kubeconfig"
    assert f"kubeconfig: {want}" in out
    assert want.stat().st_mode & 0o777 == 0o600
    assert sorted(p.name for p in cwd.iterdir()) == ([".lwsflow"] if layout == "no-project" else [])
