"""The whole-object differential (issue #25): every object a manifest produces on each cluster,
normalised and flattened into ``path -> value`` leaves, compared path by path, each difference
explained by an entry of ``differential.yaml`` or reported.

Pure functions: no cluster, no pytest (test_differential.py drives the clusters; the figures script
and the docs generator read the same ignore file through :func:`load_ignores`).

Normalisation replaces what differs by construction between two clusters running the same
manifests: uids, resourceVersions, times, IPs, node names, container and image ids, the values of
content hashes (template/revision hashes, wherever they appear: labels, names, annotations), the
random suffix ServiceAccount admission gives a pod's token volume (``kube-api-access-<rand>``) and
``managedFields`` (kept as a marker that the object has them). Everything else is compared.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

IGNORES = Path(__file__).with_name("differential.yaml")
# what an ignore entry may be: a version difference (the reference runs upstream LWS v0.9.0, lwsflow
# follows v0.10+), the embedded cluster differing from every upstream version (listed with its effect
# on users in docs/embedded-cluster.md), a value that differs between two runs of one cluster, or a
# part of a real cluster the embedded one does not model on purpose
CLASSES = ("version", "embedded-gap", "nondeterministic", "modelled-out")
WHOLE = "."  # the path of a difference that is a whole object present on one cluster only

# label/annotation keys whose values are content hashes computed by each implementation
HASH_KEYS = ("leaderworkerset.sigs.k8s.io/template-revision-hash", "controller-revision-hash",
             "pod-template-hash", "disaggregatedset.x-k8s.io/revision",
             "statefulset.kubernetes.io/pod-name-hash")
# keys whose values are identities or places chosen at run time
PLACEHOLDER_KEYS = {"uid": "<uid>", "resourceVersion": "<rv>", "nodeName": "<node>",
                    "containerID": "<id>", "imageID": "<id>"}
_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$")
_IP = re.compile(r"^(\d{1,3}\.){3}\d{1,3}$|^[0-9a-f:]*::[0-9a-f:]*$|^fd[0-9a-f]{2}:[0-9a-f:]+$")
_SEGMENT = re.compile(r"^[A-Za-z0-9_-]+$")
# ServiceAccount admission names a pod's token volume with a random 5-character suffix on each cluster
_TOKEN_VOLUME = re.compile(r"^kube-api-access-[a-z0-9]{5}$")
# list items are keyed by the first of these fields they carry (unique within the list), so that a
# path names a container, an env var, a condition... rather than a position
_LIST_KEYS = ("name", "type", "mountPath", "containerPort", "port", "devicePath", "ip", "key")


def hashes_in(objects: Iterable[dict[str, Any]]) -> set[str]:
    """The hash values the objects carry (labels of :data:`HASH_KEYS`, and the hash part of a
    ``<name>-<hash>`` value such as ``controller-revision-hash``)."""
    out: set[str] = set()
    for o in objects:
        md = o.get("metadata") or {}
        tmpl = ((o.get("spec") or {}).get("template") or {}).get("metadata") or {}
        for labels in (md.get("labels"), md.get("annotations"), tmpl.get("labels")):
            for k, v in (labels or {}).items():
                if k in HASH_KEYS and isinstance(v, str) and v:
                    out.add(v.rsplit("-", 1)[-1])  # of <sts>-<hash>, the hash: the name stays
        status = o.get("status") or {}
        for k in ("currentRevision", "updateRevision"):  # <sts>-<hash>, also when no pod carries it
            if isinstance(status.get(k), str) and "-" in status[k]:
                out.add(status[k].rsplit("-", 1)[-1])
        if o.get("kind") == "ControllerRevision":
            out.add(str(md.get("name", "")).rsplit("-", 1)[-1])
    return {h for h in out if len(h) >= 5}


def normalise(obj: Any, hashes: set[str], key: str = "") -> Any:
    """``obj`` with the run-time values replaced by placeholders (see the module docstring)."""
    if isinstance(obj, dict):
        out: dict[str, Any] = {}
        for k, v in obj.items():
            if k == "managedFields":
                out[k] = "<managedFields>"
            elif k in ("creationTimestamp", "deletionTimestamp") and v:
                out[k] = "<time>"
            elif k in HASH_KEYS and isinstance(v, str):
                out[k] = "<hash>"
            elif k in PLACEHOLDER_KEYS and isinstance(v, str | int) and v != "":
                out[k] = PLACEHOLDER_KEYS[k]
            else:
                out[_replace(k, hashes)] = normalise(v, hashes, k)
        return out
    if isinstance(obj, list):
        return [normalise(v, hashes, key) for v in obj]
    if isinstance(obj, str):
        if _TIME.match(obj):
            return "<time>"
        if _IP.match(obj):
            return "<ip>"
        if _TOKEN_VOLUME.match(obj):
            return "kube-api-access-<rand>"
        return _replace(obj, hashes)
    return obj


def _replace(s: str, hashes: set[str]) -> str:
    for h in hashes:
        if h in s:
            s = s.replace(h, "<hash>")
    return s


def _seg(key: str) -> str:
    return key if _SEGMENT.match(key) else f"[{key}]"


def flatten(obj: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """``(path, leaf value)`` pairs: ``spec.containers[engine].env[LWS_NAME].value``; a map key with
    other characters than ``[A-Za-z0-9_-]`` is written ``[key]``; an empty map or list is a leaf."""
    if isinstance(obj, dict) and obj:
        for k in sorted(obj):
            seg = _seg(k)
            yield from flatten(obj[k], f"{prefix}.{seg}" if prefix and not seg.startswith("[") else
                               f"{prefix}{seg}")
        return
    if isinstance(obj, list) and obj:
        keys = _item_keys(obj)
        for i, item in enumerate(obj):
            yield from flatten(item, f"{prefix}[{keys[i] if keys else i}]")
        return
    yield prefix, ({} if isinstance(obj, dict) else [] if isinstance(obj, list) else obj)


def _item_keys(items: list[Any]) -> list[str] | None:
    if not all(isinstance(i, dict) for i in items):
        return None
    for k in _LIST_KEYS:
        vals = [str(i.get(k)) for i in items]
        if all(k in i for i in items) and len(set(vals)) == len(vals):
            return vals
    return None


def object_key(obj: dict[str, Any]) -> str:
    """``Kind/name`` of a normalised object (a ControllerRevision also by its revision number: its
    name is ``<owner>-<hash>`` for every revision)."""
    name = obj["metadata"].get("name", "")
    if obj.get("kind") == "ControllerRevision":
        name = f"{name}#{obj.get('revision')}"
    return f"{obj.get('kind')}/{name}"


def produced(objects: list[dict[str, Any]], applied: set[tuple[str, str]]) -> list[dict[str, Any]]:
    """The objects a manifest produced: those it applied (``(kind, name)``), those whose owner
    references lead to one of them, and the Endpoints of a kept Service (same name, no owner)."""
    kept = {o["metadata"]["uid"] for o in objects if (o.get("kind"), o["metadata"].get("name")) in applied}
    grew = True
    while grew:
        grew = False
        for o in objects:
            uid = o["metadata"]["uid"]
            owners = o["metadata"].get("ownerReferences") or []
            if uid not in kept and any(r.get("uid") in kept for r in owners):
                kept.add(uid)
                grew = True
    services = {o["metadata"]["name"] for o in objects
                if o.get("kind") == "Service" and o["metadata"]["uid"] in kept}
    return [o for o in objects if o["metadata"]["uid"] in kept
            or (o.get("kind") == "Endpoints" and o["metadata"]["name"] in services)]


def snapshot(objects: list[dict[str, Any]], hashes: set[str]) -> dict[str, dict[str, Any]]:
    """``Kind/name -> {path: value}`` of normalised objects."""
    out: dict[str, dict[str, Any]] = {}
    for o in objects:
        n = normalise(o, hashes)
        out[object_key(n)] = dict(flatten(n))
    return out


@dataclass
class Difference:
    source: str
    obj: str  # Kind/name
    path: str
    reference: Any
    embedded: Any

    @property
    def kind(self) -> str:
        return self.obj.split("/", 1)[0]


@dataclass
class Comparison:
    """One source's objects on both clusters."""

    source: str
    objects: int = 0  # present on both
    paths: int = 0  # leaf paths of those, union of both sides
    matched: int = 0
    only_reference: int = 0
    only_embedded: int = 0
    differences: list[Difference] = field(default_factory=list)


