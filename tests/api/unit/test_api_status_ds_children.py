"""``ds_children_checks``: the DS verdict from its child LWS where the DS controller writes no status
(upstream v0.9.0 / v0.10.0; the status is main-only, lws-semantics §f "Status")."""

from __future__ import annotations

import copy
from typing import Any

from lwsflow.controller.api import labels as L
from lwsflow.controller.api.status import ds_children_checks, ds_status_written, explain_ds_children


def _tmpl(image: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"size": 1, "workerTemplate": {"metadata": {"labels": dict(labels or {})},
                                          "spec": {"containers": [{"name": "e", "image": image}]}}}


def _ds(image: str, roles: dict[str, int]) -> dict[str, Any]:
    return {"kind": "DisaggregatedSet", "metadata": {"name": "d", "generation": 2},
            "spec": {"roles": [{"name": n, "spec": {"replicas": r, "leaderWorkerTemplate": _tmpl(image)}}
                               for n, r in roles.items()]}}


def _child(role: str, rev: str, image: str, spec: int, ready: int | None = None, *, created: str,
           available: bool = True) -> dict[str, Any]:
    """A child LWS as the DS controller makes it (its labels also on the pod template)."""
    ready = spec if ready is None else ready
    labels = {L.DS_NAME: "d", L.DS_ROLE: role, L.DS_REVISION: rev}
    return {"metadata": {"name": f"d-{rev}-{role}", "generation": 1, "labels": labels,
                         "creationTimestamp": created},
            "spec": {"replicas": spec, "leaderWorkerTemplate": _tmpl(image, labels)},
            "status": {"observedGeneration": 1, "replicas": spec, "readyReplicas": ready,
                       "updatedReplicas": spec,
                       "conditions": [{"type": "Available", "status": "True" if available else "False",
                                       "observedGeneration": 1}]}}


ROLES = {"prefill": 2, "decode": 1}


def _rolled(image: str, rev: str) -> list[dict[str, Any]]:
    return [_child(n, rev, image, r, created="2026-01-01T00:00:10Z") for n, r in ROLES.items()]


def test_no_status_is_read_from_children() -> None:
    ds = _ds("v2", ROLES)
    assert not ds_status_written(ds)
    assert not ds_status_written({**ds, "status": {}})
    assert ds_status_written({**ds, "status": {"observedGeneration": 2}})
    checks = ds_children_checks(ds, _rolled("v2", "bbb"))
    assert all(checks.values()), checks
    assert explain_ds_children(ds, _rolled("v2", "bbb")) == "done"


def test_old_children_do_not_pass_for_a_new_template() -> None:
    """Right after the new roles are applied the controller has not created their children yet: the
    old revision, at its full equality, must not pass for the new spec."""
    checks = ds_children_checks(_ds("v2", ROLES), _rolled("v1", "aaa"))
    assert not checks["currentRevision"] and not checks["role:prefill"], checks
    assert "no child LWS on the DS's current template" in explain_ds_children(_ds("v2", ROLES),
                                                                               _rolled("v1", "aaa"))


def test_an_unready_child_fails_its_role_and_is_named() -> None:
    kids = _rolled("v2", "bbb")
    kids[0] = _child("prefill", "bbb", "v2", 2, ready=1, created="2026-01-01T00:00:10Z", available=False)
    checks = ds_children_checks(_ds("v2", ROLES), kids)
    assert not checks["role:prefill"] and checks["role:decode"], checks
    why = explain_ds_children(_ds("v2", ROLES), kids)
    assert why.startswith("lws/d-bbb-prefill (prefill) failing available,fullEquality:"), why
    assert "readyReplicas 1 of 2" in why


def test_a_child_below_the_role_target_fails() -> None:
    kids = _rolled("v2", "bbb")
    kids[1] = _child("decode", "bbb", "v2", 0, created="2026-01-01T00:00:10Z")  # created at 0, not scaled
    checks = ds_children_checks(_ds("v2", ROLES), kids)
    assert not checks["role:decode"], checks
    assert "lws/d-bbb-decode: spec.replicas 0, want 1" in explain_ds_children(_ds("v2", ROLES), kids)


