"""Quota-aware rollouts under Kueue (rollout/quota.py): free quota per flavor, the template changes
Kueue's webhook refuses, and on the embedded cluster with Kueue's own CRDs (the pinned
sigs.k8s.io/kueue module, scripts/upstream/go.mod) and quota objects whose status is set by the test:
a surge within quota is planned, a surge without quota is refused before any write or rolled in place
(``--on-quota-shortage inPlace``, a RolloutPolicy's ``quota.onShortage``), a GPU request change on a
queue-managed LWS is refused naming the field. Kueue itself does not run here: nothing admits or gates,
so what is tested is lwsflow's plan against the quota objects as Kueue would have written them."""

from __future__ import annotations

import copy
import threading
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from lwsflow.controller.api import labels as L
from lwsflow.controller.api import paths
from lwsflow.controller.api.paths import repo_root
from lwsflow.controller.errors import ApiError, InvalidInput
from lwsflow.controller.kube.client import Kube
from lwsflow.controller.kube.resources import CLUSTER_QUEUE, EVENT, LOCAL_QUEUE, LWS, POD
from lwsflow.controller.policy.model import RolloutPolicySpec
from lwsflow.controller.rollout import capacity, gate, kueue_hold, quota, session, state
from lwsflow.controller.yamlio import dump_yaml, load_yaml_documents
from lwsflow.sim import kinds
from lwsflow.sim.apiserver import ApiServer
from reliability.rollout_env import NS, SPEED, TOKEN, Env, lws_manifest, make_env, new_release

GPU = L.GPU_RESOURCE
KUEUE = "kueue.x-k8s.io"
WRITES = {"create", "update", "patch", "delete", "deletecollection"}


# -- pure: the quota arithmetic and the webhook's rule --------------------------------------------------


def cq(name: str, nominal: object, reserved: object = 0, *, cohort: str | None = None,
       lending: object = None, borrowing: object = None, flavor: str = "h100") -> dict[str, Any]:
    res: dict[str, Any] = {"name": GPU, "nominalQuota": nominal}
    if lending is not None:
        res["lendingLimit"] = lending
    if borrowing is not None:
        res["borrowingLimit"] = borrowing
    spec: dict[str, Any] = {"namespaceSelector": {}, "resourceGroups": [
        {"coveredResources": [GPU], "flavors": [{"name": flavor, "resources": [res]}]}]}
    if cohort:
        spec["cohortName"] = cohort
    return {"apiVersion": f"{KUEUE}/v1beta2", "kind": "ClusterQueue", "metadata": {"name": name},
            "spec": spec, "status": {"flavorsReservation": [{"name": flavor, "resources": [
                {"name": GPU, "total": reserved, "borrowed": 0}]}]}}


@pytest.mark.parametrize(("own", "peers", "free"), [
    pytest.param(cq("a", 16, 8), [], 8, id="nominal_minus_reserved"),
    pytest.param(cq("a", "16", "16"), [], 0, id="full_quantities_as_text"),
    pytest.param(cq("a", 16, 16, cohort="c"), [cq("b", 8, 0, cohort="c")], 8, id="cohort_lends_unused"),
    pytest.param(cq("a", 16, 16, cohort="c"), [cq("b", 8, 6, cohort="c")], 2, id="cohort_lends_its_unused"),
    pytest.param(cq("a", 16, 16, cohort="c"), [cq("b", 8, 0, cohort="c", lending=4)], 4, id="lending_limit"),
    pytest.param(cq("a", 16, 16, cohort="c", borrowing=2), [cq("b", 8, 0, cohort="c")], 2,
                 id="borrowing_limit"),
    pytest.param(cq("a", 16, 20, cohort="c"), [cq("b", 8, 0, cohort="c")], 4, id="already_borrowed"),
    pytest.param(cq("a", 16, 8), [cq("b", 8, 0, flavor="a100")], 8, id="other_flavor_lends_nothing"),
])
def test_free_quota_is_nominal_plus_cohort_lending_minus_reserved(own: dict, peers: list[dict],
                                                                   free: int) -> None:
    (fl,) = quota.flavor_quota(own, peers)
    assert fl.free == free, str(fl)


