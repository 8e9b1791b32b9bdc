"""The object store's write semantics: status-subresource separation, generation, copies, NotFound."""

from __future__ import annotations

import pytest

from lwsflow.controller.errors import NotFound
from lwsflow.sim.store import MODIFIED, Selector, Store, clone

STS = "statefulsets.apps"


def _sts(replicas: int = 1, status: dict | None = None) -> dict:
    obj: dict = {"metadata": {"name": "web", "namespace": "ns"}, "spec": {"replicas": replicas}}
    if status is not None:
        obj["status"] = status
    return obj


def test_status_write_keeps_the_stored_spec_and_takes_only_the_status() -> None:
    store = Store(now=lambda: 0.0)
    store.create(STS, _sts(1))
    out = store.replace(STS, _sts(5, {"replicas": 1}), subresource="status", check_version=False)
    assert out["spec"]["replicas"] == 1  # the caller's spec is ignored on the status subresource
    assert out["status"] == {"replicas": 1}
    assert out["metadata"]["generation"] == 1
    cleared = store.replace(STS, _sts(5), subresource="status", check_version=False)
    assert "status" not in cleared  # no status in the body clears it


def test_spec_write_keeps_the_stored_status_and_bumps_generation() -> None:
    store = Store(now=lambda: 0.0)
    store.create(STS, _sts(1))
    store.replace(STS, _sts(1, {"replicas": 1}), subresource="status", check_version=False)
    out = store.replace(STS, _sts(3, {"replicas": 99}), check_version=False)
    assert out["spec"]["replicas"] == 3
    assert out["status"] == {"replicas": 1}  # the caller's status is ignored on the main resource
    assert out["metadata"]["generation"] == 2
    plain = store.replace(STS, _sts(3), check_version=False)  # no status in the body keeps it too
    assert plain["status"] == {"replicas": 1}
    assert plain["metadata"]["resourceVersion"] == out["metadata"]["resourceVersion"]  # a no-op


def test_answers_and_events_are_copies_the_caller_cannot_corrupt() -> None:
    store = Store(now=lambda: 0.0)
    events = []
    store.subscribe(events.append)
    body = _sts(1, {"replicas": 0})
    created = store.create(STS, body)
    body["spec"]["replicas"] = 7
    created["spec"]["replicas"] = 8
    status = {"replicas": 1, "conditions": [{"type": "Ready"}]}
    written = store.replace(STS, _sts(1, status), subresource="status", check_version=False)
    status["conditions"].append({"type": "Bogus"})
    written["status"]["conditions"].clear()
    live = store.get(STS, "ns", "web")
    assert live["spec"]["replicas"] == 1
    assert live["status"] == {"replicas": 1, "conditions": [{"type": "Ready"}]}
    assert events[-1].type == MODIFIED and events[-1].object["status"] == live["status"]


def test_clone_is_deep_and_keeps_values() -> None:
    obj = {"a": [1, {"b": "c"}], "d": None, "e": 1.5, "f": True, "g": (1, 2)}
    out = clone(obj)
    assert out == obj
    assert out["a"] is not obj["a"] and out["a"][1] is not obj["a"][1]


@pytest.mark.parametrize("op", ["get", "replace", "delete"])
def test_missing_objects_are_not_found_by_plural_and_name(op: str) -> None:
    store = Store(now=lambda: 0.0)
    with pytest.raises(NotFound) as err:
        if op == "get":
            store.get(STS, "ns", "web")
        elif op == "replace":
            store.replace(STS, _sts())
        else:
            store.delete(STS, "ns", "web")
    assert err.value.message == 'statefulsets "web" not found'
    assert err.value.details == {"name": "web", "kind": "statefulsets"}


def test_selectors_match_labels_fields_and_the_empty_namespace_of_cluster_objects() -> None:
    pod = {"metadata": {"name": "p", "namespace": "ns", "labels": {"app": "a", "tier": "x"}},
           "spec": {"nodeName": "n1"}}
    node = {"metadata": {"name": "n1"}}
    assert Selector.parse("app=a,tier in (x,y),!gone", "spec.nodeName=n1").matches(pod)
    assert not Selector.parse("tier notin (x)").matches(pod)
    assert not Selector.parse("", "spec.nodeName!=n1").matches(pod)
    assert not Selector.parse("", "status.phase=Running").matches(pod)  # a missing field
    assert Selector.parse("", "metadata.namespace=").matches(node)  # cluster-scoped: namespace ""
    assert not Selector.parse("", "metadata.namespace=ns").matches(node)
    assert Selector.parse("", "metadata.namespace=ns").matches(pod)


def _owned(store: Store, name: str, *owners: dict) -> None:
    refs = [{"apiVersion": "v1", "kind": "ConfigMap", "name": o["metadata"]["name"],
             "uid": o["metadata"]["uid"]} for o in owners]
    store.create("configmaps", {"metadata": {"name": name, "namespace": "ns", "ownerReferences": refs}})


def test_garbage_collection_follows_propagation_owners_and_finalizers() -> None:
    """API conventions (garbage collector): a dependant goes with its last owner and stays, minus the
    dangling reference, while another owner exists; Orphan strips the reference; an owner held by a
    finalizer keeps its dependants until it is removed, unless the deletion is Foreground."""
    store = Store(now=lambda: 0.0)
    a = store.create("configmaps", {"metadata": {"name": "a", "namespace": "ns"}})
    b = store.create("configmaps", {"metadata": {"name": "b", "namespace": "ns"}})
    _owned(store, "both", a, b)
    _owned(store, "only-a", a)
    store.delete("configmaps", "ns", "a")
    assert store.try_get("configmaps", "ns", "only-a") is None
    assert [r["name"] for r in store.get("configmaps", "ns", "both")["metadata"]["ownerReferences"]] == ["b"]
    store.delete("configmaps", "ns", "b", propagation="Orphan")
    assert "ownerReferences" not in store.get("configmaps", "ns", "both")["metadata"]
    held = store.create("configmaps",
                        {"metadata": {"name": "held", "namespace": "ns", "finalizers": ["x/y"]}})
    _owned(store, "kept", held)
    store.delete("configmaps", "ns", "held")
    assert store.try_get("configmaps", "ns", "kept") is not None  # the owner still exists
    store.mutate("configmaps", "ns", "held", lambda o: o["metadata"].pop("finalizers"))
    assert store.try_get("configmaps", "ns", "held") is None
    assert store.try_get("configmaps", "ns", "kept") is None
    fg = store.create("configmaps", {"metadata": {"name": "fg", "namespace": "ns", "finalizers": ["x/y"]}})
    _owned(store, "first", fg)
    store.delete("configmaps", "ns", "fg", propagation="Foreground")
    assert store.try_get("configmaps", "ns", "first") is None and store.try_get("configmaps", "ns", "fg")
