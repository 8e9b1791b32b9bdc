"""What check 4's scenarios share: the shipped ServiceAccount's token on either cluster, small LWS and
DS manifests, the `lwsflow rollout` CLI, and a ``kubectl get -w`` that records every object it sees
(the observer holds the admin kubeconfig; the controller only the ServiceAccount's token)."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import clusters
import yaml
from clusters import Target

from lwsflow.controller.api import labels as L
from lwsflow.sim.kubeconfig import write_kubeconfig

REPO = Path(__file__).resolve().parents[2]
SA_NS, SA = "lwsflow-system", "lwsflow-rollout"
LWSFLOW = str(Path(sys.executable).with_name("lwsflow"))


def sa_kubeconfig(target: Target, path: Path) -> Path:
    """A kubeconfig holding only a TokenRequest token of the shipped ``overlays/rbac`` ServiceAccount
    (applied first if missing). The embedded cluster's tokens expire in its fast clock, so they get a
    year of cluster time; the reference cluster's an hour."""
    if target.kubectl("get", "namespace", SA_NS, check=False).returncode != 0:
        target.kubectl("create", "namespace", SA_NS)
    if target.kubectl("get", "serviceaccount", SA, "-n", SA_NS, check=False).returncode != 0:
        target.kubectl("apply", "-k", str(REPO / "overlays" / "rbac"))
    duration = "8760h" if target.name == "embedded" else "1h"
    token = target.kubectl("create", "token", SA, "-n", SA_NS, "--duration", duration).stdout.strip()
    admin = yaml.safe_load(target.kubeconfig.read_text())
    cluster = admin["clusters"][0]["cluster"]
    ca = cluster.get("certificate-authority-data")
    return write_kubeconfig(path, cluster["server"], token, SA,
                            ca_pem=base64.b64decode(ca) if ca else None)


def lws(name: str, image: str, replicas: int = 4, size: int = 2,
        labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"apiVersion": L.LWS_API_VERSION, "kind": L.LWS_KIND,
            "metadata": {"name": name, "labels": dict(labels or {})},
            "spec": {"replicas": replicas,
                     "rolloutStrategy": {"type": "RollingUpdate",
                                         "rollingUpdateConfiguration": {"maxSurge": 0, "maxUnavailable": 1}},
                     "leaderWorkerTemplate": {"size": size, "workerTemplate": {"spec": {"containers": [
                         {"name": "engine", "image": image}]}}}}}


def pair(name: str, image: str, prefill: int = 4, decode: int = 2) -> list[dict[str, Any]]:
    """The two LWS of a P/D pair as ``pdMode: lws-pair`` renders them (pair and role labels)."""
    return [lws(f"{name}-{role}", image, reps, labels={L.PD_PAIR: name, L.ROLE: role})
            for role, reps in (("prefill", prefill), ("decode", decode))]


def ds(name: str, image: str, prefill: int = 2, decode: int = 1) -> dict[str, Any]:
    """A two-role DisaggregatedSet without rollout budgets (the DS planner's maxSurge 1, maxUnavailable 0)."""
    def role(rname: str, replicas: int) -> dict[str, Any]:
        return {"name": rname, "spec": {"replicas": replicas, "leaderWorkerTemplate": {
            "size": 2, "workerTemplate": {"spec": {"containers": [{"name": "engine", "image": image}]}}}}}
    return {"apiVersion": L.DS_API_VERSION, "kind": L.DS_KIND, "metadata": {"name": name},
            "spec": {"roles": [role("prefill", prefill), role("decode", decode)]}}


def status(obj: dict[str, Any]) -> dict[str, Any]:
    return dict(obj.get("status") or {})


def partition(obj: dict[str, Any]) -> int:
    ruc = ((obj.get("spec") or {}).get("rolloutStrategy") or {}).get("rollingUpdateConfiguration") or {}
    return int(ruc.get("partition") or 0)


