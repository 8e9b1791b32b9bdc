"""The whole-object differential (issue #25): every upstream example and every rendered overlay
(dev, staging, prod) applied once to both clusters; every object each produces (what it applied,
what its owner references lead to, and a Service's Endpoints) normalised and compared path by path
(differential.py). A difference must be explained by an entry of differential.yaml (kind: version,
embedded-gap, nondeterministic or modelled-out, with its reason, and for an embedded gap its effect
on users: docs/embedded-cluster.md lists them, generated from the file); an entry that explains no
difference of the run fails ``test_every_ignore_entry_still_needed``.

The run's figures (objects and paths compared, matched, ignored by kind) go to
``build/conformance/differential.json`` with every difference: ``bench/conformance_figures.py``
prints them, and its ``--update-differential`` writes the unexplained ones into differential.yaml as
candidate entries to review.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from clusters import Target, note, wait_for
from differential import (
    Comparison,
    Difference,
    compare,
    explain,
    hashes_in,
    load_ignores,
    produced,
    snapshot,
)

from lwsflow.components.kustomize import kustomize_build
from lwsflow.controller.api.objects import is_ds, is_lws
from lwsflow.controller.api.paths import example_name, lws_examples
from lwsflow.controller.errors import NotFound
from lwsflow.controller.kube.client import Kube
from lwsflow.controller.yamlio import dump_yaml_documents, load_yaml_documents

REPO = Path(__file__).resolve().parents[2]
REPORT_DIR = Path(os.environ.get("LWSFLOW_CONFORMANCE_REPORT", REPO / "build" / "conformance"))
REPORT = REPORT_DIR / "differential.json"
# sigs.k8s.io/lws v0.9.0's examples holding a LeaderWorkerSet or DisaggregatedSet (as test_examples.py)
EXAMPLES = {example_name(p): p for p in lws_examples()
            if any(is_lws(d) or is_ds(d) for d in load_yaml_documents(p))}
ENVS = ("dev", "staging", "prod")
SOURCES = [f"examples/{name}" for name in EXAMPLES] + [f"overlays/{e}" for e in ENVS]
STABLE_S = 4.0
pytestmark = pytest.mark.timeout(900)  # the module's fixture applies and compares everything once
# every namespaced kind a manifest of the project or of upstream can produce, by API group path
RESOURCES = [
    ("apis/leaderworkerset.x-k8s.io/v1", "leaderworkersets", "LeaderWorkerSet"),
    ("apis/disaggregatedset.x-k8s.io/v1", "disaggregatedsets", "DisaggregatedSet"),
    ("apis/apps/v1", "statefulsets", "StatefulSet"),
    ("apis/apps/v1", "controllerrevisions", "ControllerRevision"),
    ("apis/apps/v1", "deployments", "Deployment"),
    ("apis/apps/v1", "replicasets", "ReplicaSet"),
    ("api/v1", "pods", "Pod"),
    ("api/v1", "services", "Service"),
    ("api/v1", "endpoints", "Endpoints"),
    ("api/v1", "persistentvolumeclaims", "PersistentVolumeClaim"),
    ("api/v1", "configmaps", "ConfigMap"),
    ("api/v1", "secrets", "Secret"),
    ("api/v1", "serviceaccounts", "ServiceAccount"),
    ("apis/discovery.k8s.io/v1", "endpointslices", "EndpointSlice"),
    ("apis/autoscaling/v2", "horizontalpodautoscalers", "HorizontalPodAutoscaler"),
    ("apis/policy/v1", "poddisruptionbudgets", "PodDisruptionBudget"),
    ("apis/rbac.authorization.k8s.io/v1", "roles", "Role"),
    ("apis/rbac.authorization.k8s.io/v1", "rolebindings", "RoleBinding"),
]


def _docs(source: str, rendered: Path) -> list[dict[str, Any]]:
    """The manifest of a source, each object with the namespace it goes to: an example into a
    namespace of its own (``df<NN>``; a pinned ``namespace: default`` moved there), an overlay as
    rendered (its own namespaces)."""
    group, _, name = source.partition("/")
    if group == "overlays":
        return kustomize_build(rendered / name)
    ns = f"df{SOURCES.index(source):02d}"
    docs = load_yaml_documents(EXAMPLES[name])
    for d in docs:
        d.setdefault("metadata", {})["namespace"] = ns
    return docs


def _apply(target: Target, docs: list[dict[str, Any]]) -> None:
    """One server-side apply of the phase's objects, their namespaces first (kubectl orders them)."""
    namespaces = sorted({d["metadata"]["namespace"] for d in docs if d["metadata"].get("namespace")})
    ns_docs = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}} for ns in namespaces]
    target.kubectl("apply", "--server-side", "-f", "-", stdin=dump_yaml_documents([*ns_docs, *docs]),
                   timeout=180)