def compare(source: str, ref: dict[str, dict[str, Any]], emb: dict[str, dict[str, Any]]) -> Comparison:
    c = Comparison(source)
    for key in sorted(set(ref) | set(emb)):
        if key not in emb or key not in ref:
            c.only_reference += key not in emb
            c.only_embedded += key not in ref
            c.differences.append(Difference(source, key, WHOLE, "present" if key in ref else "absent",
                                            "present" if key in emb else "absent"))
            continue
        c.objects += 1
        r, e = ref[key], emb[key]
        for path in sorted(set(r) | set(e)):
            c.paths += 1
            if r.get(path, _ABSENT) == e.get(path, _ABSENT):
                c.matched += 1
            else:
                c.differences.append(Difference(source, key, path, r.get(path, "<absent>"),
                                                e.get(path, "<absent>")))
    return c


_ABSENT = object()


@dataclass
class Ignore:
    """An entry of differential.yaml."""

    object: str  # Kind glob
    path: str  # path glob
    kind: str
    reason: str
    effect: str = ""
    source: str = "*"
    name: str = "*"
    reference: str = "*"  # a glob over the reference's value (``<absent>``: the path is not there)
    embedded: str = "*"

    @property
    def id(self) -> str:
        scope = "" if self.source == "*" else f"{self.source} "
        name = "" if self.name == "*" else f"/{self.name}"
        values = "" if (self.reference, self.embedded) == ("*", "*") else \
            f" ({self.reference} -> {self.embedded})"
        return f"{scope}{self.object}{name} {self.path}{values}"

    def matches(self, d: Difference) -> bool:
        kind, _, name = d.obj.partition("/")
        return (glob(self.object, kind) and glob(self.name, name) and glob(self.source, d.source)
                and glob(self.path, d.path) and glob(self.reference, _text(d.reference))
                and glob(self.embedded, _text(d.embedded)))


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def glob(pattern: str, s: str) -> bool:
    """``*`` matches any characters (dots and brackets included); everything else is literal, so a
    path's ``[key]`` needs no escaping (fnmatch would read it as a character class)."""
    rx = "".join(".*" if part == "*" else re.escape(part) for part in re.split(r"(\*)", pattern))
    return re.fullmatch(rx, s, re.DOTALL) is not None


def load_ignores(path: Path = IGNORES) -> list[Ignore]:
    """The entries of the ignore file, checked: a known kind, a reason, an effect for each
    embedded gap (docs/embedded-cluster.md lists it)."""
    entries = yaml.safe_load(path.read_text()) or []
    out = []
    for i, e in enumerate(entries):
        where = f"{path.name} entry {i + 1}"
        unknown = set(e) - {"object", "path", "kind", "reason", "effect", "source", "name", "reference",
                            "embedded"}
        assert not unknown, f"{where}: unknown field(s) {sorted(unknown)}"
        assert e.get("object") and e.get("path"), f"{where}: needs object and path"
        assert e.get("kind") in CLASSES, f"{where}: kind {e.get('kind')!r} is not one of {CLASSES}"
        assert e.get("reason") and "TODO" not in str(e["reason"]), f"{where}: needs a reviewed reason"
        assert e["kind"] != "embedded-gap" or e.get("effect"), f"{where}: an embedded gap needs its effect"
        out.append(Ignore(**{k: str(v) for k, v in e.items()}))
    return out


def explain(d: Difference, ignores: list[Ignore]) -> Ignore | None:
    """The first entry that explains ``d``, if any."""
    return next((i for i in ignores if i.matches(d)), None)
