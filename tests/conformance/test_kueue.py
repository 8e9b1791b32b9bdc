"""Quota-aware rollouts against a real Kueue (issue 33): the reference cluster started with ``--kueue``
(Kueue v0.17.0's manager, built from the pinned module, its CRDs and webhooks, the LeaderWorkerSet
integration on), an LWS labelled for a LocalQueue, and ``lwsflow rollout`` under the shipped RBAC.

What is checked against Kueue itself, not against quota objects a test wrote:
- Kueue gates a queue-labelled LWS's pods and admits its groups one Workload each, and its
  ClusterQueue reports the reserved quota lwsflow reads (``status.flavorsReservation``);
- a staged surge Kueue gives no Workload (1 updated + 1 surge = 2 groups at stage 1): Kueue leaves
  the surge pod gated, and lwsflow refuses such a rollout before any write (or rolls it in place);
- with no quota for a surge group, lwsflow refuses before any write (exit 2, the LWS untouched), and
  ``--on-quota-shortage inPlace`` completes with no surge group ever created;
- a GPU request change is refused by lwsflow naming the field, and Kueue's own webhook refuses the
  same change (a server-side dry run), and what the webhook takes lwsflow rolls: the rule is Kueue's;
- a group Kueue preempts mid-rollout (a higher-priority LWS takes its quota) pauses the rollout with
  QuotaBlocked instead of rolling it back, and resume finishes once the quota is back.
- a DisaggregatedSet whose roles carry the queue label: its child LWS carry it, Kueue admits their
  groups, and ``lwsflow rollout ds/d`` plans each role's surge against the quota and finishes.

Not here, because it does not finish on this cluster: a surge that the quota admits. With pods Ready
1 s after they start, the LWS controller replaces every old group while the surge group waits for
admission, and Kueue drops the surge Workload unadmitted once ``updatedReplicas`` reaches
``replicas``: the surge pod stays gated for good (docs/rollout.md, "Kueue quota").
"""

from __future__ import annotations

import contextlib
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from clusters import Target, Watch, settle, wait_for
from rolloutkit import LWSFLOW, sa_kubeconfig

from lwsflow.controller.api import labels as L

GPU = L.GPU_RESOURCE
KUEUE_API = "kueue.x-k8s.io/v1beta2"


@contextlib.contextmanager
def _kueue_cluster(folder: Path) -> Iterator[Target]:
    """A reference cluster of its own with Kueue (its pod webhooks see every pod: kept apart from the
    session's cluster, whose differential they would change)."""
    from lwsflow.rehearsal.refcluster import launcher

    state = folder / "state"
    kubeconfig = launcher.up(launcher.UpOptions(state_dir=state, ready_delay_s=1.0, kueue=True))
    try:
        yield Target("reference+kueue", kubeconfig, state / "kcache")
    finally:
        launcher.down(state)


