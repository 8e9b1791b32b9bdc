"""The controller's shipped RBAC (overlays/controller/) is exactly what it uses: derived from the
embedded API server's request log while the in-cluster controller (with leader election) runs every
check and hook a RolloutPolicy can name on served pods: the smoke check (each of its sub-checks:
discovery, the leader's Service, placement on its node, the endpoint checks, the P/D hand-off of a
pair), an http and a command check, an analysis (the smoke provider) and notifications (the webhook's
Secret, through the per-namespace Role of overlays/controller/notifications) — while it rolls an LWS,
rolls back a bad one, rolls a P/D pair and a DisaggregatedSet. pdProbe's and blue-green's opt-in
roles are derived by tests/rollout/integration/test_incluster_pd_probe.py and test_bluegreen_incluster.py."""

from __future__ import annotations

import base64
import threading
from pathlib import Path

from lwsflow.cli.controller import _analysis, _smoke
from lwsflow.controller.api import labels as L
from lwsflow.controller.api.paths import repo_root
from lwsflow.controller.incluster.leader import LeaderElector
from lwsflow.controller.incluster.manager import Controller
from lwsflow.controller.incluster.notify import Notifier
from lwsflow.controller.kube.client import Kube
from lwsflow.controller.kube.resources import DS, LWS, ROLLOUT_POLICY, SECRET
from lwsflow.controller.rollout import session
from lwsflow.controller.yamlio import load_yaml_documents
from lwsflow.sim.apiserver import ApiServer
from reliability.http_sink import Sink
from reliability.incluster_env import policy, running, sync, wait_policy
from reliability.ports import ReservedPort
from reliability.rollout_env import NS, SPEED, TOKEN, Env, ds_manifest, new_release
from tests.rollout.rbac_kit import ANALYSIS, every_check, served, service_for, serving

# the stand-in engines' port: from the kernel, held while this test process runs (reliability/ports.py)
_ENGINE_PORT = ReservedPort()
__all__ = ["served"]  # the fixture, from rbac_kit

OVERLAY = repo_root() / "overlays" / "controller"


def granted(*files: Path) -> set[tuple[str, str, str]]:
    out = set()
    for path in files:
        for doc in load_yaml_documents(path):
            for rule in doc["rules"]:
                assert "*" not in rule["apiGroups"] + rule["resources"] + rule["verbs"], rule
                for g in rule["apiGroups"]:
                    for r in rule["resources"]:
                        for v in rule["verbs"]:
                            out.add((g, r, v))
    return out


def shipped() -> set[tuple[str, str, str]]:
    """The base roles (cluster-wide and the Lease's) and the per-namespace notifications Role."""
    return granted(OVERLAY / "clusterrole.yaml", OVERLAY / "role.yaml",
                   OVERLAY / "notifications" / "role.yaml")


