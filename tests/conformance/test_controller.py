"""Issue 22 point 6: the in-cluster controller on the reference cluster (kube-apiserver v1.36.3, the
upstream LWS v0.9.0 controller, kwok), installed as docs/controller.md says: ``kubectl apply -k
overlays/controller``, then ``lwsflow controller run --leader-elect`` as two processes (the
Deployment's two replicas) holding only a ``kubectl create token`` token of the shipped
ServiceAccount, so every request goes through the shipped ClusterRole and Role.

One namespace, one pair of controller processes, five targets:
(a) a GitOps sync (template applied with the partition frozen) staged 1 → 50% → 100% to Succeeded;
(b) a release whose pods never become Ready (kwok's never-ready image) rolled back, the ready groups
    never below the floor (replicas - maxUnavailable);
(c) the leader SIGKILLed while a stage bakes: the standby takes the Lease and finishes;
(d) a manual gate (``pause: {}``) passed with ``kubectl lwsflow promote`` (the kubectl plugin);
(e) a P/D pair (``LeaderWorkerSetPair``): both roles staged to the new template.
What the reference cluster cannot run (pods that serve HTTP: smoke and http checks, analysis, the
P/D probe) is listed in docs/reference-cluster.md.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import rolloutkit as rk
from clusters import Target, wait_for

from lwsflow.controller.api import labels as L

V1, V2, BAD = "engine:v1", "engine:v2", "engine-never-ready:v2"
FINAL = ("Succeeded", "RolledBack", "Failed", "Aborted")


@dataclass
class Fleet:
    """The namespace, the controller processes and their log."""

    t: Target
    ns: str
    kubeconfig: Path
    log: Path
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    watch: rk.Watch | None = None

    def seen(self, name: str) -> list[dict[str, Any]]:
        """Every state of LWS ``name`` the namespace's watch has observed so far."""
        assert self.watch is not None
        return [o for o in self.watch.seen() if o["metadata"]["name"] == name]

    def start(self) -> None:
        self.procs.append(rk.start_controller(self.kubeconfig, self.ns, self.log))

    def leader_pid(self) -> int:
        holder = self.t.kubectl(
            "get", "lease", "lwsflow-controller", "-n", rk.SA_NS, "-o", "jsonpath={.spec.holderIdentity}"
        ).stdout
        live = {p.pid for p in self.procs if p.poll() is None}
        return next((pid for pid in live if f"-{pid}-" in holder), 0)

    def wait(
        self, name: str, what: str, pred: Callable[[dict[str, Any]], bool], timeout: float = 120
    ) -> dict[str, Any]:
        try:
            wait_for(
                f"policy {name}: {what}",
                lambda: pred(rk.policy_status(self.t, self.ns, name)),
                timeout=timeout,
                every=0.3,
            )
        except AssertionError as exc:
            st = rk.policy_status(self.t, self.ns, name)
            raise AssertionError(
                f"{exc}; status {st}\ncontroller log (tail):\n{self.log.read_text()[-4000:]}"
            ) from None
        return rk.policy_status(self.t, self.ns, name)


def _frozen(obj: dict[str, Any]) -> dict[str, Any]:
    """An LWS as the renderer writes it for GitOps: the partition frozen at replicas."""
    obj["spec"]["rolloutStrategy"]["rollingUpdateConfiguration"]["partition"] = obj["spec"]["replicas"]
    return obj


