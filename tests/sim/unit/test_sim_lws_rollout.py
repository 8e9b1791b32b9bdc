"""§c/§d in the running cluster: the rolling update, surge, partition, and status/conditions."""

from __future__ import annotations

from lwsflow.sim.cluster import Cluster
from lwsflow.sim.lws_controller import LWS
from tests.sim.sim_helpers import (
    NS,
    available,
    cond,
    counters,
    groups,
    is_true,
    leader_sts,
    lws_revisions,
    make_lws,
    set_image,
)


def _set_partition(c: Cluster, name: str, p: int) -> None:
    def edit(o: dict) -> None:
        o["spec"].setdefault("rolloutStrategy", {"type": "RollingUpdate"}).setdefault(
            "rollingUpdateConfiguration", {})["partition"] = p
    c.store.mutate(LWS, NS, name, edit)


def _revision(c: Cluster, name: str = "demo") -> str:
    return c.store.get_raw("statefulsets.apps", NS, name)["metadata"]["labels"][
        "leaderworkerset.sigs.k8s.io/template-revision-hash"]


def _history(c: Cluster, w) -> tuple[list[tuple[int, int]], list[tuple[int, int, int]]]:
    """Distinct leader-sts (partition, replicas) and LWS (replicas, ready, updated) seen on a watch."""
    sts_seq: list[tuple[int, int]] = []
    status_seq: list[tuple[int, int, int]] = []
    while (ev := w.next(timeout=0)) is not None:
        o = ev.object
        if o["kind"] == "StatefulSet" and o["metadata"]["name"] == "demo":
            item = (o["spec"]["updateStrategy"]["rollingUpdate"]["partition"], o["spec"]["replicas"])
            seq: list = sts_seq
        elif o["kind"] == "LeaderWorkerSet":
            st = o.get("status") or {}
            item = (st.get("replicas", 0), st.get("readyReplicas", 0), st.get("updatedReplicas", 0))
            seq = status_seq
        else:
            continue
        if not seq or seq[-1] != item:
            seq.append(item)
    return sts_seq, status_seq