def test_controller_rbac_matches_what_it_uses(served: Env, tmp_path: Path) -> None:
    env = served
    # the MaxUnavailableStatefulSet gate on (off by default in Kubernetes 1.35/1.36): only then does a
    # StatefulSet leave a pod of the bad revision stuck, so the controller's forced recreate (pods
    # delete) is used
    env.cluster.config.max_unavailable_statefulset = True
    port = _ENGINE_PORT.port
    env.create_ready(serving("ok", port, replicas=2, partition=2))
    service_for(env, "ok", port)
    env.create_ready(serving("bad", port, replicas=2, partition=2))
    for role, n in (("prefill", 2), ("decode", 1)):
        doc = serving(f"c-{role}", port, replicas=n, partition=n, labels={L.PD_PAIR: "c", L.ROLE: role})
        # the role on the pods too: each engine serves its role, so the pair's smoke hands KV off
        doc["spec"]["leaderWorkerTemplate"]["workerTemplate"]["metadata"]["labels"] = {L.ROLE: role}
        env.create_ready(doc)
    env.create_ready(ds_manifest("dis"))
    sink = Sink()
    env.kube.create(SECRET, NS, {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "hook"},
                                 "data": {"url": base64.b64encode(f"{sink.url}/hook".encode()).decode()}})
    hooks = {"webhooks": [{"secretKeyRef": {"name": "hook", "key": "url"}}]}
    checked = [{"groups": 1, "checks": every_check(sink.url)}, {"groups": "100%"}]
    for name, target, kind, stages, extra in (
            ("ok", "ok", "LeaderWorkerSet", checked, {"analysis": ANALYSIS}),
            ("bad", "bad", "LeaderWorkerSet", [{"groups": 1}, {"groups": "100%"}], {}),
            ("c", "c", "LeaderWorkerSetPair", checked, {}),
            ("dis", "dis", "DisaggregatedSet", [{"groups": "100%", "checks": [{"smoke": {}}]}], {})):
        # "bad" fails its 2m deadline on purpose; the others must not fail theirs on a loaded machine
        # (2m of cluster time is 0.6 wall s at 200x), so they get 10m
        p = policy(name, target, stages, progressDeadline="2m" if name == "bad" else "10m",
                   notifications=hooks, **extra)
        p["spec"]["targetRef"]["kind"] = kind
        env.kube.create(ROLLOUT_POLICY, NS, p)
    api = ApiServer(env.cluster.store, token=TOKEN, clock=env.cluster.now, speed=SPEED)
    api.start()
    api._httpd.RequestHandlerClass.disable_nagle_algorithm = True  # see rollout_env.make_env
    kcfg = api.write_kubeconfig(tmp_path / "controller.kubeconfig")
    kube = Kube.connect(str(kcfg))
    leader = LeaderElector(kube, NS, "lwsflow-controller", "me", lease_duration_s=3, renew_deadline_s=2,
                           retry_period_s=0.5)
    threading.Thread(target=leader.run, daemon=True).start()
    notifier = Notifier(kube, attempts=1)
    # the checks and hooks as `lwsflow controller run` wires them (the smoke test, the analysis)
    ctl = Controller(kube, session.clock_for(kube), namespace=NS, leader=leader, notifier=notifier,
                     smoke=_smoke(str(kcfg)), analysis=_analysis(kube, str(kcfg), None, None), resync_s=0.5)
    try:
        with running(ctl):
            for name in ("ok", "bad", "c", "dis"):
                wait_policy(env, name, lambda s: bool(s.get("stableRevision")))
            sync(env, "ok", "vllm:2")
            sync(env, "bad", "vllm:bad", **{"sim.lwsflow.io/never-ready": "true"})
            for role in ("prefill", "decode"):
                sync(env, f"c-{role}", "vllm:2")
            env.kube.merge_patch(DS, NS, "dis", {"spec": new_release(env.kube.get(DS, NS, "dis"))["spec"]})
            ended = ("Succeeded", "RolledBack", "Failed")
            done = {name: wait_policy(env, name, lambda s: s.get("phase") in ended, timeout=120)["status"]
                    for name in ("ok", "bad", "c", "dis")}
            # every announced outcome posted (or given up) before the API server and sink go away
            assert notifier.drain(60), "notifications still queued after 60 s"
    finally:
        leader.stop(release=True)
        api.stop()
        sink.close()
    assert {n: s["phase"] for n, s in done.items()} == {"ok": "Succeeded", "bad": "RolledBack",
                                                        "c": "Succeeded", "dis": "Succeeded"}, done
    assert env.kube.get(LWS, NS, "ok")
    assert notifier.sent and not notifier.failed and sink.posts
    used = {(g, r, v) for g, r, v in api.verbs_used() if not r.startswith("/")}
    # Kueue's quota reads (a target with its queue label): derived by test_quota_kueue.py, on Kueue's CRDs
    want = {t for t in shipped() if t[0] != "kueue.x-k8s.io"}
    assert used == want, f"used but not granted: {used - want}; granted, unused: {want - used}"
    # the Secrets the notifications read are in the policies' namespace only (a Role there suffices)
    secret_reads = [r for r in api.request_log if r[2] == "secrets"]
    assert secret_reads and all(r[4] == NS for r in secret_reads), secret_reads


def test_no_cluster_wide_role_reads_secrets() -> None:
    """Issue 36.3: Secrets are read only through the namespaced notifications Role (bound per namespace
    where policies notify), never through a ClusterRole of any overlay."""
    for path in sorted((repo_root() / "overlays").rglob("*.yaml")):
        for doc in load_yaml_documents(path):
            if isinstance(doc, dict) and doc.get("kind") == "ClusterRole":
                assert not [r for r in doc["rules"] if "secrets" in r["resources"]], path
    [role] = load_yaml_documents(OVERLAY / "notifications" / "role.yaml")
    assert role["kind"] == "Role" and "namespace" not in role["metadata"]  # `-n` decides where
    assert granted(OVERLAY / "notifications" / "role.yaml") == {("", "secrets", "get")}


def test_overlay_builds_with_every_file() -> None:
    """``kubectl kustomize overlays/controller``: CRD, 2 replicas, PDB, SA, RBAC, metrics Service."""
    import subprocess

    import yaml

    doc = load_yaml_documents(OVERLAY / "kustomization.yaml")[0]
    assert sorted(doc["resources"]) == sorted(p.name for p in OVERLAY.glob("*.yaml")
                                              if p.name != "kustomization.yaml")
    kubectl = repo_root() / ".venv" / "bin" / "kubectl"
    out = subprocess.run([str(kubectl), "kustomize", str(OVERLAY)], capture_output=True, text=True,
                         timeout=60, check=True).stdout
    objs = {(o["kind"], o["metadata"]["name"]): o for o in yaml.safe_load_all(out)}
    dep = objs[("Deployment", "lwsflow-controller")]
    assert dep["spec"]["replicas"] == 2
    args = dep["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--leader-elect" in args and "--metrics-addr=127.0.0.1:8080" in args
    assert objs[("PodDisruptionBudget", "lwsflow-controller")]["spec"]["minAvailable"] == 1
    assert ("CustomResourceDefinition", "rolloutpolicies.lwsflow.io") in objs
    assert ("Service", "lwsflow-controller-metrics") in objs
    assert ("Namespace", "lwsflow-system") in objs  # a fresh cluster needs no `kubectl create namespace`
    cluster_scoped = ("CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding", "Namespace")
    namespaces = {o["metadata"].get("namespace") for k, o in objs.items() if k[0] not in cluster_scoped}
    assert namespaces == {"lwsflow-system"}
