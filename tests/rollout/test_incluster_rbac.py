"""The controller's shipped RBAC (overlays/controller/) is exactly what it uses: derived from the
embedded API server's request log while the in-cluster controller (with leader election and
notifications) rolls an LWS, rolls back a bad one, rolls a P/D pair and a DisaggregatedSet."""

from __future__ import annotations

import base64
import threading
from pathlib import Path

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
from reliability.incluster_env import policy, running, sync, wait_policy
from reliability.rollout_env import NS, SPEED, TOKEN, Env, ds_manifest, lws_manifest, new_release

OVERLAY = repo_root() / "overlays" / "controller"
GPU_ONLY = {("", "nodes", "list")}


def shipped() -> set[tuple[str, str, str]]:
    out = set()
    for name in ("clusterrole.yaml", "role.yaml"):
        for doc in load_yaml_documents(OVERLAY / name):
            for rule in doc["rules"]:
                assert "*" not in rule["apiGroups"] + rule["resources"] + rule["verbs"], rule
                for g in rule["apiGroups"]:
                    for r in rule["resources"]:
                        for v in rule["verbs"]:
                            out.add((g, r, v))
    return out


def test_controller_rbac_matches_what_it_uses(env: Env, tmp_path: Path) -> None:
    # the MaxUnavailableStatefulSet gate on (off by default in Kubernetes 1.35/1.36): only then does a
    # StatefulSet leave a pod of the bad revision stuck, so the controller's forced recreate (pods
    # delete) is used
    env.cluster.config.max_unavailable_statefulset = True
    env.create_ready(lws_manifest("ok", replicas=2, partition=2))
    env.create_ready(lws_manifest("bad", replicas=2, partition=2))
    for role, n in (("prefill", 2), ("decode", 1)):
        env.create_ready(lws_manifest(f"c-{role}", replicas=n, partition=n,
                                      labels={L.PD_PAIR: "c", L.ROLE: role}))
    env.create_ready(ds_manifest("dis"))
    env.kube.create(SECRET, NS, {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "hook"},
                                 "data": {"url": base64.b64encode(b"http://127.0.0.1:9/x").decode()}})
    hooks = {"webhooks": [{"secretKeyRef": {"name": "hook", "key": "url"}}]}
    two = [{"groups": 1}, {"groups": "100%"}]
    for name, target, kind, stages in (("ok", "ok", "LeaderWorkerSet", two),
                                       ("bad", "bad", "LeaderWorkerSet", two),
                                       ("c", "c", "LeaderWorkerSetPair", two),
                                       ("dis", "dis", "DisaggregatedSet", [{"groups": "100%"}])):
        # "bad" fails its 2m deadline on purpose; the others must not fail theirs on a loaded machine
        # (2m of cluster time is 0.6 wall s at 200x), so they get 10m
        p = policy(name, target, stages, progressDeadline="2m" if name == "bad" else "10m",
                   notifications=hooks)
        p["spec"]["targetRef"]["kind"] = kind
        env.kube.create(ROLLOUT_POLICY, NS, p)
    api = ApiServer(env.cluster.store, token=TOKEN, clock=env.cluster.now, speed=SPEED)
    api.start()
    api._httpd.RequestHandlerClass.disable_nagle_algorithm = True  # see rollout_env.make_env
    kube = Kube.connect(str(api.write_kubeconfig(tmp_path / "controller.kubeconfig")))
    leader = LeaderElector(kube, NS, "lwsflow-controller", "me", lease_duration_s=3, renew_deadline_s=2,
                           retry_period_s=0.5)
    threading.Thread(target=leader.run, daemon=True).start()
    notifier = Notifier(kube, attempts=1)
    ctl = Controller(kube, session.clock_for(kube), namespace=NS, leader=leader, notifier=notifier,
                     resync_s=0.5)
    with running(ctl):
        for name in ("ok", "bad", "c", "dis"):
            wait_policy(env, name, lambda s: bool(s.get("stableRevision")))
        sync(env, "ok", "vllm:2")
        sync(env, "bad", "vllm:bad", **{"sim.lwsflow.io/never-ready": "true"})
        for role in ("prefill", "decode"):
            sync(env, f"c-{role}", "vllm:2")
        env.kube.merge_patch(DS, NS, "dis", {"spec": new_release(env.kube.get(DS, NS, "dis"))["spec"]})
        wait_policy(env, "ok", lambda s: s.get("phase") == "Succeeded", timeout=90)
        wait_policy(env, "bad", lambda s: s.get("phase") == "RolledBack", timeout=90)
        wait_policy(env, "c", lambda s: s.get("phase") == "Succeeded", timeout=90)
        wait_policy(env, "dis", lambda s: s.get("phase") == "Succeeded", timeout=90)
        _wait_sent(notifier)
    leader.stop(release=True)
    api.stop()
    assert env.kube.get(LWS, NS, "ok")
    used = {(g, r, v) for g, r, v in api.verbs_used() if not r.startswith("/")}
    # the capacity check lists nodes only for a template that asks for GPUs (none here; the refused
    # surge of test_incluster_lifecycle.py runs it): granted, and the only verb this run may not use
    used |= GPU_ONLY & shipped()
    assert used == shipped(), f"used but not granted: {used - shipped()}; granted, unused: {shipped() - used}"


def _wait_sent(n: Notifier) -> None:
    for _ in range(200):
        if n.failed or n.sent:
            return
        threading.Event().wait(0.05)


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