def _list(kube: Kube, namespaces: set[str]) -> list[dict[str, Any]]:
    out = []
    for group, plural, kind in RESOURCES:
        for ns in sorted(namespaces):
            try:
                items = kube.request("GET", f"/{group}/namespaces/{ns}/{plural}").get("items") or []
            except NotFound:  # not served by this cluster: its objects show as absent
                items = []
            for o in items:
                o.setdefault("kind", kind)
                o.setdefault("apiVersion", group.split("/", 1)[1])
            out.extend(items)
    return out


def _observe(kube: Kube, manifests: dict[str, list[dict[str, Any]]]) -> dict[str, dict[str, dict[str, Any]]]:
    """Per source, ``Kind/name -> {path: value}`` of the objects it produced, normalised."""
    namespaces = {d["metadata"]["namespace"] for docs in manifests.values() for d in docs
                  if d["metadata"].get("namespace")}
    objects = _list(kube, namespaces)
    hashes = hashes_in(objects)
    out = {}
    for source, docs in manifests.items():
        mine = {d["metadata"]["namespace"] for d in docs if d["metadata"].get("namespace")}
        applied = {(d["kind"], d["metadata"]["name"]) for d in docs}
        here = [o for o in objects if o["metadata"].get("namespace") in mine]
        out[source] = snapshot(produced(here, applied), hashes)
    return out


def _settled(target: Target, manifests: dict[str, list[dict[str, Any]]],
             timeout: float = 180) -> dict[str, dict[str, dict[str, Any]]]:
    """What :func:`_observe` sees once it has not changed for STABLE_S seconds (the controllers are
    done; normalisation hides the timestamps and resourceVersions that keep moving)."""
    kube = Kube.connect(str(target.kubeconfig), attempts=3)
    last, since = _observe(kube, manifests), time.monotonic()
    deadline = since + timeout
    while time.monotonic() - since < STABLE_S:
        assert time.monotonic() < deadline, f"[{target.name}] the differential's objects did not settle"
        time.sleep(1.0)
        now = _observe(kube, manifests)
        if now != last:
            last, since = now, time.monotonic()
    return last


# applied together, one phase after another (each phase's namespaces deleted before the next): the
# examples fit the default pools together; each overlay environment nearly fills the GPUs alone, and
# two at once would leave a different set of pods Pending on each scheduler
PHASES = [[s for s in SOURCES if s.startswith("examples/")], *([f"overlays/{e}"] for e in ENVS)]


def _namespaces(manifests: dict[str, list[dict[str, Any]]]) -> list[str]:
    return sorted({d["metadata"]["namespace"] for docs in manifests.values() for d in docs
                   if d["metadata"].get("namespace")})


def _phase(reference: Target, embedded: Target, manifests: dict[str, list[dict[str, Any]]]
           ) -> dict[str, Comparison]:
    everything = [d for docs in manifests.values() for d in docs]
    with ThreadPoolExecutor(2) as pool:  # the clusters are independent: both at once
        list(pool.map(lambda t: _apply(t, everything), (reference, embedded)))
    with ThreadPoolExecutor(2) as pool:
        ref_f = pool.submit(_settled, reference, manifests)
        emb_f = pool.submit(_settled, embedded, manifests)
        ref, emb = ref_f.result(), emb_f.result()
    _delete(reference, embedded, _namespaces(manifests))
    return {s: compare(s, ref[s], emb[s]) for s in manifests}


