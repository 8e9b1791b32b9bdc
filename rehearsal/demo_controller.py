"""The demo's in-cluster controller: RBAC, RolloutPolicies, two leader-elected replicas, a promoter.

What a platform team does once (``kubectl apply -k overlays/controller``, here only its RBAC part:
the embedded cluster serves the CRD already, and the Deployment runs as local processes), and what a
person does at a manual gate (``kubectl lwsflow promote``), done by the demo so that it runs alone.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lwsflow.controller.api.paths import repo_root
from lwsflow.controller.errors import Conflict
from lwsflow.controller.kube.client import Kube
from lwsflow.controller.kube.resources import ROLLOUT_POLICY, Resource
from lwsflow.controller.yamlio import load_yaml_documents

SYSTEM_NS = "lwsflow-system"
SERVICE_ACCOUNT = "lwsflow-controller"
RBAC_FILES = ("serviceaccount.yaml", "clusterrole.yaml", "clusterrolebinding.yaml", "role.yaml",
              "rolebinding.yaml")
_RBAC = "rbac.authorization.k8s.io"
RBAC_KINDS = {"ServiceAccount": Resource("", "v1", "serviceaccounts"),
              "ClusterRole": Resource(_RBAC, "v1", "clusterroles", namespaced=False),
              "ClusterRoleBinding": Resource(_RBAC, "v1", "clusterrolebindings", namespaced=False),
              "Role": Resource(_RBAC, "v1", "roles"), "RoleBinding": Resource(_RBAC, "v1", "rolebindings")}
KINDS = {"lws": "LeaderWorkerSet", "ds": "DisaggregatedSet", "pair": "LeaderWorkerSetPair"}


def bin_dir() -> Path:
    """The venv's bin: ``lwsflow``, ``kubectl`` and the ``kubectl-lwsflow`` plugin."""
    return Path(sys.executable).parent


def install_rbac(admin: Kube, admin_kubeconfig: Path, kubeconfig_out: Path) -> Path:
    """Apply overlays/controller's ServiceAccount, ClusterRole, Role and bindings (its namespace
    first); write a kubeconfig with the ServiceAccount's token (TokenRequest API)."""
    from lwsflow.rehearsal.cli.sim_token import token

    with contextlib.suppress(Conflict):
        admin.request("POST", "/api/v1/namespaces", body={"metadata": {"name": SYSTEM_NS}})
    overlay = repo_root() / "overlays" / "controller"
    for name in RBAC_FILES:
        for doc in load_yaml_documents(overlay / name):
            res = RBAC_KINDS[doc["kind"]]
            if res.namespaced:
                doc["metadata"]["namespace"] = SYSTEM_NS  # what the kustomization's namespace does
            admin.apply(res, doc, field_manager="argocd-controller")
    with open(os.devnull, "w") as quiet, contextlib.redirect_stdout(quiet):  # the demo says it itself
        token(SERVICE_ACCOUNT, namespace=SYSTEM_NS, kubeconfig=admin_kubeconfig,
              duration="8760h", kubeconfig_out=kubeconfig_out)
    return kubeconfig_out


def policy_for(target: str, namespace: str, stages: list[str], *, bake: str, deadline: str,
               gate_last: bool, checks: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """A RolloutPolicy for ``target`` (``lws/NAME``, ``pair/NAME``, ``ds/NAME``) with the catalog's
    stages, bake and deadline; ``gate_last``: a manual gate (``pause: {}``) before the last stage;
    ``checks``: run after every stage's gate and bake."""
    kind, name = target.split("/", 1)
    spec_stages: list[dict[str, Any]] = []
    for i, s in enumerate(stages):
        stage: dict[str, Any] = {"groups": int(s) if s.isdigit() else s, "bake": bake}
        if checks:
            stage["checks"] = [dict(c) for c in checks]
        if gate_last and i == len(stages) - 1 and i > 0:
            stage["pause"] = {}
        spec_stages.append(stage)
    return {"apiVersion": "lwsflow.io/v1alpha1", "kind": "RolloutPolicy",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"targetRef": {"kind": KINDS[kind], "name": name}, "stages": spec_stages,
                     "progressDeadline": deadline, "onFailure": "rollback"}}