def test_an_old_revision_keeping_groups_fails_until_drained() -> None:
    old = [_child(n, "aaa", "v1", 1, created="2026-01-01T00:00:01Z") for n in ROLES]
    checks = ds_children_checks(_ds("v2", ROLES), old + _rolled("v2", "bbb"))
    assert not checks["oldRevisionsDrained"] and checks["role:prefill"], checks
    assert "lws/d-aaa-prefill (revision aaa) still has 1 groups" in explain_ds_children(
        _ds("v2", ROLES), old + _rolled("v2", "bbb"))
    drained = copy.deepcopy(old)
    for o in drained:  # scaled to 0, not yet deleted: counts nothing (as upstream's status sums)
        o["spec"]["replicas"] = o["status"]["replicas"] = o["status"]["readyReplicas"] = 0
    assert all(ds_children_checks(_ds("v2", ROLES), drained + _rolled("v2", "bbb")).values())


def test_a_reverted_template_picks_the_newest_matching_revision() -> None:
    """v1 -> v2 -> v1 again: the children of both v1 revisions match; the newest is the target."""
    stale = [_child(n, "aaa", "v1", 0, created="2026-01-01T00:00:01Z") for n in ROLES]
    new = [_child(n, "ccc", "v1", r, created="2026-01-01T00:00:20Z") for n, r in ROLES.items()]
    assert all(ds_children_checks(_ds("v1", ROLES), stale + new).values())


def test_slices_need_one_child_each() -> None:
    ds = _ds("v2", ROLES)
    ds["spec"]["slices"] = 2
    kids = _rolled("v2", "bbb")  # slice 0 only (no slice label reads as slice 0, as v0.9.0 adopts)
    checks = ds_children_checks(ds, kids)
    assert not checks["role:prefill"]
    assert "role prefill slice 1: no child LWS on revision bbb" in explain_ds_children(ds, kids)


def test_go_zero_values_in_the_child_template_still_match() -> None:
    """Upstream v0.9.0 copies the role template through Go structs: the child carries ``resources: {}``
    on each container and an empty template metadata the DS spec does not have (seen on the
    reference cluster)."""
    kids = _rolled("v2", "bbb")
    for c in kids:
        tmpl = c["spec"]["leaderWorkerTemplate"]["workerTemplate"]
        tmpl["spec"]["containers"][0]["resources"] = {}
        tmpl["metadata"]["annotations"] = {}
    assert all(ds_children_checks(_ds("v2", ROLES), kids).values())
    for c in kids:  # a real difference is still one
        c["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]["resources"] = {
            "limits": {"cpu": "1"}}
    assert not ds_children_checks(_ds("v2", ROLES), kids)["currentRevision"]


def test_quantities_written_back_as_text_and_webhook_annotations_still_match() -> None:
    """Seen on the reference cluster with Kueue: the role's ``nvidia.com/gpu: 8`` comes back as ``"8"``
    on the child (Go's Quantity), and Kueue's LWS webhook adds two annotations to the child's pod
    template. Before, the gate never found the new revision and rolled every such DS back."""
    ds = _ds("v2", ROLES)
    for role in ds["spec"]["roles"]:
        tmpl = role["spec"]["leaderWorkerTemplate"]["workerTemplate"]
        tmpl["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": 8, "memory": "1Gi"}}
        tmpl["metadata"]["annotations"] = {"checksum/config": "abc"}
    kids = _rolled("v2", "bbb")
    for c in kids:
        tmpl = c["spec"]["leaderWorkerTemplate"]["workerTemplate"]
        tmpl["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": "8",
                                                                "memory": "1073741824"}}
        tmpl["metadata"]["annotations"] = {
            "checksum/config": "abc", "kueue.x-k8s.io/pod-group-serving": "true",
            "kueue.x-k8s.io/pod-suspending-parent": "leaderworkerset.x-k8s.io/leaderworkerset"}
    assert all(ds_children_checks(ds, kids).values()), explain_ds_children(ds, kids)
    # a release that changes only an annotation, or a quantity, is still a different template
    for change in ({"checksum/config": "def"}, None):
        other = copy.deepcopy(ds)
        for role in other["spec"]["roles"]:
            tmpl = role["spec"]["leaderWorkerTemplate"]["workerTemplate"]
            if change is not None:
                tmpl["metadata"]["annotations"] = change
            else:
                tmpl["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = 4
        assert not ds_children_checks(other, kids)["currentRevision"], change