@pytest.fixture(scope="module")
def kueue_ref(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    with _kueue_cluster(tmp_path_factory.mktemp("refcluster-kueue")) as t:
        yield t


def _quota_objects(ns: str, nominal: int) -> str:
    docs = [
        {"apiVersion": KUEUE_API, "kind": "ResourceFlavor", "metadata": {"name": "h100"}, "spec": {}},
        {"apiVersion": KUEUE_API, "kind": "ClusterQueue", "metadata": {"name": f"serving-{ns}"},
         "spec": {"namespaceSelector": {}, "resourceGroups": [
             {"coveredResources": [GPU], "flavors": [{"name": "h100", "resources": [
                 {"name": GPU, "nominalQuota": nominal}]}]}]}},
        {"apiVersion": KUEUE_API, "kind": "LocalQueue", "metadata": {"name": "serving", "namespace": ns},
         "spec": {"clusterQueue": f"serving-{ns}"}},
    ]
    return "".join(f"---\n{yaml.safe_dump(d)}" for d in docs)


def _lws(image: str, gpus: int = 8, *, requests: bool = False, replicas: int = 2,
         surge: int = 1) -> dict[str, Any]:
    """``replicas`` groups of one 8-GPU pod, ``surge`` surge groups (each needs 8 GPUs of fresh quota;
    none: one group down at a time). The GPUs as limits (requests default to them), with ``requests``
    written as requests too."""
    res: dict[str, Any] = {"limits": {GPU: gpus}, **({"requests": {GPU: gpus}} if requests else {})}
    pod = {"tolerations": [{"key": GPU, "operator": "Exists", "effect": "NoSchedule"}],
           "containers": [{"name": "engine", "image": image, "resources": res}]}
    budget = {"maxSurge": surge, "maxUnavailable": 0 if surge else 1}
    return {"apiVersion": L.LWS_API_VERSION, "kind": L.LWS_KIND,
            "metadata": {"name": "q", "labels": {L.KUEUE_QUEUE: "serving"}},
            "spec": {"replicas": replicas,
                     "rolloutStrategy": {"type": "RollingUpdate", "rollingUpdateConfiguration": budget},
                     "leaderWorkerTemplate": {"size": 1, "workerTemplate": {"spec": pod}}}}


def _ready(t: Target, ns: str) -> bool:
    obj = json.loads(t.kubectl("get", "lws", "q", "-n", ns, "-o", "json").stdout)
    s, want = obj.get("status") or {}, obj["spec"]["replicas"]
    return s.get("readyReplicas") == want == s.get("replicas") == s.get("updatedReplicas")


def _setup(t: Target, nominal: int, replicas: int = 2) -> str:
    ns = t.namespace("kueue")
    t.kubectl("apply", "-f", "-", stdin=_quota_objects(ns, nominal))
    t.kubectl("apply", "-n", ns, "-f", "-", stdin=json.dumps(_lws("vllm:1", replicas=replicas)))
    wait_for("q Ready under Kueue", lambda: _ready(t, ns), timeout=120)
    return ns


def _reserved(t: Target, ns: str) -> int:
    cq = json.loads(t.kubectl("get", "clusterqueue", f"serving-{ns}", "-o", "json").stdout)
    return sum(int(r.get("total") or 0) for fl in (cq.get("status") or {}).get("flavorsReservation") or []
               for r in fl.get("resources") or [] if r["name"] == GPU)


def _rollout(t: Target, kcfg: Path, ns: str, manifest: dict[str, Any], tmp: Path,
             *extra: str, stages: str = "100%") -> subprocess.CompletedProcess[str]:
    """``lwsflow rollout``; one stage unless told: Kueue's plain surge (a staged one is refused)."""
    mf = tmp / "q.yaml"
    mf.write_text(yaml.safe_dump(manifest))
    return subprocess.run([LWSFLOW, "rollout", "lws/q", "-n", ns, "--kubeconfig", str(kcfg), "--manifest",
                           str(mf), "--stages", stages, "--deadline", "5m", *extra],
                          capture_output=True, text=True, timeout=400, check=False)


def _workload_names(t: Target, ns: str) -> set[str]:
    return {w["metadata"]["name"] for w in t.items("workloads.kueue.x-k8s.io", ns)}


def _watched(t: Target, ns: str) -> tuple[Watch, Watch]:
    """Watches of the namespace's Workloads and of q's pods: what existed, even briefly, during a
    rollout (a surge group's Workload and pods are deleted once it is done)."""
    return (Watch(t, "workloads.kueue.x-k8s.io", "-n", ns),
            Watch(t, "pods", "-n", ns, "-l", f"{L.NAME}=q"))


def _surge_pods(pods: list[dict[str, Any]], replicas: int = 2) -> set[str]:
    """Pods of a group index beyond q's replicas: surge groups."""
    return {p["metadata"]["name"] for p in pods if int(p["metadata"]["labels"][L.GROUP_INDEX]) >= replicas}


def test_kueue_gates_and_admits_each_group_and_reports_the_reservation(kueue_ref: Target) -> None:
    ns = _setup(kueue_ref, nominal=24)
    workloads = kueue_ref.items("workloads.kueue.x-k8s.io", ns)
    assert len(workloads) == 2, [w["metadata"]["name"] for w in workloads]  # one per group
    assert all((w.get("status") or {}).get("admission") for w in workloads)
    assert _reserved(kueue_ref, ns) == 16  # what lwsflow's free-quota arithmetic reads


def test_a_staged_surge_kueue_gives_no_workload_is_refused_before_any_write(kueue_ref: Target,
                                                                            tmp_path: Path) -> None:
    """2 groups, stages 1,100%, maxSurge 1, quota to spare: at stage 1 the LWS reports 1 updated
    group plus the surge = 2 = replicas, and Kueue v0.17 makes no Workload for the surge group (the
    next test); lwsflow refuses it before any write, and rolls it with no surge under inPlace."""
    ns = _setup(kueue_ref, nominal=64)
    kcfg = sa_kubeconfig(kueue_ref, tmp_path / "sa.kubeconfig")
    rv = json.loads(kueue_ref.kubectl("get", "lws", "q", "-n", ns, "-o", "json").stdout)["metadata"][
        "resourceVersion"]
    out = _rollout(kueue_ref, kcfg, ns, _lws("vllm:2"), tmp_path, stages="1,100%")
    assert out.returncode == 2, out.stdout + out.stderr
    (line,) = out.stderr.strip().splitlines()
    assert line.startswith("error: maxSurge: ") and "lower maxSurge to 0" in line, line
    live = json.loads(kueue_ref.kubectl("get", "lws", "q", "-n", ns, "-o", "json").stdout)
    assert live["metadata"]["resourceVersion"] == rv  # nothing written
    pods = Watch(kueue_ref, "pods", "-n", ns, "-l", f"{L.NAME}=q")
    out = _rollout(kueue_ref, kcfg, ns, _lws("vllm:2"), tmp_path, "--on-quota-shortage", "inPlace",
                   stages="1,100%")
    assert out.returncode == 0, out.stdout + out.stderr
    assert not _surge_pods(pods.stop()) and _ready(kueue_ref, ns)


def test_kueue_gives_a_staged_surge_no_workload(kueue_ref: Target) -> None:
    """What the refusal above prevents, on real Kueue: the LWS moved to stage 1 of 2 groups by hand
    (partition 1, maxSurge 1): the surge group's pod stays gated with no Workload while the quota has
    room for it."""
    ns = _setup(kueue_ref, nominal=64)
    doc = _lws("vllm:2")
    doc["spec"]["rolloutStrategy"]["rollingUpdateConfiguration"]["partition"] = 1
    kueue_ref.kubectl("apply", "-n", ns, "-f", "-", stdin=json.dumps(doc))

    def surge_pod_gated() -> bool:
        pods = [p for p in kueue_ref.items("pods", ns) if p["metadata"]["name"] == "q-2"]
        return bool(pods) and bool(pods[0]["spec"].get("schedulingGates"))

    def counts() -> tuple[int, int]:
        st = json.loads(kueue_ref.kubectl("get", "lws", "q", "-n", ns, "-o", "json").stdout)["status"]
        return int(st.get("replicas") or 0), int(st.get("updatedReplicas") or 0)

    wait_for("the surge group's pod, gated", surge_pod_gated, timeout=60)
    # held for 20 s, while Kueue's reconciler requeues "prebuilt workload not found" every few seconds
    seen = settle("the surge group, gated with no Workload",
                  lambda: (surge_pod_gated(), sorted(_workload_names(kueue_ref, ns)), counts()), stable_s=20)
    # 3 groups (one surge), 2 of them updated (group 1 and the surge) = spec.replicas: no Workload
    assert seen[0] and len(seen[1]) == 2 and seen[2] == (3, 2), seen


def test_no_quota_for_a_surge_is_refused_before_any_write_then_rolled_in_place(kueue_ref: Target,
                                                                               tmp_path: Path) -> None:
    ns = _setup(kueue_ref, nominal=32, replicas=4)  # q's 4 groups hold all of it
    kcfg = sa_kubeconfig(kueue_ref, tmp_path / "sa.kubeconfig")
    rv = json.loads(kueue_ref.kubectl("get", "lws", "q", "-n", ns, "-o", "json").stdout)["metadata"][
        "resourceVersion"]
    out = _rollout(kueue_ref, kcfg, ns, _lws("vllm:2", replicas=4), tmp_path)
    assert out.returncode == 2, out.stdout + out.stderr
    (line,) = out.stderr.strip().splitlines()
    assert "maxSurge" in line and "NOT admitted (0 would be)" in line and "reserved 32 = 0 free" in line, line
    live = json.loads(kueue_ref.kubectl("get", "lws", "q", "-n", ns, "-o", "json").stdout)
    assert live["metadata"]["resourceVersion"] == rv  # nothing written
    before = _workload_names(kueue_ref, ns)
    workloads, pods = _watched(kueue_ref, ns)
    out = _rollout(kueue_ref, kcfg, ns, _lws("vllm:2", replicas=4), tmp_path,
                   "--on-quota-shortage", "inPlace")
    seen_workloads, seen_pods = workloads.stop(), pods.stop()
    assert out.returncode == 0, out.stdout + out.stderr
    assert "onShortage inPlace: rolling with the surge the quota admits" in out.stdout, out.stdout
    assert _ready(kueue_ref, ns)
    # no surge group, and each group index kept its Workload (no fresh quota needed)
    assert not _surge_pods(seen_pods, 4)
    assert {w["metadata"]["name"] for w in seen_workloads} == before
    assert _reserved(kueue_ref, ns) == 32


def test_gpu_request_change_is_refused_by_lwsflow_as_kueues_webhook_refuses_it(kueue_ref: Target,
                                                                             tmp_path: Path) -> None:
    ns = _setup(kueue_ref, nominal=64, replicas=4)  # quota to spare: the refusal is the webhook's rule
    kcfg = sa_kubeconfig(kueue_ref, tmp_path / "sa.kubeconfig")

    def webhook_takes(doc: dict[str, Any]) -> subprocess.CompletedProcess[str]:
        return kueue_ref.kubectl("apply", "-n", ns, "--dry-run=server", "-f", "-", stdin=json.dumps(doc),
                                 check=False)

    changed = _lws("vllm:2", gpus=4, requests=True, replicas=4, surge=0)
    out = _rollout(kueue_ref, kcfg, ns, changed, tmp_path)
    assert out.returncode == 2, out.stdout + out.stderr
    (line,) = out.stderr.strip().splitlines()
    assert "containers[0].resources.requests" in line and "Kueue's webhook refuses" in line, line
    dry = webhook_takes(changed)  # Kueue's webhook itself refuses the same change
    assert dry.returncode != 0 and "resources.requests" in dry.stderr, dry.stderr
    # what Kueue's webhook takes, lwsflow takes too (no refusal: the rollout runs and completes):
    # an image change, and a limits change on a template that writes no requests (Kueue compares the
    # requests field as written)
    for doc in (_lws("vllm:2", replicas=4, surge=0), _lws("vllm:3", gpus=4, replicas=4, surge=0)):
        dry = webhook_takes(doc)
        assert dry.returncode == 0, dry.stderr
        out = _rollout(kueue_ref, kcfg, ns, doc, tmp_path)
        assert out.returncode == 0, out.stdout + out.stderr


@pytest.fixture
def own_kueue(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    """A Kueue cluster for one test: a preemption or a DS beside the groups the module's other tests
    left running (their GPUs, their Workloads) did not finish in time."""
    with _kueue_cluster(tmp_path_factory.mktemp("refcluster-kueue-own")) as t:
        yield t


def test_a_group_preempted_mid_rollout_pauses_it_then_resume_finishes(own_kueue: Target,
                                                                      tmp_path: Path) -> None:
    """Issue 33, items 4 and 6: q (2 groups, all of a 16-GPU quota, rolled in place) is at stage 1 when
    a higher-priority LWS needs 8 GPUs: Kueue preempts one of q's groups, whose pods come back gated.
    The rollout pauses with QuotaBlocked naming the ClusterQueue and the GPUs missing (under the
    shipped RBAC), nothing is rolled back; once the other LWS is gone Kueue admits the group again and
    resume finishes the rollout."""
    ns = own_kueue.namespace("kueue")
    docs = yaml.safe_load_all(_quota_objects(ns, 16))
    quota_objs = [d for d in docs if d]
    for d in quota_objs:
        if d["kind"] == "ClusterQueue":
            d["spec"]["preemption"] = {"withinClusterQueue": "LowerPriority"}
    urgent = f"urgent-{ns}"
    quota_objs.append({"apiVersion": KUEUE_API, "kind": "WorkloadPriorityClass", "metadata": {"name": urgent},
                       "value": 1000})
    own_kueue.kubectl("apply", "-f", "-", stdin="".join(f"---\n{yaml.safe_dump(d)}" for d in quota_objs))
    own_kueue.kubectl("apply", "-n", ns, "-f", "-", stdin=json.dumps(_lws("vllm:1", surge=0)))
    wait_for("q Ready under Kueue", lambda: _ready(own_kueue, ns), timeout=120)
    kcfg = sa_kubeconfig(own_kueue, tmp_path / "sa.kubeconfig")
    mf = tmp_path / "q.yaml"
    mf.write_text(yaml.safe_dump(_lws("vllm:2", surge=0)))
    roll = subprocess.Popen([LWSFLOW, "rollout", "lws/q", "-n", ns, "--kubeconfig", str(kcfg), "--manifest",
                             str(mf), "--stages", "1,100%", "--deadline", "60s"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        def at_stage_1() -> bool:
            lws = json.loads(own_kueue.kubectl("get", "lws", "q", "-n", ns, "-o", "json").stdout)
            cfg = lws["spec"]["rolloutStrategy"].get("rollingUpdateConfiguration") or {}
            return cfg.get("partition") == 1

        wait_for("q's rollout at stage 1", at_stage_1, timeout=60)
        hog = _lws("vllm:1", surge=0, replicas=1)
        hog["metadata"] = {"name": "hog", "labels": {L.KUEUE_QUEUE: "serving",
                                                     "kueue.x-k8s.io/priority-class": urgent}}
        own_kueue.kubectl("apply", "-n", ns, "-f", "-", stdin=json.dumps(hog))
        out, _ = roll.communicate(timeout=300)
    finally:
        roll.kill()
    assert roll.returncode == 1, out
    flat = " ".join(out.split())
    assert f"lws/q -n {ns}: paused: rollout" in flat and "Kueue holds 1 group(s) (q/" in flat, out
    assert f"ClusterQueue serving-{ns} lacks 8 nvidia.com/gpu for them (8 per group)" in flat, out
    assert "rolled-back" not in flat, out
    live = json.loads(own_kueue.kubectl("get", "lws", "q", "-n", ns, "-o", "json").stdout)
    ann = live["metadata"].get("annotations") or {}
    assert any(v.startswith("QuotaBlocked: stage") for v in ann.values()), ann
    image = live["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]["image"]
    assert image == "vllm:2"  # nothing rolled back
    events = own_kueue.items("events", ns)
    assert any(e.get("reason") == "QuotaBlocked" for e in events), sorted({e.get("reason") for e in events})
    # the other LWS goes: Kueue admits q's group again; resume finishes
    own_kueue.kubectl("delete", "lws", "hog", "-n", ns, "--wait=true")
    done = subprocess.run([LWSFLOW, "rollout", "resume", "lws/q", "-n", ns, "--kubeconfig", str(kcfg)],
                          capture_output=True, text=True, timeout=400, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert _ready(own_kueue, ns)


def _ds(image: str) -> dict[str, Any]:
    """A DisaggregatedSet whose roles carry the queue label (as lwsflow renders one with ``queue:``):
    prefill and decode, one group of one 8-GPU pod each; the DS planner's maxSurge 1 per role."""
    pod = {"tolerations": [{"key": GPU, "operator": "Exists", "effect": "NoSchedule"}],
           "containers": [{"name": "engine", "image": image, "resources": {"limits": {GPU: 8}}}]}
    roles = [{"name": role, "metadata": {"labels": {L.KUEUE_QUEUE: "serving"}},
              "spec": {"replicas": 1, "leaderWorkerTemplate": {"size": 1, "workerTemplate": {"spec": pod}}}}
             for role in ("prefill", "decode")]
    return {"apiVersion": L.DS_API_VERSION, "kind": L.DS_KIND, "metadata": {"name": "d"},
            "spec": {"roles": roles}}


def test_a_ds_whose_roles_carry_the_queue_is_admitted_per_group_and_rolls_within_quota(
        own_kueue: Target, tmp_path: Path) -> None:
    """Issue 33, item 6: the queue label on a DS's roles reaches its child LWS, Kueue admits each
    child's groups (one Workload each), and `lwsflow rollout ds/d` plans each role's surge against the
    quota (admitted here: 16 GPUs free for two surge groups of 8) and finishes under the shipped RBAC."""
    ns = own_kueue.namespace("kueue")
    own_kueue.kubectl("apply", "-f", "-", stdin=_quota_objects(ns, 32))
    own_kueue.kubectl("apply", "-n", ns, "-f", "-", stdin=json.dumps(_ds("vllm:1")))

    def children() -> list[dict[str, Any]]:
        return [o for o in own_kueue.items("lws", ns)
                if (o["metadata"].get("labels") or {}).get(L.DS_NAME) == "d"]

    def admitted() -> bool:
        kids = children()
        return len(kids) == 2 and all((o.get("status") or {}).get("readyReplicas") == 1 for o in kids)

    wait_for("the DS's children Ready under Kueue", admitted, timeout=120)
    kids = children()
    assert all(o["metadata"]["labels"].get(L.KUEUE_QUEUE) == "serving" for o in kids), \
        [o["metadata"].get("labels") for o in kids]
    assert len(_workload_names(own_kueue, ns)) == 2 and _reserved(own_kueue, ns) == 16
    kcfg = sa_kubeconfig(own_kueue, tmp_path / "sa.kubeconfig")
    mf = tmp_path / "d.yaml"
    mf.write_text(yaml.safe_dump(_ds("vllm:2")))
    out = subprocess.run([LWSFLOW, "rollout", "ds/d", "-n", ns, "--kubeconfig", str(kcfg), "--manifest",
                          str(mf), "--deadline", "3m"],
                         capture_output=True, text=True, timeout=400, check=False)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "ClusterQueue serving-" in out.stdout and "admitted" in out.stdout, out.stdout
    kids = children()
    assert {o["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]["image"]
            for o in kids} == {"vllm:2"}, kids