@pytest.fixture(scope="module")
def fleet(reference: Target, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    d = tmp_path_factory.mktemp("controller")
    kubeconfig = rk.controller_kubeconfig(reference, d / "sa.kubeconfig")
    ns = reference.namespace("ctl")
    pair = [_frozen(o) for o in rk.pair("p", V1, prefill=2, decode=2)]
    rk.apply(
        reference,
        ns,
        [
            _frozen(rk.lws("a", V1)),
            _frozen(rk.lws("b", V1)),
            _frozen(rk.lws("c", V1, 3)),
            _frozen(rk.lws("d", V1, replicas=2)),
            *pair,
        ],
    )
    for name, n in (("a", 4), ("b", 4), ("c", 3), ("d", 2), ("p-prefill", 2), ("p-decode", 2)):
        wait_for(f"{name} ready", lambda name=name, n=n: rk.equal(reference, ns, name, n), timeout=180)
    fast = {"progressDeadline": "2m"}
    rk.apply(
        reference,
        ns,
        [
            rk.rollout_policy(
                "a", L.LWS_KIND, "a", [{"groups": 1}, {"groups": "50%"}, {"groups": "100%"}], **fast
            ),
            rk.rollout_policy(
                "b",
                L.LWS_KIND,
                "b",
                [{"groups": 1}, {"groups": "100%"}],
                progressDeadline="20s",
                onFailure="rollback",
            ),
            rk.rollout_policy(
                "c", L.LWS_KIND, "c", [{"groups": 1, "bake": "8s"}, {"groups": "100%"}], **fast
            ),
            rk.rollout_policy("d", L.LWS_KIND, "d", [{"groups": 1}, {"groups": "100%", "pause": {}}], **fast),
            rk.rollout_policy("p", "LeaderWorkerSetPair", "p", [{"groups": 1}, {"groups": "100%"}], **fast),
        ],
    )
    f = Fleet(reference, ns, kubeconfig, d / "controller.log")
    f.start()
    f.start()
    try:
        for name in ("a", "b", "c", "d", "p"):  # adopted: the running template recorded as stable
            f.wait(name, "adopted", lambda s: bool(s.get("stableRevision")), timeout=90)
        # one Git sync brings new templates for a, b, d and the pair at once; c is synced by its test
        f.watch = rk.Watch(reference, "lws", ns)
        for name, image in (("a", V2), ("b", BAD), ("d", V2), ("p-prefill", V2), ("p-decode", V2)):
            rk.gitops_sync(reference, ns, name, image)
        yield f
    finally:
        if f.watch is not None:
            f.watch.stop()
        for p in f.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in f.procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        text = f.log.read_text()
        print(f"\ncontroller log: {len(text.splitlines())} lines", file=sys.stderr)


def _on(fleet: Fleet, name: str, image: str, replicas: int) -> bool:
    return rk.equal(fleet.t, fleet.ns, name, replicas, image)


def test_gitops_sync_staged_to_succeeded(fleet: Fleet) -> None:
    """(a) The synced template is staged by partition 4 → 3 → 2 → 0 and left frozen at 4 again."""
    st = fleet.wait("a", "finished", lambda s: s.get("phase") in FINAL)
    seen = fleet.seen("a")
    assert st["phase"] == "Succeeded" and st["stages"] == 3, st
    wait_for("a all on v2", lambda: _on(fleet, "a", V2, 4))
    partitions = [rk.partition(o) for o in seen]
    steps = [p for i, p in enumerate(partitions) if i == 0 or p != partitions[i - 1]]
    assert steps[0] == 4 and {3, 2, 0} <= set(steps), steps  # every stage written, in order
    assert [p for p in steps if p < 4] == sorted((p for p in steps if p < 4), reverse=True), steps
    assert rk.pod_images(fleet.t, fleet.ns) >= {V2}
    assert "orbidden" not in fleet.log.read_text()  # the shipped RBAC was enough


def test_never_ready_release_rolled_back_with_floor(fleet: Fleet) -> None:
    """(b) Stage 1's group never gets Ready: at the deadline the policy rolls back; the ready groups
    the watch sees never fall below replicas - maxUnavailable (4 - 1)."""
    st = fleet.wait("b", "finished", lambda s: s.get("phase") in FINAL, timeout=150)
    wait_for("b back on v1", lambda: _on(fleet, "b", V1, 4), timeout=120)
    seen = fleet.seen("b")
    assert st["phase"] == "RolledBack", st
    series = rk.ready_series(seen, "b")
    assert series and min(series) >= 3, series
    assert min(series) == 3  # the canary group really went down (the check can see a dip)
    images = {
        c["image"]
        for p in fleet.t.items("pods", fleet.ns)
        if p["metadata"]["labels"].get("leaderworkerset.sigs.k8s.io/name") == "b"
        for c in p["spec"]["containers"]
    }
    assert images == {V1}, images


def test_leader_killed_mid_stage_standby_finishes(fleet: Fleet) -> None:
    """(c) SIGKILL of the leader while stage 1 bakes: the standby takes the Lease and finishes."""
    rk.gitops_sync(fleet.t, fleet.ns, "c", V2)
    fleet.wait(
        "c",
        "stage 1 started",
        lambda s: s.get("phase") == "Progressing" and int(s.get("currentStage") or 0) >= 1,
    )
    leader = fleet.leader_pid()
    assert leader, "no controller process holds the Lease"
    os.kill(leader, signal.SIGKILL)
    t0 = time.monotonic()
    st = fleet.wait("c", "finished", lambda s: s.get("phase") in FINAL, timeout=150)
    assert st["phase"] == "Succeeded", st
    wait_for("c all on v2", lambda: _on(fleet, "c", V2, 3))
    successor = fleet.leader_pid()
    assert successor and successor != leader
    print(f"\nleader SIGKILLed; standby finished {time.monotonic() - t0:.1f} s later", file=sys.stderr)
    fleet.start()  # a fresh standby for the rest, as the Deployment would restart the pod


def test_manual_gate_promoted_with_the_kubectl_plugin(fleet: Fleet) -> None:
    """(d) The rollout waits before the gated stage (through (c)'s change of leader too);
    ``kubectl lwsflow promote`` passes it."""
    st = fleet.wait("d", "waiting at the gate", lambda s: s.get("phase") == "WaitingForPromotion")
    obj = rk.get(fleet.t, "lws", fleet.ns, "d")
    assert rk.partition(obj) == 1, st  # stage 1 done (1 of 2 groups), the gated stage not started
    time.sleep(2)
    assert rk.partition(rk.get(fleet.t, "lws", fleet.ns, "d")) == 1  # held while it waits
    bindir = str(Path(sys.executable).parent)
    env = {
        **os.environ,
        "PATH": f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}",
        "KUBECONFIG": str(fleet.t.kubeconfig),
    }
    proc = subprocess.run(
        [str(Path(bindir) / "kubectl"), "lwsflow", "promote", "d", "-n", fleet.ns],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    st = fleet.wait("d", "finished", lambda s: s.get("phase") in FINAL)
    assert st["phase"] == "Succeeded", st
    wait_for("d all on v2", lambda: _on(fleet, "d", V2, 2))


def test_pd_pair_staged_to_succeeded(fleet: Fleet) -> None:
    """(e) A P/D pair: both roles' templates synced frozen; the policy stages both to v2."""
    st = fleet.wait("p", "finished", lambda s: s.get("phase") in FINAL, timeout=180)
    assert st["phase"] == "Succeeded", st
    for role in ("prefill", "decode"):
        wait_for(f"p-{role} on v2", lambda role=role: _on(fleet, f"p-{role}", V2, 2))