def test_surge_groups_are_admitted_whole_in_the_first_flavor_with_room() -> None:
    q = quota.Queue("serving", "serving", [quota.FlavorQuota("a", Fraction(8), Fraction(4)),
                                           quota.FlavorQuota("b", Fraction(16), Fraction(0))])
    rep = quota.admit(q, [quota.SurgeNeed("", 3, 8)])  # 4 free in a (no whole group), 16 in b: 2 groups
    assert rep.admitted == {"": 2} and not rep.fits
    assert "3 surge group(s) x 8 nvidia.com/gpu NOT admitted (2 would be)" in rep.message
    assert "flavor b: nominal 16 + cohort 0 - reserved 0 = 16 free" in rep.message


def test_a_ds_roles_surge_is_its_budget_per_slice_times_its_gpus() -> None:
    ds = {"spec": {"slices": 2, "roles": [
        {"name": "prefill", "spec": {"replicas": 2, "leaderWorkerTemplate": {"size": 2, "workerTemplate": {
            "spec": {"containers": [{"name": "e", "resources": {"limits": {GPU: 4}}}]}}}}},
        {"name": "decode", "spec": {"replicas": 4, "rolloutStrategy": {"rollingUpdateConfiguration": {
            "maxSurge": "50%", "maxUnavailable": 0}}, "leaderWorkerTemplate": {"workerTemplate": {
                "spec": {"containers": [{"name": "e", "resources": {"limits": {GPU: 8}}}]}}}}}]}}
    # prefill: the DS planner's default surge 1; decode: 50% of 4; both per slice (2 slices)
    assert quota.ds_surge(ds) == [quota.SurgeNeed("prefill", 2, 8), quota.SurgeNeed("decode", 4, 8)]


def _lws_with(**pod: Any) -> dict[str, Any]:
    doc = lws_manifest("m", replicas=2, size=2, gpus=8, labels={L.KUEUE_QUEUE: "serving"})
    doc["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"].update(pod)
    return doc