def test_worked_trace_r4_u1_s1_p2(cluster: Cluster):
    """§d worked trace: (4,5) 5/4/1 -> (2,5) -> 5/5/3 Available with the surge group kept until P=0."""
    cluster.store.create(LWS, make_lws("demo", replicas=4, size=2, max_unavailable=1, max_surge=1))
    cluster.run_until(available(), 3600)
    old = _revision(cluster)
    w_sts = cluster.store.watch("statefulsets.apps", NS, since=cluster.store.resource_version)
    w_lws = cluster.store.watch(LWS, NS, since=cluster.store.resource_version)

    def edit(o: dict) -> None:
        o["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]["image"] = "vllm:v2"
        o["spec"]["rolloutStrategy"]["rollingUpdateConfiguration"]["partition"] = 2
    cluster.store.mutate(LWS, NS, "demo", edit)
    cluster.run_until(lambda c: groups(c).get(4, ("", "", False))[2], 3600)  # surge group ready
    new = _revision(cluster)
    assert new != old
    sts_seq, status_seq = _history(cluster, w_sts)[0], _history(cluster, w_lws)[1]
    assert sts_seq[0] == (4, 5)  # tick 0: partition at R, surge group created on the new template
    assert (5, 4, 1) in status_seq  # tick 0 status: 5 / 4 / 1
    assert leader_sts(cluster) == (2, 5)  # tick 1: the ready surge group widens the window to 2
    g = groups(cluster)
    assert [g[i][1] for i in (0, 1, 4)] == [old, old, new]
    # the StatefulSet replaces one leader at a time (MaxUnavailableStatefulSet is off by default in
    # Kubernetes 1.35/1.36): group 3 goes first (gone or new and unready), group 2 once 3's leader is Ready
    terminating = bool(cluster.store.get("pods", NS, "demo-3")["metadata"].get("deletionTimestamp"))
    assert (terminating or (g[3][1] == new and not g[3][2])) and g[2][1] == old
    cluster.run_until(available(), 3600)
    assert counters(cluster) == (5, 5, 3)  # last row, Available=True
    assert leader_sts(cluster) == (2, 5)
    assert [v[1] for v in groups(cluster).values()] == [old, old, new, new, new]
    assert min(p for p, _ in _history(cluster, w_sts)[0] + sts_seq) == 2  # P is a floor
    # the surge group persists until P=0; then the rest rolls and the surge group is reclaimed
    cluster.advance(3600)
    assert counters(cluster) == (5, 5, 3)
    _set_partition(cluster, "demo", 0)
    cluster.run_until(lambda c: available()(c) and counters(c) == (4, 4, 4), 7200)
    assert leader_sts(cluster) == (0, 4)
    assert [v[1] for v in groups(cluster).values()] == [new] * 4
    w_sts.stop()
    w_lws.stop()


def test_order_highest_index_first_one_at_a_time(cluster: Cluster):
    """§d Order: U=1, S=0 rolls groups 3, 2, 1, 0, one at a time."""
    cluster.store.create(LWS, make_lws("demo", replicas=4, size=1))
    cluster.run_until(available(), 3600)
    before = {i: v[0] for i, v in groups(cluster).items()}
    set_image(cluster, "demo", "vllm:v2")
    order: list[int] = []

    def track(c: Cluster) -> bool:
        now = groups(c)
        replaced = [i for i, v in now.items() if v[0] != before[i]]
        for i in replaced:
            if i not in order:
                order.append(i)
        assert len([i for i, v in now.items() if not v[2]]) <= 1  # maxUnavailable 1
        return len(order) == 4 and available()(c)
    cluster.run_until(track, 7200)
    assert order == [3, 2, 1, 0]


def test_surge_on_create_with_partition_issue_614(cluster: Cluster):
    """§d issue #614: replicas 6, partition 9, maxSurge 3 first creates 9 groups, then shrinks to 6."""
    cluster.store.create(LWS, make_lws("demo", replicas=6, size=1, partition=9, max_surge=3,
                                       max_unavailable=1))
    cluster.settle()
    assert leader_sts(cluster) == (9, 9)
    cluster.advance(1)  # status.replicas counts created pods from the StatefulSet's next sync
    assert counters(cluster)[0] == 9
    cluster.run_until(lambda c: counters(c) == (6, 6, 6) and leader_sts(c)[1] == 6, 3600)
    assert available()(cluster)


def test_partition_at_replicas_freezes_groups(cluster: Cluster):
    """§d P >= R: existing groups are frozen on the old template; nothing is recreated."""
    cluster.store.create(LWS, make_lws("demo", replicas=3, size=1, partition=0))
    cluster.run_until(available(), 3600)
    before = groups(cluster)
    _set_partition(cluster, "demo", 5)
    set_image(cluster, "demo", "vllm:v2")
    cluster.advance(3600)
    assert groups(cluster) == before
    assert leader_sts(cluster) == (5, 3)
    assert counters(cluster) == (3, 3, 0)


def test_partition_at_replicas_with_surge_is_a_canary(cluster: Cluster):
    """§d P = R plus surge: the S surge groups come up on the new template; existing ones stay."""
    cluster.store.create(LWS, make_lws("demo", replicas=3, size=1, max_surge=1))
    cluster.run_until(available(), 3600)
    old = _revision(cluster)
    before = groups(cluster)

    def edit(o: dict) -> None:
        o["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]["image"] = "vllm:v2"
        o["spec"]["rolloutStrategy"]["rollingUpdateConfiguration"]["partition"] = 3
    cluster.store.mutate(LWS, NS, "demo", edit)
    cluster.run_until(lambda c: counters(c) == (4, 4, 1), 3600)
    now = groups(cluster)
    assert {i: now[i] for i in range(3)} == before and now[3][1] != old


def test_template_change_mid_rollout(cluster: Cluster):
    """§d template changed mid-rollout: partition jumps back to min(R, Rs); all end on the newest."""
    cluster.store.create(LWS, make_lws("demo", replicas=4, size=1, max_unavailable=1))
    cluster.run_until(available(), 3600)
    set_image(cluster, "demo", "vllm:v2")
    cluster.run_until(lambda c: leader_sts(c)[0] == 2, 3600)  # groups 3 done, 2 in flight
    v2 = _revision(cluster)
    w_sts = cluster.store.watch("statefulsets.apps", NS, since=cluster.store.resource_version)
    set_image(cluster, "demo", "vllm:v3")
    cluster.settle()
    v3 = _revision(cluster)
    assert v3 != v2
    # jumped back up; the next reconcile lowers it to 3 at once: group 2's old leader is still
    # Terminating, Running and Ready, so it counts as ready (upstream PodRunningAndReady)
    assert _history(cluster, w_sts)[0][:2] == [(4, 4), (3, 4)]
    assert is_true(cluster.store.get_raw(LWS, NS, "demo"), "UpdateInProgress")
    cluster.run_until(lambda c: available()(c) and counters(c) == (4, 4, 4), 7200)
    assert {v[1] for v in groups(cluster).values()} == {v3}
    # updateDone: only the current ControllerRevision remains
    revs = lws_revisions(cluster)
    hashes = [r["metadata"]["labels"]["leaderworkerset.sigs.k8s.io/template-revision-hash"] for r in revs]
    assert hashes == [v3]


def test_status_counters_with_surge_and_conditions(cluster: Cluster):
    """§c counters include surge groups; condition flips keep reason/message; first is Progressing."""
    cluster.store.create(LWS, make_lws("demo", replicas=3, size=2, max_unavailable=0, max_surge=2))
    cluster.settle()
    o = cluster.store.get_raw(LWS, NS, "demo")
    assert is_true(o, "Progressing") and cond(o, "UpdateInProgress") is None and cond(o, "Available") is None
    cluster.run_until(available(), 3600)
    o = cluster.store.get_raw(LWS, NS, "demo")
    assert cond(o, "Progressing")["status"] == "False"
    assert cond(o, "Progressing")["reason"] == "GroupsProgressing"  # reason kept when flipped
    set_image(cluster, "demo", "vllm:v2")
    cluster.advance(1)  # the StatefulSet's next sync counts the surge pods it created
    assert counters(cluster) == (5, 3, 2)  # 2 surge groups counted (updated, not ready)
    o = cluster.store.get_raw(LWS, NS, "demo")
    assert is_true(o, "UpdateInProgress") and is_true(o, "Progressing")
    assert cond(o, "Available")["status"] == "False" and cond(o, "Available")["reason"] == "AllGroupsReady"
    seen_updated_above_replicas = False

    def watch(c: Cluster) -> bool:
        nonlocal seen_updated_above_replicas
        r, rdy, upd = counters(c)
        seen_updated_above_replicas |= upd > 3
        return available()(c) and (r, rdy, upd) == (3, 3, 3)
    cluster.run_until(watch, 7200)
    assert seen_updated_above_replicas  # updatedReplicas can exceed spec.replicas (§c)
    o = cluster.store.get_raw(LWS, NS, "demo")
    assert cond(o, "UpdateInProgress")["status"] == "False"


def test_scale_up_and_down_highest_ordinals(cluster: Cluster):
    """§d/StatefulSet: scale-down removes the highest group indexes; scale-up adds new ones."""
    cluster.store.create(LWS, make_lws("demo", replicas=3, size=2))
    cluster.run_until(available(), 3600)
    keep = {i: v[0] for i, v in groups(cluster).items() if i < 1}
    cluster.store.mutate(LWS, NS, "demo", lambda o: o["spec"].__setitem__("replicas", 1))
    cluster.run_until(lambda c: counters(c) == (1, 1, 1), 600)
    assert {i: v[0] for i, v in groups(cluster).items()} == keep
    assert cluster.store.try_get("statefulsets.apps", NS, "demo-2") is None
    cluster.store.mutate(LWS, NS, "demo", lambda o: o["spec"].__setitem__("replicas", 4))
    cluster.run_until(lambda c: available()(c) and counters(c) == (4, 4, 4), 3600)


def test_initial_partition_sequence_6_5_4(cluster: Cluster):
    """§d Initial partition: 6 replicas, user partition 4, no surge: the sts partition goes 6 -> 5 -> 4
    and groups 0-3 keep the old template."""
    cluster.store.create(LWS, make_lws("demo", replicas=6, size=1, partition=0, max_surge=0))
    cluster.run_until(available(), 3600)
    old = _revision(cluster)
    w = cluster.store.watch("statefulsets.apps", NS, since=cluster.store.resource_version)

    def edit(o: dict) -> None:
        o["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]["image"] = "vllm:v2"
        o["spec"]["rolloutStrategy"]["rollingUpdateConfiguration"]["partition"] = 4
    cluster.store.mutate(LWS, NS, "demo", edit)
    cluster.run_until(lambda c: available()(c) and counters(c) == (6, 6, 2), 3600)
    partitions = [p for p, _ in _history(cluster, w)[0]]
    w.stop()
    assert partitions == [6, 5, 4]
    assert [v[1] == old for v in groups(cluster).values()] == [True] * 4 + [False] * 2


def test_terminating_leader_still_counts_ready_as_upstream(cluster: Cluster):
    """§c ready(group): the leader is Running with Ready=True (upstream ``PodRunningAndReady``,
    pod_utils.go), which does not look at ``deletionTimestamp``. A leader held by a finalizer while
    it terminates, still Running and Ready, keeps counting in readyReplicas and Available."""
    cluster.store.create(LWS, make_lws("demo", replicas=2, size=2))
    cluster.run_until(available("demo"), 3600)
    cluster.store.mutate("pods", NS, "demo-1",
                         lambda p: p["metadata"].__setitem__("finalizers", ["example.com/hold"]))
    cluster.store.delete("pods", NS, "demo-1")
    cluster.advance(1)
    leader = cluster.store.get("pods", NS, "demo-1")
    assert leader["metadata"]["deletionTimestamp"] and leader["status"]["phase"] == "Running"
    assert groups(cluster)[1][2] is True
    assert counters(cluster) == (2, 2, 2)
    assert is_true(cluster.store.get(LWS, NS, "demo"), "Available")
    worker_sts = cluster.store.get("statefulsets.apps", NS, "demo-1")["metadata"]["uid"]
    # the finalizer goes: the leader is removed, its worker StatefulSet garbage-collected with it
    cluster.store.mutate("pods", NS, "demo-1", lambda p: p["metadata"].__setitem__("finalizers", []))
    cluster.advance(cluster.config.timings.container_stop_s)  # its containers stop, the kubelet deletes it
    assert cluster.store.get("statefulsets.apps", NS, "demo-1")["metadata"]["uid"] != worker_sts
    cluster.run_until(available("demo"), 3600)
