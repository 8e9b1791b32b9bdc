"""Issue 36, item 2: the control plane restarted under a rollout, on a reference cluster of its own.

Two ``lwsflow controller run --leader-elect`` processes (the Deployment's two replicas, only the shipped
ServiceAccount's token) roll a GitOps sync of LWS ``r`` (4 groups, maxUnavailable 1) through a
RolloutPolicy of three stages with bakes. Mid-rollout, each as a crash would (SIGKILL): etcd and
kube-apiserver together, then the upstream LWS controller, then the controller replica holding the
Lease. Each comes back (the launcher starts the same programs with the same ports, data and keys;
a fresh controller process, as the Deployment would). The rollout resumes and ends Succeeded with
every group on the new template at the equality, one outcome in the policy's history, and no ready
group below the floor in what a watch saw (the watch itself is cut by the API server's restart and
restarted).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import rolloutkit as rk
from clusters import Target, wait_for

from lwsflow.controller.api import labels as L

V1, V2 = "engine:v1", "engine:v2"
FINAL = ("Succeeded", "RolledBack", "Failed", "Aborted")


@pytest.fixture(scope="module")
def restartable(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Target, Path]]:
    """A reference cluster of its own: restarting the session's would cut every other test's watches."""
    from lwsflow.rehearsal.refcluster import launcher

    state = tmp_path_factory.mktemp("refcluster-restarts") / "state"
    kubeconfig = launcher.up(launcher.UpOptions(state_dir=state, ready_delay_s=1.0))
    try:
        yield Target("reference-restarts", kubeconfig, state / "kcache"), state
    finally:
        launcher.down(state)


def _status(t: Target, ns: str) -> dict[str, Any]:
    try:
        return rk.policy_status(t, ns, "r")
    except AssertionError:  # the API server is restarting
        return {}


def _stage(t: Target, ns: str) -> int:
    st = _status(t, ns)
    return int(st.get("currentStage") or 0) if st.get("phase") == "Progressing" else 0


def _leader(t: Target, procs: list[subprocess.Popen[bytes]]) -> int:
    holder = t.kubectl("get", "lease", "lwsflow-controller", "-n", rk.SA_NS, "-o",
                       "jsonpath={.spec.holderIdentity}").stdout
    return next((p.pid for p in procs if p.poll() is None and f"-{p.pid}-" in holder), 0)


def test_rollout_survives_apiserver_etcd_lws_controller_and_leader_restarts(
        restartable: tuple[Target, Path], tmp_path: Path) -> None:
    from lwsflow.rehearsal.refcluster import launcher

    t, state = restartable
    ns = t.namespace("restarts")
    kcfg = rk.controller_kubeconfig(t, tmp_path / "sa.kubeconfig")
    obj = rk.lws("r", V1)
    obj["spec"]["rolloutStrategy"]["rollingUpdateConfiguration"]["partition"] = 4
    rk.apply(t, ns, [obj])
    wait_for("r ready", lambda: rk.equal(t, ns, "r", 4), timeout=180)
    rk.apply(t, ns, [rk.rollout_policy("r", L.LWS_KIND, "r", [
        {"groups": 1, "bake": "15s"}, {"groups": "50%", "bake": "15s"}, {"groups": "100%"}],
        progressDeadline="10m")])  # the control plane's own recovery is slow on a loaded machine
    log = tmp_path / "controller.log"
    procs = [rk.start_controller(kcfg, ns, log), rk.start_controller(kcfg, ns, log)]
    watches: list[rk.Watch] = []
    try:
        wait_for("r adopted", lambda: bool(_status(t, ns).get("stableRevision")), timeout=90)
        watches.append(rk.Watch(t, "lws", ns))
        rk.gitops_sync(t, ns, "r", V2)
        restarts: list[str] = []

        wait_for("stage 1", lambda: _stage(t, ns) >= 1, timeout=90)
        before = log.stat().st_size
        launcher.restart(state, "etcd", "kube-apiserver")
        restarts.append("etcd+kube-apiserver")
        wait_for("the API server ready", lambda: t.kubectl("get", "--raw", "/readyz", check=False)
                 .returncode == 0, timeout=90)
        ready_at = log.stat().st_size
        watches.append(rk.Watch(t, "lws", ns))  # the first one ended with the API server

        wait_for("stage 2", lambda: _stage(t, ns) >= 2 or _status(t, ns).get("phase") in FINAL,
                 timeout=180)
        launcher.restart(state, "lws-controller")
        restarts.append("lws-controller")

        leader = _leader(t, procs)
        if _status(t, ns).get("phase") not in FINAL and leader:
            os.kill(leader, signal.SIGKILL)
            restarts.append("controller leader")
            procs.append(rk.start_controller(kcfg, ns, log))  # as the Deployment restarts the pod

        wait_for("r finished", lambda: _status(t, ns).get("phase") in FINAL, timeout=900)
        st = _status(t, ns)
        assert st["phase"] == "Succeeded", f"{st}\n{log.read_text()[-4000:]}"
        assert restarts == ["etcd+kube-apiserver", "lws-controller", "controller leader"], restarts
        wait_for("r all on v2", lambda: rk.equal(t, ns, "r", 4, V2), timeout=120)
        assert [h["outcome"] for h in st.get("history") or []] == ["Succeeded"], st.get("history")
        seen = [o for w in watches for o in w.stop()]
        watches.clear()
        series = rk.ready_series(seen, "r")
        assert series and min(series) >= 3, series  # the floor: replicas - maxUnavailable
        # the shipped RBAC was enough: a 403 only while the restarted API server's authorizer was not
        # ready yet (it answers before /readyz; the informer then relists)
        text = log.read_bytes()
        assert b"orbidden" not in text[:before] + text[ready_at:], text[ready_at:].decode()[-3000:]
        print(f"\nrestarted {', '.join(restarts)}; rollout Succeeded", file=sys.stderr)
    finally:
        for w in watches:
            w.stop()
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 30
        for p in procs:
            try:
                p.wait(timeout=max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