def _container(doc: dict[str, Any]) -> dict[str, Any]:
    return doc["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]


W = "spec.leaderWorkerTemplate.workerTemplate.spec"


def _change(what: str) -> dict[str, Any]:
    new = _lws_with()
    spec = new["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]
    c = spec["containers"][0]
    if what == "requests":
        c["resources"] = {"requests": {GPU: 4}, "limits": {GPU: 4}}
    elif what == "ports":
        c["ports"] = [{"containerPort": 8000}]
    elif what == "containers":
        spec["containers"].append({"name": "sidecar", "image": "busybox"})
    elif what == "initContainers":
        spec["initContainers"] = [{"name": "fetch", "image": "busybox"}]
    elif what == "nodeSelector":
        spec["nodeSelector"] = {L.NODE_POOL: "b200"}
    else:
        spec[what] = {"runtimeClassName": "nvidia", "priority": 10}.get(what, [{"x": 1}] if what in (
            "tolerations", "topologySpreadConstraints", "resourceClaims") else {"nodeAffinity": {}})
    return new


@pytest.mark.parametrize(("what", "path"), [
    ("requests", f"{W}.containers[0].resources.requests"), ("ports", f"{W}.containers[0].ports"),
    ("containers", f"{W}.containers"), ("initContainers", f"{W}.initContainers"),
    ("nodeSelector", f"{W}.nodeSelector"), ("affinity", f"{W}.affinity"), ("tolerations", f"{W}.tolerations"),
    ("runtimeClassName", f"{W}.runtimeClassName"), ("priority", f"{W}.priority"),
    ("topologySpreadConstraints", f"{W}.topologySpreadConstraints"),
    ("resourceClaims", f"{W}.resourceClaims"),
])
def test_template_changes_kueues_webhook_refuses_are_named(what: str, path: str) -> None:
    old = _lws_with()
    found = quota.immutable_change(old, _change(what))
    assert found is not None and found[0] == path, found
    with pytest.raises(InvalidInput) as exc:
        quota.refuse_immutable(old, _change(what))
    assert exc.value.field == path and "Kueue's webhook refuses" in str(exc.value)


def test_the_webhooks_rule_is_kueues_own_reading_of_the_fields() -> None:
    """As Kueue v0.17's webhook compares (measured on the reference cluster with real Kueue,
    tests/conformance/test_kueue.py): requests by value as written, limits not at all, an empty list
    as an absent one, a port's protocol defaulted to TCP."""
    old = _lws_with()
    _container(old)["resources"] = {"requests": {GPU: "8"}, "limits": {GPU: "8"}}
    _container(old)["ports"] = [{"containerPort": 8000, "protocol": "TCP"}]
    same = copy.deepcopy(old)
    _container(same)["resources"] = {"requests": {GPU: 8}, "limits": {GPU: 8}}
    _container(same)["ports"] = [{"containerPort": 8000}]
    same["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["tolerations"] = []
    assert quota.immutable_change(old, same) is None
    limits_only = _lws_with()  # no requests written: Kueue's webhook takes a limits change
    changed = copy.deepcopy(limits_only)
    _container(changed)["resources"] = {"limits": {GPU: 4}}
    assert quota.immutable_change(limits_only, changed) is None
    _container(changed)["resources"] = {"requests": {GPU: 4}, "limits": {GPU: 4}}
    assert quota.immutable_change(limits_only, changed) == (
        f"{W}.containers[0].resources.requests", "resource requests ({} -> {nvidia.com/gpu: 4})")


@pytest.mark.parametrize(("replicas", "stages", "limit"), [
    (2, "1,100%", 0),  # stage 1: 1 updated + 1 surge = 2 = replicas: Kueue makes no surge Workload
    (4, "1,100%", 2), (4, "1,2,100%", 1), (4, "1,3,100%", 0), (8, "1,25%,50%,100%", 3),
    (4, "100%", None),  # one stage: updatedReplicas starts below replicas
])
def test_staged_surge_limit_is_what_kueue_gives_workloads_to(replicas: int, stages: str,
                                                             limit: int | None) -> None:
    from lwsflow.controller.rollout.stages import resolve_stages

    assert quota.staged_surge_limit(replicas, resolve_stages(stages, replicas)) == limit


def test_image_args_and_env_may_change_and_an_unqueued_lws_is_not_checked() -> None:
    old = _lws_with()
    new = new_release(old)
    _container(new).update(args=["--x"], env=[{"name": "A", "value": "1"}])
    assert quota.immutable_change(old, new) is None
    unqueued = copy.deepcopy(old)
    del unqueued["metadata"]["labels"][L.KUEUE_QUEUE]
    quota.refuse_immutable(unqueued, _change("requests"))  # no queue: Kueue's webhook is not involved


# -- the embedded cluster with Kueue's CRDs ------------------------------------------------------------


@pytest.fixture
def kenv(tmp_path: Path) -> Iterator[Env]:
    """Three 8-GPU nodes and Kueue's quota CRDs (the pinned module's); LWS ``q``: 2 groups of 1 pod x 8
    GPUs, maxSurge 1, labelled for LocalQueue ``serving`` -> ClusterQueue ``serving``."""
    env = make_env(tmp_path, gpu_nodes=3)
    try:
        for plural in ("clusterqueues", "localqueues", "resourceflavors"):
            crd = load_yaml_documents(paths.kueue_crd(plural))[0]
            env.kube.request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", body=crd)
        env.kube.create(LOCAL_QUEUE, NS, {"apiVersion": f"{KUEUE}/v1beta2", "kind": "LocalQueue",
                                          "metadata": {"name": "serving"},
                                          "spec": {"clusterQueue": "serving"}})
        env.create_ready(lws_manifest("q", replicas=2, size=1, gpus=8, surge=1, unavailable=0,
                                      labels={L.KUEUE_QUEUE: "serving"}))
        yield env
    finally:
        env.close()
        for plural in ("clusterqueues", "localqueues", "resourceflavors"):  # served kinds are process-wide
            kinds.unregister(f"{plural}.{KUEUE}")


def _quota(env: Env, nominal: int, reserved: int, **kw: Any) -> None:
    """ClusterQueue ``serving`` with its status as Kueue would write it (16 GPUs held by ``q``'s groups)."""
    doc = cq("serving", nominal, reserved, **kw)
    status = doc.pop("status")
    env.kube.create(CLUSTER_QUEUE, "", doc)
    env.kube.merge_patch(CLUSTER_QUEUE, "", "serving", {"status": status}, subresource="status")


def _own_api(env: Env, tmp_path: Path) -> tuple[ApiServer, Path]:
    """An API server of its own on the same store: its request log holds lwsflow's requests only."""
    api = ApiServer(env.cluster.store, token=TOKEN, clock=env.cluster.now, speed=SPEED)
    api.start()
    return api, api.write_kubeconfig(tmp_path / "lwsflow.kubeconfig")


def _writes(api: ApiServer) -> list[tuple[Any, ...]]:
    return [r for r in api.request_log if r[0] in WRITES]


def _surge_pods(env: Env, since: int) -> set[str]:
    """Pods of ``q`` with a group index beyond its replicas (surge groups) created since ``since``."""
    return {r.name for r in env.rec.store.entries("pods", since=since)
            if (r.object["metadata"].get("labels") or {}).get(L.NAME) == "q"
            and int((r.object["metadata"].get("labels") or {}).get(L.GROUP_INDEX, "0")) >= 2}


def _run(kcfg: Path, manifest: Path, *extra: str) -> int:
    from lwsflow.cli import main

    # one stage: the surge is Kueue's plain surge (a staged one is limited apart: test_staged_surge_*)
    return main(["rollout", "lws/q", "-n", NS, "--kubeconfig", str(kcfg), "--manifest", str(manifest),
                 "--stages", "100%", *extra])


def granted(path: Path) -> set[tuple[str, str, str]]:
    return {(g, r, v) for doc in load_yaml_documents(path) for rule in doc["rules"]
            for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"] if g == KUEUE}


def test_surge_within_quota_is_planned(kenv: Env, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _quota(kenv, 24, 16, cohort="serving")  # 8 free: the one surge group of 8 GPUs is admitted
    mf = tmp_path / "q.yaml"
    mf.write_text(dump_yaml(new_release(kenv.kube.get(LWS, NS, "q"))))
    since = kenv.rec.store.position()
    api, kcfg = _own_api(kenv, tmp_path)
    try:
        assert _run(kcfg, mf) == 0
    finally:
        api.stop()
    out = capsys.readouterr().out
    assert ("quota: LocalQueue serving -> ClusterQueue serving: 1 surge group(s) x 8 nvidia.com/gpu admitted "
            "(flavor h100: nominal 24 + cohort 0 - reserved 16 = 8 free)") in out, out
    live = kenv.kube.get(LWS, NS, "q")
    assert gate.max_surge(live) == 1 and gate.lws_fully_rolled(live).passed
    assert _surge_pods(kenv, since)  # the surge group ran
    # the Kueue verbs `lwsflow rollout` used are exactly those its ClusterRole grants (cohort: list)
    used = {v for v in api.verbs_used() if v[0] == KUEUE}
    assert used == granted(repo_root() / "overlays" / "rbac" / "clusterrole.yaml"), used


def test_surge_without_quota_is_refused_before_any_write_or_rolled_in_place(
        kenv: Env, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _quota(kenv, 16, 16)  # q's 2 groups hold all of it; the nodes have room for the surge group
    before = kenv.kube.get(LWS, NS, "q")
    mf = tmp_path / "q.yaml"
    mf.write_text(dump_yaml(new_release(before)))
    since = kenv.rec.store.position()
    api, kcfg = _own_api(kenv, tmp_path)
    try:
        assert _run(kcfg, mf) == 2
        err = capsys.readouterr().err.strip()
        assert err.count("\n") == 0 and "maxSurge" in err, err
        assert ("LocalQueue serving -> ClusterQueue serving: 1 surge group(s) x 8 nvidia.com/gpu NOT "
                "admitted (0 would be) (flavor h100: nominal 16 + cohort 0 - reserved 16 = 0 free)"
                ) in err, err
        assert "--on-quota-shortage inPlace" in err
        assert _writes(api) == []  # refused before the first write
        assert kenv.kube.get(LWS, NS, "q")["metadata"] == before["metadata"]
        # bad input for the option: one line naming it, nothing written
        assert _run(kcfg, mf, "--on-quota-shortage", "sometimes") == 2
        err = capsys.readouterr().err.strip()
        assert err.count("\n") == 0 and "on-quota-shortage" in err and "refuse, inPlace" in err, err
        assert _writes(api) == []
        # inPlace: no surge group, one group down at a time
        assert _run(kcfg, mf, "--on-quota-shortage", "inPlace") == 0
    finally:
        api.stop()
    assert "onShortage inPlace: rolling with the surge the quota admits" in capsys.readouterr().out
    live = kenv.kube.get(LWS, NS, "q")
    assert (gate.max_surge(live), gate.max_unavailable(live)) == (0, 1)
    assert gate.lws_fully_rolled(live).passed
    assert _surge_pods(kenv, since) == set()  # no surge group was ever created


def test_staged_surge_beyond_what_kueue_admits_is_refused_then_lowered_in_place(
        kenv: Env, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Stages 1,100% of 2 groups with maxSurge 1: Kueue v0.17 would give the surge group no Workload
    (measured with real Kueue: tests/conformance/test_kueue.py); refused before any write, naming
    maxSurge, or rolled with no surge under inPlace, though the quota has room for it."""
    _quota(kenv, 64, 16)
    mf = tmp_path / "q.yaml"
    mf.write_text(dump_yaml(new_release(kenv.kube.get(LWS, NS, "q"))))
    since = kenv.rec.store.position()
    api, kcfg = _own_api(kenv, tmp_path)
    try:
        assert _run(kcfg, mf, "--stages", "1,100%") == 2
        err = capsys.readouterr().err.strip()
        assert err.count("\n") == 0 and err.startswith("error: maxSurge: "), err
        assert "maxSurge 1 in stages 1,100% of 2 groups" in err and "lower maxSurge to 0" in err, err
        assert _writes(api) == []
        assert _run(kcfg, mf, "--stages", "1,100%", "--on-quota-shortage", "inPlace") == 0
    finally:
        api.stop()
    assert "onShortage inPlace: rolling with maxSurge 0" in capsys.readouterr().out
    assert gate.lws_fully_rolled(kenv.kube.get(LWS, NS, "q")).passed
    assert _surge_pods(kenv, since) == set()


def test_gpu_request_change_on_a_queue_managed_lws_is_refused_naming_the_field(
        kenv: Env, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _quota(kenv, 64, 16)  # quota to spare: the refusal is the webhook's rule, not the quota
    live = kenv.kube.get(LWS, NS, "q")
    bigger = new_release(live)
    _container(bigger)["resources"] = {"requests": {GPU: 4}, "limits": {GPU: 4}}
    mf = tmp_path / "q.yaml"
    mf.write_text(dump_yaml(bigger))
    api, kcfg = _own_api(kenv, tmp_path)
    try:
        assert _run(kcfg, mf) == 2
    finally:
        api.stop()
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0, err
    assert f"{W}.containers[0].resources.requests" in err, err
    assert ("resource requests ({} -> {nvidia.com/gpu: 4}) changed on LeaderWorkerSet q, "
            "managed by Kueue (LocalQueue serving): Kueue's webhook refuses changes to container "
            "requests") in err
    assert _writes(api) == []
    assert kenv.kube.get(LWS, NS, "q")["metadata"]["resourceVersion"] == live["metadata"]["resourceVersion"]


def test_controller_policy_rolls_in_place_when_the_quota_admits_no_surge(kenv: Env, tmp_path: Path) -> None:
    """GitOps: the new template is synced (frozen by the partition) while the nodes have no room for a
    surge group either; the policy's ``quota.onShortage: inPlace`` writes maxSurge 0 on the target and
    rolls it; its Kueue reads are exactly what the controller's ClusterRole grants."""
    from lwsflow.controller.incluster.driver import Driver, DriverDeps, Job

    kenv.create_ready(lws_manifest("fill", replicas=1, size=1, gpus=8))  # the third node taken
    _quota(kenv, 16, 16, cohort="serving")
    live = kenv.kube.get(LWS, NS, "q")
    kenv.kube.merge_patch(LWS, NS, "q", {"spec": {
        "rolloutStrategy": {"rollingUpdateConfiguration": {"partition": 2}}}})
    kenv.kube.merge_patch(LWS, NS, "q", {"spec": {"leaderWorkerTemplate": new_release(live)["spec"][
        "leaderWorkerTemplate"]}})
    spec = RolloutPolicySpec.model_validate({
        "targetRef": {"kind": "LeaderWorkerSet", "name": "q"}, "stages": [{"groups": "100%"}],
        "progressDeadline": "10m", "quota": {"onShortage": "inPlace"}})
    api, kcfg = _own_api(kenv, tmp_path)
    try:
        kube = Kube.connect(str(kcfg))
        out = Driver(DriverDeps(kube, session.clock_for(kube)), Job(NS, spec)).run()
    finally:
        api.stop()
    assert out is not None and out.result == "succeeded", out
    final = kenv.kube.get(LWS, NS, "q")
    assert (gate.max_surge(final), gate.max_unavailable(final)) == (0, 1)
    assert gate.lws_fully_rolled(final).passed
    used = {v for v in api.verbs_used() if v[0] == KUEUE}
    assert used == granted(repo_root() / "overlays" / "controller" / "clusterrole.yaml"), used
    # refuse (the default): the policy's rollout is refused before it writes anything
    surge = capacity.with_budget(new_release(final, "vllm:3"), capacity.Budget(1, 0))
    with pytest.raises(InvalidInput) as exc:
        session.capacity_preflight(kenv.kube, "lws", NS, {"": surge}, auto_budget=False)
    assert exc.value.field == "maxSurge"


# -- during the rollout: Kueue holding groups pauses it (rollout/kueue_hold.py) --------------------------


def _gated_release(before: dict[str, Any]) -> dict[str, Any]:
    """A new release whose pods carry Kueue's admission gate, as Kueue's webhook gives every pod of a
    group it has not admitted (the embedded cluster runs no Kueue: the template stands in for it)."""
    rel = new_release(before)
    lwt = rel["spec"]["leaderWorkerTemplate"]
    for tpl in (lwt.get("leaderTemplate"), lwt["workerTemplate"]):
        if tpl is not None:
            tpl["spec"]["schedulingGates"] = [{"name": kueue_hold.ADMISSION_GATE}]
    return rel


def _pod(lws: str, group: int, gates: list[str], deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": f"{lws}-{group}", "labels": {L.NAME: lws, L.GROUP_INDEX: str(group)}}
    if deleting:
        meta["deletionTimestamp"] = "2026-12-06T00:00:00Z"
    return {"metadata": meta, "spec": {"schedulingGates": [{"name": g} for g in gates]}}


def test_held_groups_are_those_with_kueues_gate_counted_once_in_index_order() -> None:
    gate_ = kueue_hold.ADMISSION_GATE
    pods = [_pod("q", 10, [gate_]), _pod("q", 2, [gate_]), _pod("q", 2, [gate_]), _pod("q", 3, ["other"]),
            _pod("q", 4, []), _pod("q", 5, [gate_], deleting=True)]
    assert kueue_hold.held_groups(pods) == ["q/2", "q/10"]


def test_the_missing_quantity_places_whole_groups_as_kueue_admits_them() -> None:
    q = quota.Queue("serving", "serving", [quota.FlavorQuota("a", Fraction(16), Fraction(12)),
                                           quota.FlavorQuota("b", Fraction(8), Fraction(0), Fraction(0))])
    assert kueue_hold.missing_gpus(q, 8, 1) == 0  # b has room for one
    assert kueue_hold.missing_gpus(q, 8, 3) == 16  # a's 4 free are no whole group
    line = kueue_hold.message(["q/2", "q/3", "q/4"], q, 8)
    assert "Kueue holds 3 group(s) (q/2, q/3, q/4)" in line and "lacks 16 nvidia.com/gpu" in line, line
    assert "now has room for them" in kueue_hold.message(["q/2"], q, 8)
    assert kueue_hold.message(["q/2"], None, 8, "LocalQueue x not found").endswith(
        "the queue's quota could not be read: LocalQueue x not found")


class _Admit:
    """Kueue admitting once quota frees: removes the admission gate from every pod of ``q`` that gets
    one, from a watch on the store (no polling)."""

    def __init__(self, env: Env) -> None:
        self.env, self.admitted = env, 0
        self._watch = env.cluster.store.watch("pods", NS, label_selector=f"{L.NAME}=q")
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while (ev := self._watch.next(timeout=None)) is not None:
            pod = ev.object
            if kueue_hold.gated(pod):
                try:
                    self.env.kube.json_patch(POD, NS, pod["metadata"]["name"],
                                             [{"op": "remove", "path": "/spec/schedulingGates"}])
                except ApiError:  # an older event of a pod admitted already, or one deleted since
                    continue
                self.admitted += 1

    def stop(self) -> None:
        self._watch.stop()
        self._thread.join(10)


def test_groups_kueue_holds_pause_the_rollout_naming_the_quota_then_resume_finishes(
        kenv: Env, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 33, item 4: a stage whose groups Kueue keeps gated past the progress deadline pauses
    (QuotaBlocked: the groups, the ClusterQueue, the GPUs it lacks), an Event says so, nothing is rolled
    back; once Kueue admits them, resume finishes the rollout. Without the queue label the same stall
    is a failed stage, rolled back (the release is at fault then)."""
    from lwsflow.cli import main

    _quota(kenv, 16, 16)  # q's 2 groups hold all of it: a re-created group waits for quota
    mf = tmp_path / "q.yaml"
    mf.write_text(dump_yaml(_gated_release(kenv.kube.get(LWS, NS, "q"))))
    args = ["-n", NS, "--kubeconfig", str(kenv.kubeconfig)]
    code = main(["rollout", "lws/q", *args, "--manifest", str(mf), "--stages", "1,100%",
                 "--deadline", "5m", "--on-quota-shortage", "inPlace"])
    out = capsys.readouterr().out
    assert code == 1, out
    assert ("paused at stage 1: its deadline (300s) passed: Kueue holds 1 group(s) (q/1): their pods carry "
            "the scheduling gate kueue.x-k8s.io/admission (waiting for quota, or preempted); LocalQueue "
            "serving -> ClusterQueue serving lacks 8 nvidia.com/gpu for them (8 per group): flavor h100: "
            "nominal 16 + cohort 0 - reserved 16 = 0 free") in " ".join(out.split()), out
    live = kenv.kube.get(LWS, NS, "q")
    st = state.RolloutState.from_object(live)
    assert st.active and st.paused and st.reason.startswith("QuotaBlocked: stage 1"), st
    assert st.phase != state.ROLLING_BACK and live["spec"]["leaderWorkerTemplate"]["workerTemplate"][
        "spec"]["containers"][0]["image"] == "vllm:2"  # nothing rolled back
    events = kenv.kube.list(EVENT, NS)[0]
    assert any(e.get("reason") == "QuotaBlocked" and "ClusterQueue serving lacks 8" in e.get("message", "")
               for e in events), [e.get("reason") for e in events]
    # the pods' PodScheduled condition is what kube-scheduler writes for gated pods
    pod = kenv.kube.get(POD, NS, "q-1")
    cond = next(c for c in pod["status"]["conditions"] if c["type"] == "PodScheduled")
    assert (cond["status"], cond["reason"]) == ("False", "SchedulingGated")
    # Kueue admits (quota freed): resume waits again with a fresh deadline and finishes
    admit = _Admit(kenv)
    try:
        assert main(["rollout", "resume", "lws/q", *args]) == 0, capsys.readouterr().out
    finally:
        admit.stop()
    assert admit.admitted >= 2  # group 1, then group 0
    assert gate.lws_fully_rolled(kenv.kube.get(LWS, NS, "q")).passed


def test_a_stall_without_kueue_is_still_a_failed_stage(kenv: Env, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """The same gated pods on an LWS without the queue label (something else gates them): the probe
    reads nothing and the stage fails at its deadline, rolled back, as before."""
    from lwsflow.cli import main

    kenv.create_ready(lws_manifest("plain", replicas=2, size=1, gpus=0, surge=0, unavailable=1))
    rel = _gated_release(kenv.kube.get(LWS, NS, "plain"))
    mf = tmp_path / "plain.yaml"
    mf.write_text(dump_yaml(rel))
    code = main(["rollout", "lws/plain", "-n", NS, "--kubeconfig", str(kenv.kubeconfig), "--manifest",
                 str(mf), "--stages", "1,100%", "--deadline", "5m"])
    out = capsys.readouterr().out
    assert code == 1 and "rolled-back" in out and "Kueue" not in out, out


def test_controller_policy_pauses_on_quota_and_its_status_says_what_is_missing(kenv: Env) -> None:
    """The in-cluster driver: the same stall pauses the policy's rollout; the status (a pure function of
    the target's annotations) reads Paused with a QuotaBlocked condition naming the ClusterQueue and the
    GPUs missing, and the dashboard's problem badge says so."""
    from lwsflow.controller.incluster.driver import Driver, DriverDeps, Job
    from lwsflow.controller.policy import status as policy_status
    from lwsflow.dashboard import views

    _quota(kenv, 16, 16)
    live = kenv.kube.get(LWS, NS, "q")
    kenv.kube.merge_patch(LWS, NS, "q", {"spec": {
        "rolloutStrategy": {"rollingUpdateConfiguration": {"partition": 2}}}})
    kenv.kube.merge_patch(LWS, NS, "q", {"spec": {"leaderWorkerTemplate": _gated_release(live)["spec"][
        "leaderWorkerTemplate"]}})
    spec = RolloutPolicySpec.model_validate({
        "targetRef": {"kind": "LeaderWorkerSet", "name": "q"}, "stages": [{"groups": 1}, {"groups": "100%"}],
        "progressDeadline": "5m", "quota": {"onShortage": "inPlace"}})
    out = Driver(DriverDeps(kenv.kube, session.clock_for(kenv.kube)), Job(NS, spec)).run()
    assert out is not None and out.result == "paused", out
    target = kenv.kube.get(LWS, NS, "q")
    s = policy_status.compute(spec, target, 1, {}, "2026-12-06T00:00:00Z")
    assert s["phase"] == "Paused", s
    cond = {c["type"]: c for c in s["conditions"]}
    assert cond["QuotaBlocked"]["status"] == "True" and cond["Progressing"]["reason"] == "QuotaBlocked"
    assert "ClusterQueue serving lacks 8 nvidia.com/gpu" in cond["QuotaBlocked"]["message"], cond
    assert s["message"].endswith("`kubectl lwsflow resume` waits again (a fresh deadline), `kubectl "
                                 "lwsflow abort` rolls back"), s["message"]
    assert views.problem({"status": s}) == "quota blocked"
    # nothing counted the release as failed: no rollback, no failure in the history
    assert not s["history"] and state.RolloutState.from_object(target).phase != state.ROLLING_BACK
