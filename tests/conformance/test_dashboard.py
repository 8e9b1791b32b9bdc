"""The dashboard against a real API server: on the reference cluster (and, for comparison, the
embedded one) it lists a RolloutPolicy and shows its LeaderWorkerSet's groups with their pods and
nodes, reading only through the admin's kubeconfig as `lwsflow dashboard --kubeconfig` does.

The RolloutPolicy CRD (overlays/controller/crd.yaml) is applied first on the reference cluster: the
embedded cluster serves the kind already.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import httpx
import pytest
from clusters import Target, wait_for

from lwsflow.controller.yamlio import dump_yaml
from lwsflow.dashboard import serve

REPO = Path(__file__).resolve().parents[2]


def _lws(name: str) -> dict:
    return {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
            "metadata": {"name": name},
            "spec": {"replicas": 2, "leaderWorkerTemplate": {"size": 2, "workerTemplate": {"spec": {
                "containers": [{"name": "engine", "image": "r.example/vllm:1"}]}}}}}


def _policy(name: str) -> dict:
    return {"apiVersion": "lwsflow.io/v1alpha1", "kind": "RolloutPolicy", "metadata": {"name": name},
            "spec": {"targetRef": {"kind": "LeaderWorkerSet", "name": name},
                     "stages": [{"groups": 1, "bake": "1m"}, {"groups": "100%", "pause": {}}]}}


@pytest.mark.parametrize("cluster", ["reference", "embedded"])
def test_dashboard_lists_a_policy_and_its_groups(cluster: str, request: pytest.FixtureRequest) -> None:
    t: Target = request.getfixturevalue(cluster)
    if cluster == "reference":
        # as a user installs it (client-side apply, like test_overlays' `kubectl apply -k`, which may have
        # run first in this session: a server-side apply would then conflict on its field manager)
        t.kubectl("apply", "-f", str(REPO / "overlays" / "controller" / "crd.yaml"))
        t.kubectl("wait", "--for=condition=Established", "crd/rolloutpolicies.lwsflow.io", "--timeout=60s")
    ns = t.namespace("dash")
    t.kubectl("apply", "--server-side", "-n", ns, "-f", "-", stdin=dump_yaml(_lws("chat")))

    def ready() -> int:
        lws = json.loads(t.kubectl("get", "lws", "chat", "-n", ns, "-o", "json").stdout)
        return int((lws.get("status") or {}).get("readyReplicas") or 0)

    wait_for("2 ready groups", lambda: ready() == 2)
    t.kubectl("apply", "--server-side", "-n", ns, "-f", "-",
              stdin=dump_yaml(_policy("chat")))
    dash = serve(str(t.kubeconfig), ns)
    try:
        with httpx.Client(timeout=30) as http:
            deadline = time.monotonic() + 30
            while 'data-policy="' not in (page := http.get(dash.url).text) and time.monotonic() < deadline:
                time.sleep(0.2)
            assert f'data-policy="{ns}/chat"' in page and "LeaderWorkerSet/chat" in page, page
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:  # the pods' watch may trail the policies'
                view = http.get(f"{dash.url}p/{ns}/chat").text
                if len(re.findall(r'class="cell [^"]*\bready"', view)) == 2:
                    break
                time.sleep(0.2)
    finally:
        dash.stop()
    groups = sorted(int(g) for g in re.findall(r'data-group="(\d+)"', view))
    assert groups == [0, 1], view
    pods = re.findall(r"(leader|worker) (chat-[0-9-]+)", view)
    assert sorted(p for _r, p in pods) == ["chat-0", "chat-0-1", "chat-1", "chat-1-1"], pods
    assert "unscheduled" not in view  # every pod shows its node
    assert len(re.findall(r'class="cell [^"]*\bready"', view)) == 2, view
    assert 'data-state="planned"' in view and "manual gate" in view  # the stage plan
