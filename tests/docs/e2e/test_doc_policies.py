"""Every RolloutPolicy the docs show works as written (issue 31.1): each ```yaml block of kind
RolloutPolicy in docs/*.md is applied with `kubectl apply` and driven to Succeeded by `lwsflow
controller run --all-namespaces` (as the Deployment runs it) holding only the controller
ServiceAccount's token, bound to the shipped RBAC applied as docs/controller.md says (overlays/controller,
and overlays/controller/notifications in the policy's namespace), on the embedded cluster with serving
pods. A manual gate is passed with `kubectl lwsflow promote`.

The one thing changed in a policy is an address only a real cluster resolves: a check's URL on
``prometheus.monitoring:9090`` goes to the controller's own Prometheus (``--prometheus local``), the
one its analysis queries too. Everything else (checks, bakes, deadlines, analysis, webhooks) runs as
the docs have it; the webhook's Secret points at a local endpoint, which must get the messages."""

from __future__ import annotations

import base64
import os
import random
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from lwsflow.cli import kubectl_plugin
from lwsflow.controller.api import labels as L
from lwsflow.controller.api.paths import repo_root
from lwsflow.controller.kube.resources import LWS, ROLLOUT_POLICY, SECRET
from lwsflow.controller.rollout import gate
from lwsflow.controller.yamlio import dump_yaml
from reliability.http_sink import Sink
from reliability.incluster_env import install_rbac
from reliability.rollout_env import lws_manifest, make_env

DOCS = sorted((repo_root() / "docs").glob("*.md"))
CLUSTER_ONLY = "http://prometheus.monitoring:9090"  # resolves in a real cluster only
FINAL = ("Succeeded", "RolledBack", "Failed", "Aborted")


def documented() -> list[tuple[str, dict[str, Any]]]:
    """(where, policy) for every RolloutPolicy in a ```yaml block of docs/*.md."""
    out = []
    for path in DOCS:
        for k, block in enumerate(re.findall(r"^```yaml\n(.*?)^```", path.read_text(), re.M | re.S)):
            for doc in yaml.safe_load_all(block):
                if isinstance(doc, dict) and doc.get("kind") == "RolloutPolicy":
                    out.append((f"{path.name}#{k}:{doc['metadata']['name']}", doc))
    return out


POLICIES = documented()


def test_the_docs_show_a_policy() -> None:
    assert [w for w, _ in POLICIES if w.startswith("controller.md")], POLICIES


def _kubectl(kubeconfig: Path, *args: str, stdin: str | None = None) -> str:
    kubectl = Path(sys.executable).parent / "kubectl"
    proc = subprocess.run([str(kubectl), "--kubeconfig", str(kubeconfig), *args], input=stdin,
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def _wait(what: str, pred: Any, log: Path, timeout: float) -> Any:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if got := pred():
            return got
        time.sleep(0.1)
    raise AssertionError(f"{what}: not reached in {timeout}s\ncontroller log:\n{log.read_text()}")
@pytest.mark.timeout(600)
@pytest.mark.parametrize("where", [w for w, _ in POLICIES])
def test_documented_policy_rolls_out_to_succeeded_with_the_shipped_rbac(where: str, tmp_path: Path) -> None:
    doc = dict(POLICIES)[where]
    ns, name = doc["metadata"]["namespace"], doc["metadata"]["name"]
    ref = doc["spec"]["targetRef"]
    assert ref["kind"] == "LeaderWorkerSet", f"{where}: add a target for {ref['kind']} to this test"
    env = make_env(tmp_path, images={})  # stand-in engines serve on the pods' IPs
    sink = Sink()
    proc: subprocess.Popen[bytes] | None = None
    log = tmp_path / "controller.log"
    try:
        env.kube.request("POST", "/api/v1/namespaces", body={"metadata": {"name": ns}})
        port = random.randint(20_000, 60_000)
        lws = lws_manifest(ref["name"], replicas=4, partition=4,
                           annotations={L.SERVED_MODEL: "m", L.SERVING_PORT: str(port)})
        lws["metadata"]["namespace"] = ns
        env.kube.create(LWS, ns, lws)
        _wait("the stable release ready",
              lambda: gate.lws_fully_rolled(env.kube.get(LWS, ns, ref["name"])).passed, log, 60)
        for hook in (doc["spec"].get("notifications") or {}).get("webhooks") or []:
            key = hook["secretKeyRef"]
            env.kube.create(SECRET, ns, {"apiVersion": "v1", "kind": "Secret",
                                         "metadata": {"name": key["name"]},
                                         "data": {key["key"]: base64.b64encode(sink.url.encode()).decode()}})
        sa = install_rbac(env, tmp_path, notifications=ns)
        lwsflow = Path(sys.executable).parent / "lwsflow"
        penv = {**os.environ, "LWSFLOW_LOG": "text"}
        penv.pop("KUBECONFIG", None)
        with log.open("wb") as out:
            proc = subprocess.Popen([str(lwsflow), "controller", "run", "--all-namespaces", "--resync=1s",
                                     "--cluster-clock", "--prometheus", "local", f"--kubeconfig={sa}"],
                                    stdout=out, stderr=subprocess.STDOUT, env=penv)
        prom = _wait("the controller's Prometheus", lambda: re.search(
            r"analysis Prometheus (http://\S+)", log.read_text()), log, 60).group(1)
        applied = tmp_path / "policy.yaml"
        applied.write_text(dump_yaml(doc).replace(CLUSTER_ONLY, prom))
        _kubectl(env.kubeconfig, "apply", "-f", str(applied))

        def status() -> dict[str, Any]:
            return env.kube.get(ROLLOUT_POLICY, ns, name).get("status") or {}

        _wait("the running template adopted", lambda: status().get("stableRevision"), log, 60)
        # what Argo CD does with a new overlay: the new template, the partition frozen at replicas
        live = env.kube.get(LWS, ns, ref["name"])
        lwt = live["spec"]["leaderWorkerTemplate"]
        lwt["workerTemplate"]["spec"]["containers"][0]["image"] = "vllm:2"
        env.kube.merge_patch(LWS, ns, ref["name"], {"spec": {"leaderWorkerTemplate": lwt, "rolloutStrategy": {
            "rollingUpdateConfiguration": {"partition": gate.replicas(live)}}}})
        end, promoted = time.monotonic() + 480, set()
        while (s := status()).get("phase") not in FINAL:
            assert time.monotonic() < end and proc.poll() is None, f"{s}\n{log.read_text()}"
            if s.get("phase") == "WaitingForPromotion" and s.get("currentStage") not in promoted:
                # a manual gate: what a person runs
                assert kubectl_plugin.main(["promote", name, "-n", ns, "--kubeconfig",
                                            str(env.kubeconfig)]) == 0
                promoted.add(s.get("currentStage"))
            time.sleep(0.2)
        assert s["phase"] == "Succeeded", f"{where}: {s}\n{log.read_text()}"
        _wait("the webhook's messages", lambda: any(b"succeeded" in p for p in sink.posts), log, 30)
    finally:
        if proc is not None and proc.poll() is None:
            proc.terminate()
            proc.wait(timeout=30)
        sink.close()
        env.close()
    text = log.read_text()
    assert s["stages"] == len(doc["spec"]["stages"]), s
    assert "orbidden" not in text and "Traceback" not in text, text
