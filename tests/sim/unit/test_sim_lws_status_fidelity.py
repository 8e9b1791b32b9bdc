"""What a watch on a LeaderWorkerSet sees during a rolling update, as on a real cluster (issue #15 check 2).

The embedded cluster must be no kinder than a real one: a gate watching the status has to see a group
that is being recreated as gone. These are the states the reference cluster (kube-apiserver,
kube-controller-manager v1.36 and the upstream LWS controller) shows for every recreated group:

- upstream ``setConditions`` ORs ``setCondition`` calls left to right, so Go's short-circuit leaves
  Progressing untouched in the reconcile that writes UpdateInProgress: the first status of an update
  is UpdateInProgress=True with Progressing=False, the next one turns Progressing True;
- the StatefulSet controller computes ``status.replicas`` from the pods its informer holds: a pod it
  deletes still counts in that sync, and a pod it creates counts only from its next sync
  (``computeReplicaStatus`` over the pods listed before ``CreateStatefulPod``), so the LWS controller,
  which copies ``status.replicas`` and counts groups from the leader pods, first sees the group gone
  (ready drops, replicas not yet), then the new group updated with replicas one short, then whole.
"""

from __future__ import annotations

import itertools
from typing import Any

from lwsflow.sim.cluster import Cluster
from lwsflow.sim.lws_controller import LWS
from tests.sim.sim_helpers import NS, available, make_lws, set_image

State = tuple[int, int, int, tuple[tuple[str, str], ...]]


def _state(o: dict[str, Any]) -> State:
    st = o.get("status") or {}
    conds = tuple(sorted((c["type"], c["status"]) for c in st.get("conditions") or []))
    return st.get("replicas", 0), st.get("readyReplicas", 0), st.get("updatedReplicas", 0), conds


def _counts(seq: list[State]) -> list[tuple[int, int, int]]:
    """(replicas, ready, updated) of each state, consecutive repeats collapsed."""
    out: list[tuple[int, int, int]] = []
    for s in seq:
        if not out or out[-1] != s[:3]:
            out.append(s[:3])
    return out


def _roll(cluster: Cluster, **ruc: int) -> list[State]:
    """Roll an Available LWS (R=4, size 2) to a new image; the distinct states a watch saw."""
    cluster.store.create(LWS, make_lws("demo", replicas=4, size=2, **ruc))
    cluster.run_until(available(), 3600)
    w = cluster.store.watch(LWS, NS, since=cluster.store.resource_version)
    set_image(cluster, "demo", "vllm:v2")
    cluster.run_until(lambda c: available()(c) and _state(c.store.get_raw(LWS, NS, "demo"))[:3] == (4, 4, 4),
                      7200)
    seq: list[State] = []
    while (ev := w.next(timeout=0)) is not None:
        s = _state(ev.object)
        if not seq or seq[-1] != s:
            seq.append(s)
    w.stop()
    assert seq[0] == (4, 4, 4, CREATED)  # the spec change itself, status not yet reconciled
    return seq[1:]


CREATED = (("Available", "True"), ("Progressing", "False"))
UIP_ONLY = (("Available", "False"), ("Progressing", "False"), ("UpdateInProgress", "True"))
ROLLING = (("Available", "False"), ("Progressing", "True"), ("UpdateInProgress", "True"))
DONE = (("Available", "True"), ("Progressing", "False"), ("UpdateInProgress", "False"))


def test_update_in_progress_is_published_before_progressing(cluster: Cluster):
    """Upstream setConditions short-circuits (``shouldUpdate = shouldUpdate || setCondition(...)``,
    leaderworkerset_controller.go, v0.9.0 and main alike): UpdateInProgress=True first with
    Progressing still False, Progressing=True in the next reconcile, before any group moves."""
    seq = _roll(cluster, max_unavailable=1, max_surge=0)
    assert seq[0] == (4, 4, 0, UIP_ONLY)
    assert seq[1] == (4, 4, 0, ROLLING)
    assert seq[-1] == (4, 4, 4, DONE)


def test_recreated_group_shows_as_gone_then_one_short(cluster: Cluster):
    """maxUnavailable 1, size 2: each group goes (ready-1), then (replicas-1, updated+1), then replicas back,
    then ready back; the reference cluster shows (4,4,0) (4,3,0) (3,3,1) (4,3,1) (4,4,1) for group 3."""
    seq = _counts(_roll(cluster, max_unavailable=1, max_surge=0))
    for k in range(4):
        cycle = [(4, 4, k), (4, 3, k), (3, 3, k + 1), (4, 3, k + 1), (4, 4, k + 1)]
        at = seq.index(cycle[0])
        assert seq[at:at + 5] == cycle, seq


def test_max_unavailable_2_still_replaces_one_group_at_a_time(cluster: Cluster):
    """maxUnavailable 2: the LWS controller opens the partition two groups wide, but the StatefulSet
    controller replaces one leader at a time, each after the one above it is Ready: the
    MaxUnavailableStatefulSet gate is beta and off by default in Kubernetes 1.35/1.36
    (pkg/features/kube_features.go), and updateStatefulSet's legacy loop deletes the highest outdated
    pod and waits. updatedReplicas climbs 0, 1, 2, 3, 4 as on the reference cluster."""
    seq = _counts(_roll(cluster, max_unavailable=2, max_surge=0))
    updated = [u for _, _, u in seq]
    assert all(b - a in (0, 1) for a, b in itertools.pairwise(updated)), seq
    assert sorted(set(updated)) == [0, 1, 2, 3, 4]
    # the StatefulSet moves on once a leader is Ready; its workers, created a moment after it, are not
    # yet: for an instant that group and the next one are both down (the reference shows (4,2,1))
    assert min(r for _, r, _ in seq) == 2, seq
    assert min(r for r, _, _ in seq) < 4  # the recreated groups show in status.replicas too


def test_surge_groups_show_in_replicas_and_updated_never_exceeds_replicas_plus_surge(cluster: Cluster):
    """maxSurge 2, maxUnavailable 1: status.replicas shows the surge (6); updatedReplicas stays within
    replicas + surge and the surge is reclaimed progressively (§d Surge reclaim), not all at once."""
    seq = _counts(_roll(cluster, max_unavailable=1, max_surge=2))
    assert max(r for r, _, _ in seq) == 6
    assert max(u for _, _, u in seq) <= 6
    assert any(r == 5 for r, _, _ in seq), seq  # one surge group released before the other


def test_max_unavailable_statefulset_gate_replaces_two_groups_at_once(cluster: Cluster):
    """With the MaxUnavailableStatefulSet gate turned on (``max_unavailable_statefulset``) the
    StatefulSet honours the leader StatefulSet's maxUnavailable (U + S = 2, §d): two groups go
    together, so readyReplicas dips to 2 and updatedReplicas moves by two."""
    cluster.config.max_unavailable_statefulset = True
    seq = _counts(_roll(cluster, max_unavailable=2, max_surge=0))
    assert min(r for _, r, _ in seq) == 2
    assert any(b - a == 2 for (_, _, a), (_, _, b) in itertools.pairwise(seq)), seq