def _delete(reference: Target, embedded: Target, namespaces: list[str]) -> None:
    """Delete the phase's namespaces and wait until their pods are gone, so that the next phase
    and the later checks get the nodes back (the namespaces themselves may take longer: the
    reference's namespace controller finishes in its own time)."""
    for target in (reference, embedded):
        target.kubectl("delete", "namespace", *namespaces, "--wait=false", check=False)
    for target in (reference, embedded):
        t0 = time.monotonic()
        wait_for(f"[{target.name}] pods of {namespaces} gone", lambda t=target: not any(
            t.items("pods", ns) for ns in namespaces), timeout=150, every=1.0)
        print(f"[{target.name}] {len(namespaces)} namespace(s) emptied in {time.monotonic() - t0:.1f} s",
              file=sys.stderr)


@pytest.fixture(scope="module")
def comparisons(reference: Target, embedded: Target, rendered: Path) -> dict[str, Comparison]:
    """Every source applied to both clusters, phase by phase, settled, compared; the report written."""
    t0 = time.monotonic()
    out: dict[str, Comparison] = {}
    for phase in PHASES:
        out.update(_phase(reference, embedded, {s: _docs(s, rendered) for s in phase}))
    _report(out, time.monotonic() - t0)
    return out


def _report(comparisons: dict[str, Comparison], seconds: float) -> None:
    ignores = load_ignores()
    diffs = []
    by_kind: Counter[str] = Counter()
    for c in comparisons.values():
        for d in c.differences:
            entry = explain(d, ignores)
            by_kind[entry.kind if entry else "unexplained"] += 1
            diffs.append({"source": d.source, "object": d.obj, "path": d.path,
                          "reference": d.reference, "embedded": d.embedded,
                          "kind": entry.kind if entry else None, "entry": entry.id if entry else None})
    figures = {
        "sources": len(comparisons),
        "objects_compared": sum(c.objects for c in comparisons.values()),
        "objects_only_reference": sum(c.only_reference for c in comparisons.values()),
        "objects_only_embedded": sum(c.only_embedded for c in comparisons.values()),
        "paths_compared": sum(c.paths for c in comparisons.values()),
        "paths_matched": sum(c.matched for c in comparisons.values()),
        "differences": len(diffs),
        "ignored_by_kind": dict(sorted(by_kind.items())),
        "entries": len(ignores),
        "entries_unused": [i.id for i in ignores
                           if not any(i.matches(d) for c in comparisons.values() for d in c.differences)],
        "seconds": round(seconds, 1),
    }
    REPORT.parent.mkdir(parents=True, exist_ok=True)
    REPORT.write_text(json.dumps({"figures": figures, "differences": diffs}, indent=1, default=str))
    print(f"\ndifferential: {json.dumps(figures)}", file=sys.stderr)


def _show(d: Difference) -> str:
    return f"{d.obj} {d.path}: reference={d.reference!r} embedded={d.embedded!r}"


@pytest.mark.parametrize("source", SOURCES)
def test_whole_objects_match(comparisons: dict[str, Comparison], source: str) -> None:
    c = comparisons[source]
    assert c.objects or c.only_reference, f"{source}: the reference cluster made nothing"
    ignores = load_ignores()
    used = {e.id: e.kind for d in c.differences if (e := explain(d, ignores))}
    for entry_id, kind in sorted(used.items()):
        note("ignored", entry_id)
        note("ignored-kind", kind)  # the figures count the test under its entries' kinds
    unexplained = [d for d in c.differences if explain(d, ignores) is None]
    assert not unexplained, (f"{len(unexplained)} difference(s) not in differential.yaml "
                             "(bench/conformance_figures.py --update-differential writes candidates):\n"
                             + "\n".join(map(_show, unexplained[:200])))


def test_every_ignore_entry_still_needed(comparisons: dict[str, Comparison]) -> None:
    """An entry that explains no difference of this run describes a difference that is gone."""
    ignores = load_ignores()
    diffs = [d for c in comparisons.values() for d in c.differences]
    unused = [i.id for i in ignores if not any(i.matches(d) for d in diffs)]
    assert not unused, "now matching, drop from differential.yaml:\n" + "\n".join(unused)
