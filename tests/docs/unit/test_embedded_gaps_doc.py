"""docs/embedded-cluster.md lists every embedded gap of the conformance tier's lists, as generated
(tests/conformance/gapsdoc.py): a changed list without a regenerated doc fails here, in `make test`.
Also checks both lists' entries are well-formed (the conformance tier itself needs the clusters)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[2] / "conformance"))

import gapsdoc
from differential import Difference, compare, flatten, glob, load_ignores, normalise


def test_doc_section_is_generated_from_the_lists() -> None:
    doc = gapsdoc.DOC.read_text()
    assert gapsdoc.current(doc), f"{gapsdoc.DOC.name} lacks the generated section's markers"
    assert gapsdoc.current(doc) == gapsdoc.section(), \
        "the measured differences changed: run .venv/bin/python tests/conformance/gapsdoc.py --write"


def test_a_changed_list_makes_the_section_stale(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("allowlist.yaml", "differential.yaml"):
        (tmp_path / name).write_text((gapsdoc.HERE / name).read_text())
    (tmp_path / "differential.yaml").write_text(
        "- {object: Pod, path: spec.x, kind: embedded-gap, reason: r, effect: e}\n")
    monkeypatch.setattr(gapsdoc, "HERE", tmp_path)
    assert "Pod, `spec.x`" in gapsdoc.section()
    assert gapsdoc.current(gapsdoc.DOC.read_text()) != gapsdoc.section()


def test_both_lists_are_well_formed() -> None:
    import clusters  # the allow-list's checks: kind, reason, effect of an embedded gap

    assert clusters.allowlist()
    load_ignores()


def test_normalise_and_flatten_name_paths_by_key() -> None:
    pod = {"kind": "Pod", "metadata": {"name": "a-0", "uid": "u1", "resourceVersion": "7",
                                       "creationTimestamp": "2026-01-01T00:00:00Z",
                                       "labels": {"pod-template-hash": "abc12345", "x.io/k": "v"}},
           "spec": {"nodeName": "n3",
                    "containers": [{"name": "engine", "env": [{"name": "A", "value": "1"}],
                                    "volumeMounts": [{"name": "kube-api-access-x7k2q", "mountPath": "/t"}]}],
                    "volumes": [{"name": "kube-api-access-x7k2q", "projected": {"defaultMode": 420}}]},
           "status": {"podIP": "10.0.0.3", "conditions": [{"type": "Ready", "status": "True",
                                                          "lastTransitionTime": "2026-01-01T00:00:01Z"}]}}
    flat = dict(flatten(normalise(pod, {"abc12345"})))
    assert flat["metadata.uid"] == "<uid>" and flat["spec.nodeName"] == "<node>"
    assert flat["metadata.labels.pod-template-hash"] == "<hash>"
    assert flat["metadata.labels[x.io/k]"] == "v"
    assert flat["spec.containers[engine].env[A].value"] == "1"
    assert flat["status.conditions[Ready].lastTransitionTime"] == "<time>"
    assert flat["status.podIP"] == "<ip>"
    # the token volume's random suffix: the same path on both clusters
    assert flat["spec.volumes[kube-api-access-<rand>].projected.defaultMode"] == 420
    assert flat["spec.containers[engine].volumeMounts[kube-api-access-<rand>].mountPath"] == "/t"


def test_compare_reports_paths_and_whole_objects() -> None:
    ref = {"Pod/a": {"spec.x": 1, "spec.y": 2}, "Service/s": {"spec.z": 1}}
    emb = {"Pod/a": {"spec.x": 1}}
    c = compare("examples/e.yaml", ref, emb)
    assert (c.objects, c.paths, c.matched, c.only_reference) == (1, 2, 1, 1)
    assert [(d.obj, d.path) for d in c.differences] == [("Pod/a", "spec.y"), ("Service/s", ".")]
    assert glob("spec.containers[*].env", "spec.containers[engine].env")
    assert not glob("spec.containers[*]", "spec.volumes[v]")
    assert Difference("s", "Pod/a", "spec.y", 2, "<absent>").kind == "Pod"
