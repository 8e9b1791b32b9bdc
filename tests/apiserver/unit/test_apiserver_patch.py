"""Patch semantics: RFC 7386 merge, RFC 6902 JSON patch, strategic merge directives, server-side apply."""

from __future__ import annotations

import pytest

from lwsflow.controller.errors import Conflict, Unprocessable
from lwsflow.sim.apiserver import apply as ssa
from lwsflow.sim.apiserver.patch import json_merge_patch, json_patch, strategic_merge

POD = {
    "spec": {
        "containers": [
            {"name": "a", "image": "1", "ports": [{"containerPort": 80}]},
            {"name": "b", "image": "2"},
        ],
        "tolerations": [{"key": "x"}],
    },
    "metadata": {"finalizers": ["f1"], "labels": {"k": "v"}},
}


def test_json_merge_patch_rfc7386() -> None:
    assert json_merge_patch({"a": "b", "c": {"d": "e", "f": "g"}}, {"a": "z", "c": {"f": None}}) == {
        "a": "z",
        "c": {"d": "e"},
    }
    assert json_merge_patch({"a": [1, 2]}, {"a": [3]}) == {"a": [3]}  # lists replace
    assert json_merge_patch({"a": 1}, {"b": {"c": None}}) == {"a": 1, "b": {}}


def test_json_patch_rfc6902() -> None:
    doc = {"spec": {"list": [1, 2], "x": 1}}
    out = json_patch(
        doc,
        [
            {"op": "add", "path": "/spec/list/1", "value": 9},
            {"op": "add", "path": "/spec/list/-", "value": 3},
            {"op": "remove", "path": "/spec/x"},
            {"op": "copy", "from": "/spec/list", "path": "/spec/copy"},
            {"op": "move", "from": "/spec/copy", "path": "/moved"},
            {"op": "replace", "path": "/spec/list/0", "value": 0},
            {"op": "test", "path": "/moved/0", "value": 1},
            {"op": "add", "path": "/a~1b", "value": True},
        ],
    )
    assert out == {"spec": {"list": [0, 9, 2, 3]}, "moved": [1, 9, 2, 3], "a/b": True}
    assert doc == {"spec": {"list": [1, 2], "x": 1}}  # the input is untouched
    with pytest.raises(Unprocessable):
        json_patch(doc, [{"op": "test", "path": "/spec/x", "value": 2}])
    with pytest.raises(Unprocessable):
        json_patch(doc, [{"op": "remove", "path": "/spec/missing"}])


def test_strategic_merge_keys_and_directives() -> None:
    out = strategic_merge(
        POD,
        {
            "spec": {
                "containers": [{"name": "b", "image": "3"}, {"name": "c", "image": "4"}],
                "tolerations": [{"key": "y"}],
            },
            "metadata": {"finalizers": ["f2"]},
        },
    )
    assert [(c["name"], c["image"]) for c in out["spec"]["containers"]] == [
        ("a", "1"),
        ("b", "3"),
        ("c", "4"),
    ]
    assert out["spec"]["containers"][0]["ports"] == [{"containerPort": 80}]
    assert out["spec"]["tolerations"] == [{"key": "y"}]  # no merge key: replaced
    assert out["metadata"]["finalizers"] == ["f1", "f2"]  # merge strategy on a primitive list
    out = strategic_merge(
        POD,
        {
            "spec": {
                "containers": [{"name": "a", "$patch": "delete"}],
                "$setElementOrder/containers": [{"name": "b"}, {"name": "a"}],
            },
            "metadata": {"$deleteFromPrimitiveList/finalizers": ["f1"], "labels": {"k": None}},
        },
    )
    assert [c["name"] for c in out["spec"]["containers"]] == ["b"]
    assert out["metadata"] == {"finalizers": [], "labels": {}}
    out = strategic_merge(POD, {"spec": {"$patch": "replace", "containers": []}})
    assert out["spec"] == {"containers": []}
    ordered = strategic_merge(POD, {"spec": {"$setElementOrder/containers": [{"name": "b"}, {"name": "a"}]}})
    assert [c["name"] for c in ordered["spec"]["containers"]] == ["b", "a"]


def _obj(replicas: int, image: str = "1", extra_env: bool = False) -> dict:
    c: dict = {"name": "a", "image": image}
    if extra_env:
        c["env"] = [{"name": "E", "value": "1"}]
    return {
        "apiVersion": "v1",
        "kind": "X",
        "metadata": {"name": "x"},
        "spec": {"replicas": replicas, "template": {"spec": {"containers": [c]}}},
    }


def test_server_side_apply_ownership() -> None:
    live = ssa.apply({"metadata": {"name": "x"}}, _obj(3, extra_env=True), "alice", False, "t0")
    owned = ssa.from_fields_v1(live["metadata"]["managedFields"][0]["fieldsV1"])
    assert ("f:spec", "f:replicas") in owned
    # alice stops applying env: the field she alone owned is removed
    live = ssa.apply(live, _obj(3), "alice", False, "t1")
    assert "env" not in live["spec"]["template"]["spec"]["containers"][0]
    # bob changes replicas with an update; alice's next apply of a different value conflicts
    bumped = {**live, "spec": {**live["spec"], "replicas": 5}}
    ssa.record_update(live, bumped, "bob", "t2")
    assert {m["manager"] for m in bumped["metadata"]["managedFields"]} == {"alice", "bob"}
    with pytest.raises(Conflict) as err:
        ssa.apply(bumped, _obj(3), "alice", False, "t3")
    assert err.value.details["causes"][0]["field"] == ".spec.replicas"
    # applying the live value co-owns without conflict; force takes the field over from bob
    assert ssa.apply(bumped, _obj(5), "alice", False, "t3")["spec"]["replicas"] == 5
    forced = ssa.apply(bumped, _obj(3), "alice", True, "t3")
    assert forced["spec"]["replicas"] == 3
    assert "bob" not in {m["manager"] for m in forced["metadata"]["managedFields"]}


def test_keyed_list_items_merge_in_apply() -> None:
    live = ssa.apply({"metadata": {"name": "x"}}, _obj(1), "alice", False, "t0")
    other = _obj(1)
    other["spec"]["template"]["spec"]["containers"] = [{"name": "sidecar", "image": "s"}]
    merged = ssa.apply(live, other, "bob", False, "t1")
    assert [c["name"] for c in merged["spec"]["template"]["spec"]["containers"]] == ["a", "sidecar"]
    assert ssa.render_path(("f:spec", 'k:{"name":"a"}', "f:image")) == '.spec[name="a"].image'
