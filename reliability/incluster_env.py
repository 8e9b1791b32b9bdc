"""Helpers for the in-cluster controller tests: a Controller on its own thread, GitOps-style syncs."""

from __future__ import annotations

import contextlib
import copy
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from lwsflow.controller.api.paths import repo_root
from lwsflow.controller.errors import Conflict
from lwsflow.controller.incluster.manager import Controller
from lwsflow.controller.kube.resources import LWS, ROLLOUT_POLICY
from lwsflow.controller.rollout import gate
from lwsflow.controller.yamlio import dump_yaml, load_yaml_documents
from lwsflow.sim.apiserver.faults import RequestInfo
from reliability.rollout_env import NS, Env


def policy(name: str, target: str, stages: list[dict[str, Any]], **spec: Any) -> dict:
    return {"apiVersion": "lwsflow.io/v1alpha1", "kind": "RolloutPolicy",
            "metadata": {"name": name, "namespace": NS},
            "spec": {"targetRef": {"kind": "LeaderWorkerSet", "name": target}, "stages": stages,
                     "progressDeadline": "10m", **spec}}


def sync(env: Env, name: str, image: str, **ann: str) -> dict:
    """What Argo CD does with a new overlay: the new template, the partition frozen at replicas."""
    obj = env.kube.get(LWS, NS, name)
    spec = copy.deepcopy(obj["spec"])
    tmpl = spec["leaderWorkerTemplate"]["workerTemplate"]
    tmpl["spec"]["containers"][0]["image"] = image
    tmpl["metadata"].setdefault("annotations", {}).update(ann)
    return env.kube.merge_patch(LWS, NS, name, {"spec": {
        "leaderWorkerTemplate": spec["leaderWorkerTemplate"],
        "rolloutStrategy": {"rollingUpdateConfiguration": {"partition": gate.replicas(obj)}}}})


def wait_policy(env: Env, name: str, pred: Callable[[dict], bool], timeout: float = 60.0) -> dict:
    end = time.monotonic() + timeout
    p: dict = {}
    while time.monotonic() < end:
        p = env.kube.get(ROLLOUT_POLICY, NS, name)
        if pred(p.get("status") or {}):
            return p
        time.sleep(0.05)
    raise AssertionError(f"policy {name}: condition not reached; status {p.get('status')}")


def wait_passes(ctl: Controller, n: int, timeout: float = 30.0) -> None:
    """Wait until ``ctl`` (running) has completed ``n`` more reconciles, a resync's or an event's: "nothing
    changes over N passes" counted, not guessed from wall time."""
    end = time.monotonic() + timeout
    while ctl.loop is None and time.monotonic() < end:
        time.sleep(0.01)
    assert ctl.loop is not None, "the controller's loop never started"
    loop, seen = ctl.loop, ctl.loop.reconciles
    while loop.reconciles < seen + n:
        assert time.monotonic() < end, f"{loop.reconciles - seen} of {n} reconcile passes in {timeout}s"
        time.sleep(0.01)


@contextmanager
def running(ctl: Controller) -> Iterator[Controller]:
    t = threading.Thread(target=ctl.run, daemon=True)
    t.start()
    try:
        yield ctl
    finally:
        ctl.stop.set()
        t.join(timeout=10)


OVERLAY = repo_root() / "overlays" / "controller"
SYSTEM_NS = "lwsflow-system"
RBAC_FILES = ("serviceaccount.yaml", "clusterrole.yaml", "clusterrolebinding.yaml", "role.yaml",
              "rolebinding.yaml")


def install_rbac(env: Any, tmp_path: Path, *, drop: tuple[str, str] | None = None,
                 notifications: str | None = None) -> Path:
    """kubectl apply the RBAC part of overlays/controller (optionally with one verb taken out of the
    rule naming a resource; a rule left with no verb goes), then a kubeconfig for the controller's
    ServiceAccount. ``notifications``: a namespace to apply overlays/controller/notifications in, as
    docs/controller.md says (``kubectl apply -k ... -n NS``). ``env`` has ``kube`` (admin) and
    ``kubeconfig``."""
    from lwsflow.cli import main

    with contextlib.suppress(Conflict):  # namespaces must exist first, as on a real cluster
        env.kube.request("POST", "/api/v1/namespaces", body={"metadata": {"name": SYSTEM_NS}})
    folder = tmp_path / "controller-rbac"
    folder.mkdir()
    for name in RBAC_FILES:
        shutil.copyfile(OVERLAY / name, folder / name)
    if drop is not None:
        resource, verb = drop
        role = load_yaml_documents(folder / "clusterrole.yaml")[0]
        rules = [r for r in role["rules"] if resource in r["resources"]]
        assert rules and verb in rules[0]["verbs"], (resource, verb)
        rules[0]["verbs"].remove(verb)
        role["rules"] = [r for r in role["rules"] if r["verbs"]]  # RBAC refuses a rule with no verb
        (folder / "clusterrole.yaml").write_text(dump_yaml(role))
    (folder / "kustomization.yaml").write_text(dump_yaml({
        "apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization", "namespace": SYSTEM_NS,
        "resources": list(RBAC_FILES)}))
    kubectl = Path(sys.executable).parent / "kubectl"
    proc = subprocess.run([str(kubectl), "--kubeconfig", str(env.kubeconfig), "apply", "-k", str(folder)],
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    if notifications is not None:
        proc = subprocess.run([str(kubectl), "--kubeconfig", str(env.kubeconfig), "apply", "-k",
                               str(OVERLAY / "notifications"), "-n", notifications],
                              capture_output=True, text=True, timeout=60, check=False)
        assert proc.returncode == 0, proc.stderr
    sa = tmp_path / "controller-sa.kubeconfig"
    assert main(["sim", "token", "lwsflow-controller", "-n", SYSTEM_NS, "--kubeconfig", str(env.kubeconfig),
                 "--kubeconfig-out", str(sa)]) == 0
    return sa


class RequestLog:
    """The requests one User-Agent sent, as the embedded API server saw them: (wall time, verb,
    resource, name); counted server-side, so what a controller sends, not what it believes it sends.
    ``env``: anything with the embedded cluster as ``.sim`` (its request hook is taken over)."""

    def __init__(self, env: Any, agent: str) -> None:
        self.agent, self.lock = agent, threading.Lock()
        self.log: list[tuple[float, str, str, str]] = []
        env.sim.api.faults.request_hook = self.hook

    def hook(self, req: RequestInfo) -> None:
        if req.user_agent == self.agent:
            with self.lock:
                self.log.append((time.monotonic(), req.verb, req.resource, req.name))

    def since(self, t0: float, *, watches: bool = False) -> list[tuple[float, str, str, str]]:
        with self.lock:
            return [r for r in self.log if r[0] >= t0 and (watches or r[1] != "watch")]
