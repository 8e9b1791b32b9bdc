"""Check 1: every upstream example applied with ``kubectl apply --server-side`` on both clusters gives
the same StatefulSets, pods, Services, PVCs and HPAs: names, labels, annotations, env vars and
subdomains
(lws-semantics §a, §b; the reference is the upstream LWS controller).

Each example goes into a namespace of the same name on both clusters (examples that pin
``namespace: default`` are moved there). What legitimately differs is normalised away: uids,
timestamps, IPs, node names and the hash values of revision labels. Remaining differences must be
on allowlist.yaml (``examples/<file>/<kind>/<name>/<field>`` patterns, each with a reason).
"""

from __future__ import annotations

import fnmatch
from pathlib import Path
from typing import Any

import pytest
from clusters import Target, allowed, allowlist, now_matches, settle

from lwsflow.controller.api.objects import is_ds, is_lws
from lwsflow.controller.api.paths import example_name, lws_examples
from lwsflow.controller.yamlio import dump_yaml_documents, load_yaml_documents

# sigs.k8s.io/lws v0.9.0's examples (scripts/upstream/go.mod), the version the reference cluster runs:
# the files holding a LeaderWorkerSet or DisaggregatedSet (not the kustomization, the controller
# Configuration or RBAC-only files).
EXAMPLES = [p for p in lws_examples() if any(is_lws(d) or is_ds(d) for d in load_yaml_documents(p))]
# Values that differ by construction: content hashes of templates and revisions, set by each
# implementation's own hashing (names of revisions are compared through the label keys).
HASHED = {"leaderworkerset.sigs.k8s.io/template-revision-hash", "controller-revision-hash",
          "pod-template-hash", "disaggregatedset.x-k8s.io/revision"}
STABLE_S = 4.0  # nothing changed for this long: the controllers are done
COMPARED: dict[str, set[str]] = {}  # example file -> the allow-list entries its comparison used


def _labels(d: dict[str, Any] | None) -> dict[str, str]:
    return {k: ("<hash>" if k in HASHED else v) for k, v in (d or {}).items()}


def _env(spec: dict[str, Any]) -> dict[str, Any]:
    return {c["name"]: {e["name"]: e.get("value", e.get("valueFrom")) for e in c.get("env") or []}
            for c in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]}


def _pod_fields(md: dict[str, Any], spec: dict[str, Any]) -> dict[str, Any]:
    return {"labels": _labels(md.get("labels")), "annotations": _labels(md.get("annotations")),
            "env": _env(spec), "subdomain": spec.get("subdomain"), "hostname": spec.get("hostname")}


def snapshot(target: Target, ns: str) -> dict[str, Any]:
    """``kind/name/field -> value`` for what check 1 compares."""
    out: dict[str, Any] = {}
    for sts in target.items("statefulsets", ns):
        md, spec = sts["metadata"], sts["spec"]
        base = f"StatefulSet/{md['name']}"
        out[f"{base}/labels"] = _labels(md.get("labels"))
        out[f"{base}/annotations"] = _labels(md.get("annotations"))
        out[f"{base}/replicas"] = spec.get("replicas")
        out[f"{base}/serviceName"] = spec.get("serviceName")
        out[f"{base}/selector"] = _labels((spec.get("selector") or {}).get("matchLabels"))
        for k, v in _pod_fields(spec["template"].get("metadata") or {}, spec["template"]["spec"]).items():
            out[f"{base}/template/{k}"] = v
        out[f"{base}/volumeClaimTemplates"] = sorted(
            (t.get("metadata") or {}).get("name", "") for t in spec.get("volumeClaimTemplates") or [])
    for pod in target.items("pods", ns):
        for k, v in _pod_fields(pod["metadata"], pod["spec"]).items():
            out[f"Pod/{pod['metadata']['name']}/{k}"] = v
    for svc in target.items("services", ns):
        md, spec = svc["metadata"], svc["spec"]
        base = f"Service/{md['name']}"
        out[f"{base}/labels"] = _labels(md.get("labels"))
        out[f"{base}/selector"] = _labels(spec.get("selector"))
        out[f"{base}/headless"] = spec.get("clusterIP") == "None"
        out[f"{base}/publishNotReadyAddresses"] = bool(spec.get("publishNotReadyAddresses"))
    for hpa in target.items("horizontalpodautoscalers", ns):
        md, spec = hpa["metadata"], hpa["spec"]
        out[f"HorizontalPodAutoscaler/{md['name']}/labels"] = _labels(md.get("labels"))
        out[f"HorizontalPodAutoscaler/{md['name']}/scaleTargetRef"] = spec.get("scaleTargetRef")
    for pvc in target.items("persistentvolumeclaims", ns):
        md = pvc["metadata"]
        out[f"PersistentVolumeClaim/{md['name']}/labels"] = _labels(md.get("labels"))
    return out


def settled(target: Target, ns: str, timeout: float = 90) -> dict[str, Any]:
    """The snapshot once it has not changed for STABLE_S seconds."""
    return settle(f"[{target.name}] {ns}", lambda: snapshot(target, ns), STABLE_S, timeout)


def diff(ref: dict[str, Any], emb: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    return {k: (ref.get(k), emb.get(k)) for k in sorted(set(ref) | set(emb)) if ref.get(k) != emb.get(k)}


def _manifest(path: Path) -> str:
    docs = load_yaml_documents(path)
    for d in docs:
        (d.get("metadata") or {}).pop("namespace", None)
    return dump_yaml_documents(docs)


@pytest.mark.parametrize("path", EXAMPLES, ids=[example_name(p) for p in EXAMPLES])
def test_example_gives_the_same_objects(reference: Target, embedded: Target, path: Path) -> None:
    ns = f"ex{EXAMPLES.index(path):02d}"
    manifest = _manifest(path)
    for target in (reference, embedded):
        target.kubectl("create", "namespace", ns)
        target.kubectl("apply", "--server-side", "-n", ns, "-f", "-", stdin=manifest)
    ref, emb = settled(reference, ns), settled(embedded, ns)
    assert ref, "the reference cluster made nothing"
    keyed = {f"examples/{example_name(path)}/{k}": v for k, v in diff(ref, emb).items()}
    used = {k: allowed(k) for k in keyed}
    unexplained = {k: v for k, v in keyed.items() if used[k] is None}
    COMPARED[example_name(path)] = {e for e in used.values() if e}
    assert not unexplained, "\n".join(f"{k}: reference={r!r} embedded={e!r}" for k, (r, e) in
                                      unexplained.items())


def test_every_examples_entry_still_needed() -> None:
    """An ``examples/`` entry whose file pattern covers examples compared in this run but that
    explained none of their differences describes a difference that is gone (an entry's pattern may
    span files, and a file may lack the field: so this is judged over the whole run)."""
    assert COMPARED, "no example was compared in this run"
    for entry in allowlist():
        if not entry.startswith("examples/"):
            continue
        files = [f for f in COMPARED if fnmatch.fnmatchcase(f, entry.split("/")[1])]
        if files and not any(entry in COMPARED[f] for f in files):
            now_matches(entry)