@dataclass
class Controllers:
    """Two ``lwsflow controller run --leader-elect`` processes with the ServiceAccount's kubeconfig."""

    kubeconfig: Path
    logdir: Path
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def start(self, replicas: int = 2) -> Controllers:
        # PATH: a policy's command check runs `lwsflow ...` from the venv the demo runs in
        env = {**os.environ, "LWSFLOW_LOG": "text",
               "PATH": f"{bin_dir()}{os.pathsep}{os.environ.get('PATH', '')}"}
        env.pop("KUBECONFIG", None)
        for i in range(replicas):
            log = (self.logdir / f"controller-{i}.log").open("wb")
            self.procs.append(subprocess.Popen(
                [str(bin_dir() / "lwsflow"), "controller", "run", "--all-namespaces", "--leader-elect",
                 f"--lease-namespace={SYSTEM_NS}", "--resync=1s", "--cluster-clock",
                 "--metrics-addr=127.0.0.1:0", "--health-addr=127.0.0.1:0",
                 f"--kubeconfig={self.kubeconfig}"],
                stdout=log, stderr=subprocess.STDOUT, env=env))
            log.close()
        return self

    def logs(self) -> str:
        return "".join(p.read_text() for p in sorted(self.logdir.glob("controller-*.log")))

    def stop(self) -> None:
        for p in self.procs:
            p.terminate()
        for p in self.procs:
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


class Promoter:
    """Watches the policies; when one waits at a manual gate, runs ``kubectl lwsflow promote`` as a
    person would (after ``hold_s`` wall seconds at the gate) and records what it printed."""

    def __init__(self, admin: Kube, kubeconfig: Path, say: Callable[[str], None],
                 hold_s: float = 1.0) -> None:
        self.admin, self.kubeconfig, self.say, self.hold_s = admin, kubeconfig, say, hold_s
        self.promoted: list[dict[str, str]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="promoter", daemon=True)

    def __enter__(self) -> Promoter:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        done: set[tuple[str, str, str]] = set()
        while not self._stop.wait(0.2):
            try:
                items, _ = self.admin.list(ROLLOUT_POLICY, None)
            except Exception:  # the cluster is shutting down: nothing to promote
                continue
            for p in items:
                st, meta = p.get("status") or {}, p["metadata"]
                key = (meta["namespace"], meta["name"], f"{st.get('rolloutId')}:{st.get('currentStage')}")
                if st.get("phase") != "WaitingForPromotion" or key in done:
                    continue
                done.add(key)
                time.sleep(self.hold_s)  # a person looks at `kubectl lwsflow status` first
                self._promote(meta["namespace"], meta["name"], st)

    def _promote(self, ns: str, name: str, st: dict[str, Any]) -> None:
        env = {**os.environ, "PATH": f"{bin_dir()}{os.pathsep}{os.environ.get('PATH', '')}",
               "KUBECONFIG": str(self.kubeconfig)}
        cmd = ["kubectl", "lwsflow", "promote", name, "-n", ns]
        self.say(f"$ {' '.join(cmd)}")
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=60, check=False)
        said = (proc.stdout or proc.stderr).strip()
        self.say(said)
        self.promoted.append({"policy": f"{ns}/{name}", "stage": str(st.get("currentStage")),
                              "rc": str(proc.returncode), "output": said})


def plan_policies(repo_url: str, env: str, models: list[str]) -> list[tuple[str, str, list[str], str, str]]:
    """(target, namespace, stages, bake, deadline) per model, from what main pins for ``env``: the
    catalog's rollout settings on the built overlay."""
    from lwsflow.components import deploy, gitwork, steps
    from lwsflow.controller.yamlio import parse_yaml_documents

    planned: list[tuple[str, str, list[str], str, str]] = []
    with gitwork.checkout(repo_url) as work:
        for m in models:
            docs = parse_yaml_documents(steps.kustomize(work / "overlays" / env / m), source=f"{env}/{m}")
            target, ns = steps.rollout_target(docs)
            replicas = min(int((d.get("spec") or {}).get("replicas") or 1) for d in deploy.workloads(docs))
            stages, _ = deploy.feasible_stages(steps._annotation(docs, "rollout-stages") or "100%", replicas)
            if target.startswith("ds/"):
                stages = "100%"  # the DS controller has no partition: one stage
            planned.append((target, ns, stages.split(","), steps._annotation(docs, "rollout-bake") or "0s",
                            steps._annotation(docs, "rollout-deadline") or "30m"))
    return planned


def create_policies(admin: Kube, planned: list[tuple[str, str, list[str], str, str]],
                    checks: dict[str, list[dict[str, Any]]] | None = None) -> list[dict]:
    """One RolloutPolicy per planned target (``plan_policies``); a manual gate before the last stage of
    the first one that has more than one stage; ``checks`` by target (``lws/NAME``) on every stage."""
    gated = next((i for i, p in enumerate(planned) if len(p[2]) > 1), -1)
    return [admin.create(ROLLOUT_POLICY, ns, policy_for(target, ns, stages, bake=bake, deadline=deadline,
                                                        gate_last=i == gated,
                                                        checks=(checks or {}).get(target)))
            for i, (target, ns, stages, bake, deadline) in enumerate(planned)]