def image(obj: dict[str, Any]) -> str:
    return str(obj["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]["image"])


def get(target: Target, resource: str, ns: str, name: str) -> dict[str, Any]:
    return dict(json.loads(target.kubectl("get", resource, name, "-n", ns, "-o", "json").stdout))


def equal(target: Target, ns: str, name: str, replicas: int, want_image: str | None = None) -> bool:
    """The full equality ``spec.replicas == replicas == ready == updated`` (lws-semantics §c)."""
    obj = get(target, "lws", ns, name)
    st = status(obj)
    ok = obj["spec"]["replicas"] == st.get("replicas") == st.get("readyReplicas") == \
        st.get("updatedReplicas") == replicas
    return ok and (want_image is None or image(obj) == want_image)


def pod_images(target: Target, ns: str) -> set[str]:
    return {c["image"] for p in target.items("pods", ns) for c in p["spec"]["containers"]}


def apply(target: Target, ns: str, docs: list[dict[str, Any]]) -> None:
    from lwsflow.controller.yamlio import dump_yaml

    target.kubectl("apply", "--server-side", "-n", ns, "-f", "-",
                   stdin="---\n".join(dump_yaml(d) for d in docs))


def rollout(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """``lwsflow rollout ARGS`` to its end."""
    return subprocess.run([LWSFLOW, "rollout", *args], capture_output=True, text=True, timeout=timeout,
                          check=False, env={**os.environ, "PYTHONUNBUFFERED": "1"})


def steps(stdout: str) -> list[str]:
    """The step lines the CLI prints (``decode:stage-1-partition``), in order."""
    return [ln.strip() for ln in stdout.splitlines() if ln.startswith("  ") and not ln.startswith("   ")]


class Watch(clusters.Watch):
    """``kubectl get RESOURCE [NAME] -n NS [-l SELECTOR] -w --output-watch-events -o json`` in the
    background (``clusters.Watch``): every event it observes (ADDED, MODIFIED, DELETED), with the wall
    time it arrived."""

    def __init__(self, t: Target, resource: str, ns: str, *, selector: str = "", name: str = "") -> None:
        super().__init__(t, resource, *([name] if name else []), "-n", ns,
                         *(["-l", selector] if selector else []), events=True)

    @property
    def events(self) -> list[tuple[float, str, dict[str, Any]]]:
        """(arrival time, event type, object) so far; the reader appends a time before its event."""
        objs = list(self.objects)
        return [(t, str(e.get("type")), e["object"]) for t, e in zip(self.times, objs, strict=False)]

    def seen(self) -> list[dict[str, Any]]:
        """Every object observed, in order (a deleted one as it was last)."""
        return [o for _t, _e, o in self.events]

    def typed(self) -> list[tuple[str, dict[str, Any]]]:
        return [(e, o) for _t, e, o in self.events]

    def since(self, t0: float) -> list[dict[str, Any]]:
        return [o for t, _e, o in self.events if t >= t0]

    def stop(self) -> list[dict[str, Any]]:  # type: ignore[override]
        super().stop()
        return self.seen()


def ready_series(objects: list[dict[str, Any]], name: str) -> list[int]:
    """``status.readyReplicas`` of ``name`` at every observation once it was first fully ready."""
    out: list[int] = []
    for o in objects:
        if o["metadata"]["name"] != name:
            continue
        ready = int(status(o).get("readyReplicas") or 0)
        if out or ready == o["spec"]["replicas"]:
            out.append(ready)
    return out


# -- the in-cluster controller (test_controller.py) -----------------------------------------------------
CONTROLLER_SA = "lwsflow-controller"


def controller_kubeconfig(target: Target, path: Path) -> Path:
    """``kubectl apply -k overlays/controller`` (CRD, namespace, ServiceAccount, RBAC) and a kubeconfig
    holding only a ``kubectl create token`` token of its ServiceAccount, as docs/controller.md says."""
    target.kubectl("apply", "-k", str(REPO / "overlays" / "controller"), timeout=120)
    clusters.wait_for("RolloutPolicy CRD established", lambda: "True" in target.kubectl(
        "get", "crd", "rolloutpolicies.lwsflow.io", "-o",
        "jsonpath={.status.conditions[?(@.type=='Established')].status}").stdout, timeout=60)
    duration = "8760h" if target.name == "embedded" else "1h"
    token = target.kubectl("create", "token", CONTROLLER_SA, "-n", SA_NS,
                           "--duration", duration).stdout.strip()
    admin = yaml.safe_load(target.kubeconfig.read_text())
    cluster = admin["clusters"][0]["cluster"]
    ca = cluster.get("certificate-authority-data")
    return write_kubeconfig(path, cluster["server"], token, CONTROLLER_SA,
                            ca_pem=base64.b64decode(ca) if ca else None)


def start_controller(kubeconfig: Path, ns: str, log: Path) -> subprocess.Popen[bytes]:
    """``lwsflow controller run`` as the shipped Deployment runs it (leader election on the Lease in
    lwsflow-system, the Role of overlays/controller), watching ``ns``, with only ``kubeconfig``."""
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    env.update(LWSFLOW_LOG="text", PYTHONUNBUFFERED="1")
    with log.open("ab") as sink:
        return subprocess.Popen(
            [LWSFLOW, "controller", "run", "-n", ns, "--leader-elect", f"--lease-namespace={SA_NS}",
             "--lease-duration=4s", "--metrics-addr=127.0.0.1:0", "--health-addr=127.0.0.1:0",
             f"--kubeconfig={kubeconfig}"], stdout=sink, stderr=subprocess.STDOUT, env=env)


def rollout_policy(name: str, kind: str, target: str, stages: list[dict[str, Any]],
                   **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "lwsflow.io/v1alpha1", "kind": "RolloutPolicy", "metadata": {"name": name},
            "spec": {"targetRef": {"kind": kind, "name": target}, "stages": stages, **spec}}


def gitops_sync(target: Target, ns: str, name: str, new_image: str) -> None:
    """What Argo CD does with a new overlay (``ignoreDifferences`` on the partition): the new template
    with the partition frozen at ``replicas``, so nothing moves until the controller stages it."""
    obj = get(target, "lws", ns, name)
    tmpl = obj["spec"]["leaderWorkerTemplate"]
    tmpl["workerTemplate"]["spec"]["containers"][0]["image"] = new_image
    patch = {"spec": {"leaderWorkerTemplate": tmpl, "rolloutStrategy": {
        "rollingUpdateConfiguration": {"partition": obj["spec"]["replicas"]}}}}
    target.kubectl("patch", "lws", name, "-n", ns, "--type", "merge", "-p", json.dumps(patch))


def policy_status(target: Target, ns: str, name: str) -> dict[str, Any]:
    return status(get(target, "rolloutpolicy", ns, name))
