"""Hypothesis strategies for the bad-input campaign: valid catalogs, and invalid catalogs / manifests
that each carry the name of the one field they broke.

An invalid case is built the way real mistakes happen: take a valid document and break exactly one
thing in it (a value out of range, a wrong type, a name that is not a DNS label, a missing or unknown
key, a dangling reference). Because only one thing is wrong, the refusal must name *that* field:
every case is a ``Broken(doc, field, what)`` and the tests assert ``field`` appears in the error.

The same strategies drive the fast test suite (a few hundred examples) and the long campaign in
``reliability/bad_input_campaign.py`` (thousands), so both measure the same thing.
"""

from __future__ import annotations

import copy
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"

# \Z, not $: Python's $ matches before a trailing newline too, and "llama\n" is exactly the kind of
# name these strategies must produce
DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?\Z")
DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\Z")


# Deterministic and quiet: examples derive from the test's name, nothing is stored between runs, and
# per-example time limits are off (the 2-core CI machine is shared and its speed varies). No shrinking:
# each case already says what it broke (``Broken.what``), and shrinking a CLI round trip can take
# minutes on a shared machine.
CAMPAIGN = settings(derandomize=True, deadline=None, database=None, print_blob=False,
                    phases=(Phase.explicit, Phase.generate),
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.filter_too_much])


@dataclass(frozen=True)
class Broken:
    """A document with exactly one thing wrong; ``field`` must appear in the refusal."""

    doc: Any
    field: str
    what: str

    def __repr__(self) -> str:  # hypothesis prints this on failure: keep the document out of it
        return f"Broken(field={self.field!r}, what={self.what!r})"

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:  # hypothesis' pretty printer
        printer.text(repr(self))


# -- valid starting points -----------------------------------------------------------------------------


@cache
def _example_docs() -> tuple[dict[str, Any], ...]:
    import yaml

    return tuple(yaml.safe_load((EXAMPLES / n).read_text()) for n in ("catalog.yaml", "catalog-minimal.yaml"))


def example_catalog_doc(index: int = 0) -> dict[str, Any]:
    """A deep copy of ``examples/catalog.yaml`` (0) or ``examples/catalog-minimal.yaml`` (1)."""
    return copy.deepcopy(_example_docs()[index])


# Small dense models that fit one 80 GiB GPU at bf16: generated catalogs are always feasible, so a
# refusal of a generated valid catalog is a bug, not bad luck.
_ARCHS = (
    {"parametersB": 0.5, "architecture": {"layers": 24, "attentionHeads": 14, "kvHeads": 2, "headDim": 64}},
    {"parametersB": 1.5, "architecture": {"layers": 28, "attentionHeads": 12, "kvHeads": 2, "headDim": 128}},
    {"parametersB": 8.03, "architecture": {"layers": 32, "attentionHeads": 32, "kvHeads": 8, "headDim": 128}},
)
_DIGEST = "sha256:" + "ab" * 32

dns_labels = st.from_regex(r"[a-z]([-a-z0-9]{0,10}[a-z0-9])?", fullmatch=True)
percents = st.integers(1, 100).map(lambda n: f"{n}%")
durations = st.builds(lambda n, u: f"{n}{u}", st.integers(0, 120), st.sampled_from(["s", "m", "h", "ms"]))
# a deadline must be above 0 (the one duration rule of CLI, catalog and CRD: controller/api/duration.py)
deadlines = st.builds(lambda n, u: f"{n}{u}", st.integers(1, 120), st.sampled_from(["s", "m", "h", "ms"]))


@st.composite
def _rollout(draw: st.DrawFn) -> dict[str, Any]:
    return {
        "stages": draw(st.lists(st.one_of(st.integers(1, 8), percents), min_size=1, max_size=4)),
        "maxUnavailable": draw(st.one_of(st.integers(0, 3), st.integers(0, 100).map(lambda n: f"{n}%"))),
        # a surge of at least one group: with maxUnavailable resolving to 0 as well a rolling update
        # could never progress, which the sizing rightly refuses
        "maxSurge": draw(st.one_of(st.integers(1, 2), percents)),
        "bake": draw(durations),
        "deadline": draw(deadlines),
    }


@st.composite
def valid_catalogs(draw: st.DrawFn) -> dict[str, Any]:
    """A feasible catalog: one H100 pool, 1-3 small models (aggregated, DS or LWS pair), 1-3 envs."""
    names = draw(st.lists(dns_labels, min_size=1, max_size=3, unique=True))
    models = []
    for name in names:
        arch = draw(st.sampled_from(_ARCHS))
        m: dict[str, Any] = {
            "name": name,
            "model": f"org/{name}",
            **copy.deepcopy(arch),
            "engine": draw(st.sampled_from(["vllm", "sglang"])),
            "image": "registry.example/engine:v1@" + _DIGEST,
            "nodePool": "h100x8",
            "rollout": draw(_rollout()),
        }
        shape = draw(st.sampled_from(["aggregated", "disaggregatedset", "lws-pair"]))
        if shape == "aggregated":
            m["replicas"] = draw(st.integers(0, 3))
        else:
            m["pdMode"] = shape
            m["prefill"] = {"replicas": draw(st.integers(1, 2))}
            m["decode"] = {"replicas": draw(st.integers(1, 2))}
        if draw(st.booleans()):
            m["hfTokenSecret"] = {"name": "hf-token", "key": "token"}
        models.append(m)
    envs = draw(st.lists(st.sampled_from(["dev", "staging", "prod", "qa"]), min_size=1, max_size=3,
                         unique=True))
    environments = []
    for i, e in enumerate(envs):
        env: dict[str, Any] = {"name": e}
        if i or draw(st.booleans()):  # one environment at most in the catalog namespace: no two share one
            env["namespace"] = f"llm-{e}"
        agg = [m for m in models if "replicas" in m]
        if agg and draw(st.booleans()):
            env["overrides"] = {agg[0]["name"]: {"replicas": draw(st.integers(0, 3))}}
        environments.append(env)
    return {
        "namespace": draw(dns_labels),
        "nodePools": [{"name": "h100x8", "gpu": "nvidia-h100-80gb", "gpuMemoryGiB": 80, "gpusPerNode": 8,
                       "nodes": 16}],
        "models": models,
        "environments": environments,
    }


# -- invalid values by field type ----------------------------------------------------------------------

_WORDS = st.from_regex(r"[a-zA-Z][a-zA-Z ]{0,10}", fullmatch=True).filter(lambda s: s.strip().isalpha())
_JUNK_CONTAINERS = st.sampled_from([[], [1, 2], {}, {"a": 1}])


def bad_ints(lo: int | None, hi: int | None) -> st.SearchStrategy[Any]:
    """Values an integer field in ``[lo, hi]`` must refuse: out of range, huge, fractional, wrong type."""
    parts: list[st.SearchStrategy[Any]] = [
        _WORDS, _JUNK_CONTAINERS, st.booleans(),
        st.floats(allow_nan=False, allow_infinity=False, min_value=-1e6, max_value=1e6)
        .filter(lambda f: f != int(f)),
        st.sampled_from([math.nan, math.inf, -math.inf]),
    ]
    if lo is not None:
        parts += [st.integers(max_value=lo - 1), st.sampled_from([-(10**30), lo - 1])]
    if hi is not None:
        parts += [st.integers(min_value=hi + 1), st.sampled_from([10**30, 2**63, hi + 1])]
    return st.one_of(parts)


def bad_floats(lo: float, hi: float, lo_inclusive: bool = False) -> st.SearchStrategy[Any]:
    """Values a float field in ``(lo, hi]`` must refuse, NaN and the infinities included."""
    below = st.floats(max_value=lo, allow_nan=False, allow_infinity=False)
    if lo_inclusive:
        below = below.filter(lambda f: f < lo)
    return st.one_of(
        below,
        st.floats(min_value=hi, allow_nan=False, allow_infinity=False, exclude_min=True),
        st.sampled_from([math.nan, math.inf, -math.inf, 1e308]),
        _WORDS, _JUNK_CONTAINERS, st.booleans(),
    ).filter(lambda v: not (isinstance(v, float) and lo < v <= hi and not math.isnan(v)))


# Not DNS-1035 labels: upper case, underscores, dots, slashes, path escapes, spaces, control and
# non-ASCII characters, a leading digit or dash, or too long.
_HOSTILE_NAMES = [
    "", "llama\n", "llama\r\n", " llama", "A", "Llama", "llama_8b", "-llama", "llama-", "8b", "a.b",
    "../etc", "a/b", "a b", "a\nb",
    "a\tb", "llama\u00e9", "\u0430bc", "a\u2028b", "a\x00b", "a" * 64, "x" * 300, "*", "$(id)", "`id`",
]


def bad_dns_labels(max_len: int) -> st.SearchStrategy[Any]:
    return st.one_of(
        st.sampled_from(_HOSTILE_NAMES),
        st.text(min_size=0, max_size=80).filter(lambda s: not DNS1035.match(s) or len(s) > max_len),
        st.integers(1, max_len).map(lambda n: "a" * (max_len + n)),
        st.integers(), st.booleans(), _JUNK_CONTAINERS, st.none(),
    )


# Kubernetes label syntax: keys are ``[dns-subdomain/]name`` (name <= 63 of [A-Za-z0-9-_.], alphanumeric at
# both ends), values the same name syntax or empty.
bad_label_values = st.sampled_from(["H100 80GB", "a" * 64, "-x", "x-", "x/y", "gpu\u00e9", "a:b", "\n"])
bad_label_keys = st.sampled_from(["not a key", "a/b/c", "/x", "x/", "-x", "a" * 64, "Upper.Prefix/x",
                                  "prefix_/x", "x" * 254 + "/k", "", "k\n"])


def bad_literals(allowed: tuple[str, ...]) -> st.SearchStrategy[Any]:
    return st.one_of(st.text(max_size=30).filter(lambda s: s not in allowed), st.integers(), _JUNK_CONTAINERS,
                     st.sampled_from([a.upper() for a in allowed] + [a + " " for a in allowed]))


bad_percents = st.one_of(
    st.integers(101, 10**9).map(lambda n: f"{n}%"),
    st.sampled_from(["%", "50%\n", "-5%", "1.5%", "50", "abc%", "50 %", "1e3%", "\u0665\u0660%", "100%%", "",
                     "0x10%"]),
    st.integers(max_value=-1), _JUNK_CONTAINERS, st.booleans(),
)
bad_stages = st.one_of(
    st.just([]),
    st.lists(st.sampled_from([0, -1, "0%", "50%\n", "101%", "x", True, None, 1.5, "50"]), min_size=1,
             max_size=3).map(lambda xs: [1, *xs]),
    st.text(max_size=5), st.integers(),
)
bad_durations = st.one_of(
    st.sampled_from(["", "5m\n", "5", "5 minutes", "-5m", "1d", "m", "1h 30m", "10M", "∞", "1e3s", "5mm"]),
    st.integers(), st.floats(), _JUNK_CONTAINERS,
)


def bad_strings() -> st.SearchStrategy[Any]:
    """For a required string field: anything but a string."""
    return st.one_of(st.integers(), st.floats(), st.booleans(), _JUNK_CONTAINERS, st.none())


# -- where to break a catalog --------------------------------------------------------------------------

Locator = Callable[[dict[str, Any]], list[tuple[dict[str, Any], str]]]


def _items(doc: dict[str, Any], key: str, sub: tuple[str, ...] = ()) -> list[tuple[dict[str, Any], str]]:
    """(mapping, path) for each item of a top-level list, descending into ``sub`` (created if absent)."""
    out = []
    for i, item in enumerate(doc.get(key) or []):
        node, path = item, f"{key}[{i}]"
        for s in sub:
            node = node.setdefault(s, {})
            path += f".{s}"
        out.append((node, path))
    return out


def _aggregated_models(doc: dict[str, Any]) -> list[tuple[dict[str, Any], str]]:
    return [(m, p) for m, p in _items(doc, "models") if "replicas" in m]


def _overrides(doc: dict[str, Any]) -> list[tuple[dict[str, Any], str]]:
    """An override of the first aggregated model in each environment (created if absent)."""
    agg = [m["name"] for m in doc["models"] if "replicas" in m]
    if not agg:
        return []
    out = []
    for env, path in _environments(doc):
        ov = env.setdefault("overrides", {}).setdefault(agg[0], {})
        out.append((ov, f"{path}.overrides.{agg[0]}"))
    return out


def _environments(doc: dict[str, Any]) -> list[tuple[dict[str, Any], str]]:
    """Each environment as a mapping (the catalog's defaults written out when it has none)."""
    ns = doc.get("namespace", "default")
    envs = doc.setdefault("environments", [{"name": n, "namespace": f"{ns}-{n}"}
                                           for n in ("dev", "staging", "prod")])
    doc["environments"] = [{"name": e} if isinstance(e, str) else e for e in envs]
    return _items(doc, "environments")


def _root(doc: dict[str, Any]) -> list[tuple[dict[str, Any], str]]:
    return [(doc, "")]


# the opt-in switches take a YAML boolean only: not 1, not the string "yes"
bad_switches = st.sampled_from([1, 0, "yes", "true", "on", None, [], {}])

# a Kueue LocalQueue: an object name that travels as a label value
bad_queues = st.sampled_from(["Not_A_Queue", "x" * 64, "a..b", "-a", "", 1, [], {}, True])

# (locator, field, strategy of bad values). The pydantic class the field belongs to, for unknown keys.
_POOL = lambda d: _items(d, "nodePools")  # noqa: E731
_MODEL = lambda d: _items(d, "models")  # noqa: E731
_ARCH = lambda d: _items(d, "models", ("architecture",))  # noqa: E731
_ROLLOUT = lambda d: _items(d, "models", ("rollout",))  # noqa: E731
_ENV = _environments
_HF = lambda d: _items(d, "models", ("hfTokenSecret",))  # noqa: E731
_CACHE = lambda d: _items(d, "models", ("modelCache",))  # noqa: E731

FIELD_BREAKS: list[tuple[Locator, str, st.SearchStrategy[Any]]] = [
    (_root, "namespace", bad_dns_labels(63)),
    (_root, "allowSharedNamespace", bad_switches),
    (_POOL, "name", bad_dns_labels(63)),
    (_POOL, "gpuMemoryGiB", bad_floats(0, 1024)),
    (_POOL, "gpusPerNode", bad_ints(1, 64)),
    (_POOL, "nodes", bad_ints(1, 100_000)),
    (_POOL, "cpuPerNode", bad_ints(1, None)),
    (_POOL, "memoryGiBPerNode", bad_ints(1, None)),
    (_POOL, "gpu", st.one_of(bad_strings(), bad_label_values)),
    (_POOL, "nodeSelector", st.one_of(st.sampled_from([[], "x", 1, {"k": 1}, {"k": None}, {"k": [1]}]),
                                      bad_label_keys.map(lambda k: {k: "v"}),
                                      bad_label_values.map(lambda v: {"k": v}))),
    (_POOL, "topologyKey", bad_label_keys),
    (_POOL, "allowOvercommit", bad_switches),
    (_POOL, "tolerations", st.sampled_from([{}, "x", [{"operator": "Sometimes"}], [{"effect": "Never"}],
                                             [{"tolerationSeconds": "soon"}], [1]])),
    (_MODEL, "name", bad_dns_labels(40)),
    (_MODEL, "model", bad_strings()),
    (_MODEL, "parametersB", bad_floats(0, 100_000)),
    (_MODEL, "dtype", bad_literals(("bf16", "fp16", "fp32", "fp8", "int8", "int4"))),
    (_MODEL, "maxModelLen", bad_ints(1, 10_000_000)),
    (_MODEL, "tensorParallelSize", bad_ints(1, 1024)),
    (_MODEL, "pipelineParallelSize", bad_ints(1, 1024)),
    (_MODEL, "engine", bad_literals(("vllm", "sglang"))),
    (_MODEL, "image", bad_strings()),
    (_MODEL, "port", bad_ints(1, 65535)),
    (_MODEL, "gpuMemoryUtilization", bad_floats(0, 1)),
    (_MODEL, "startupPolicy", bad_literals(("LeaderCreated", "LeaderReady"))),
    (_MODEL, "restartPolicy", bad_literals(("RecreateGroupOnPodRestart", "RecreateGroupAfterStart", "None"))),
    (_MODEL, "subdomainPolicy", bad_literals(("Shared", "UniquePerReplica"))),
    (_MODEL, "pdMode", bad_literals(("disaggregatedset", "lws-pair"))),
    (_MODEL, "extraArgs", st.sampled_from(["--foo", 1, {"a": "b"}, [1], [None], [["--x"]], ["--api-key", "k"],
                                           ["--hf-token=hf_x"], ["--port", "1", "--token", "t"],
                                           ["--tensor-parallel-size", "8"], ["--pp-size=2"]])),
    (_MODEL, "env", st.sampled_from([
        [{"name": "1BAD", "value": "x"}], [{"name": "A B", "value": "x"}], [{"name": "", "value": "x"}],
        [{"name": "LWS_GROUP_SIZE", "value": "2"}], [{"name": "DB_PASSWORD", "value": "hunter2"}],
        [{"name": "A", "value": "x", "secretKeyRef": {"name": "s", "key": "k"}}], [{"name": "A"}],
        [{"name": "A", "value": 1}], [{"name": "A", "secretKeyRef": {"name": "Bad Name", "key": "k"}}],
        {"A": "x"}, "A=x"])),
    (_MODEL, "nodePool", st.one_of(dns_labels.filter(lambda s: s not in ("h100x8", "l40sx4")),
                                   bad_strings())),
    (_aggregated_models, "replicas", bad_ints(0, 1_000_000)),
    (_ARCH, "layers", bad_ints(1, 10_000)),
    (_ARCH, "attentionHeads", bad_ints(1, 100_000)),
    (_ARCH, "kvHeads", bad_ints(1, 100_000)),
    (_ARCH, "headDim", bad_ints(1, 100_000)),
    (_ROLLOUT, "stages", bad_stages),
    (_ROLLOUT, "maxUnavailable", bad_percents),
    (_ROLLOUT, "maxSurge", bad_percents),
    (_ROLLOUT, "bake", bad_durations),
    (_ROLLOUT, "deadline", bad_durations),
    (_ENV, "name", bad_dns_labels(63)),
    (_ENV, "namespace", bad_dns_labels(63).filter(lambda v: v is not None)),
    (_ENV, "queue", bad_queues),
    (_MODEL, "queue", bad_queues),
    (_overrides, "replicas", bad_ints(0, 1_000_000)),
    (_HF, "name", bad_dns_labels(253).filter(
        lambda v: not (isinstance(v, str) and DNS1123_SUBDOMAIN.match(v) and len(v) <= 253))),
    (_HF, "key", st.sampled_from(["", "a key", "../x", "k\n", "x" * 300, 1, None, []])),
    (_CACHE, "size", st.sampled_from(["lots", "1 TB", "-1Gi", "1TiB", "", "Gi", "1.5.5Gi", 5.5, [], None])),
    (_CACHE, "storageClassName", st.sampled_from(["Premium RWO", "a_b", "-x", "x" * 254, "a..b", 5, []])),
]


def _known_keys(path: str) -> set[str]:
    """Field names of the pydantic model at a catalog path (aliases included), for unknown-key cases."""
    from lwsflow.components import catalog as c

    leaf = re.sub(r"\[\d+\]", "", path).split(".")[-1] if path else ""
    cls = {"": c.Catalog, "nodePools": c.NodePool, "models": c.ModelSpec, "architecture": c.Architecture,
           "rollout": c.RolloutSettings, "environments": c.Environment, "hfTokenSecret": c.SecretRef,
           "modelCache": c.ModelCache}.get(leaf, c.ModelOverride)
    return set(cls.model_fields)


_REQUIRED: list[tuple[Locator, str]] = [
    (_POOL, "name"), (_POOL, "gpu"), (_POOL, "gpuMemoryGiB"), (_POOL, "gpusPerNode"), (_POOL, "nodes"),
    (_MODEL, "name"), (_MODEL, "model"), (_MODEL, "parametersB"), (_MODEL, "architecture"),
    (_MODEL, "image"), (_MODEL, "nodePool"), (_ARCH, "layers"), (_ARCH, "attentionHeads"),
    (_ARCH, "kvHeads"), (_ARCH, "headDim"), (_root, "nodePools"), (_root, "models"),
    (_HF, "name"), (_HF, "key"),
]

_UNKNOWN_TARGETS: list[Locator] = [_root, _POOL, _MODEL, _ARCH, _ROLLOUT, _ENV, _HF]
unknown_keys = st.from_regex(r"[a-z][a-zA-Z]{2,14}", fullmatch=True)


@st.composite
def invalid_catalogs(draw: st.DrawFn, bases: st.SearchStrategy[dict[str, Any]] | None = None) -> Broken:
    """A valid catalog with exactly one field broken; ``field`` names it."""
    doc = copy.deepcopy(draw(bases if bases is not None else st.sampled_from([example_catalog_doc(0),
                                                                                example_catalog_doc(1)])))
    kind = draw(st.sampled_from(["value", "value", "value", "missing", "unknown", "reference"]))
    if kind == "value":
        locate, field, values = draw(st.sampled_from(FIELD_BREAKS))
        targets = locate(doc)
        if not targets:  # e.g. no aggregated model for an override: break the namespace instead
            locate, field, values = FIELD_BREAKS[0]
            targets = locate(doc)
        node, path = draw(st.sampled_from(targets))
        if locate is _HF:  # an empty hfTokenSecret was created: fill it so only ``field`` is wrong
            node.update({"name": "hf-token", "key": "token"})
        value = draw(values)
        node[field] = value
        return Broken(doc, field, f"{path}.{field} = {value!r}".lstrip("."))
    if kind == "missing":
        locate, field = draw(st.sampled_from(_REQUIRED))
        node, path = draw(st.sampled_from(locate(doc)))
        if locate is _HF:  # an empty hfTokenSecret was created: fill the other key so only one is missing
            node.update({"name": "hf-token", "key": "token"})
        node.pop(field, None)
        return Broken(doc, field, f"{path}.{field} removed".lstrip("."))
    if kind == "unknown":
        locate = draw(st.sampled_from(_UNKNOWN_TARGETS))
        node, path = draw(st.sampled_from(locate(doc)))
        if locate is _HF:
            node.update({"name": "hf-token", "key": "token"})
        key = draw(unknown_keys.filter(lambda k: k not in _known_keys(path)))
        node[key] = draw(st.one_of(st.integers(), st.text(max_size=5), st.booleans()))
        return Broken(doc, key, f"{path}.{key} added (unknown key)".lstrip("."))
    # dangling or duplicate references
    ref = draw(st.sampled_from(["pool", "duplicate-model", "duplicate-pool", "override-model"]))
    if ref == "pool":
        node, path = draw(st.sampled_from(_items(doc, "models")))
        node["nodePool"] = draw(dns_labels.filter(lambda s: s not in {p["name"] for p in doc["nodePools"]}))
        return Broken(doc, "nodePool", f"{path}.nodePool dangling")
    if ref == "duplicate-model":
        doc["models"].append(copy.deepcopy(draw(st.sampled_from(doc["models"]))))
        return Broken(doc, "models", "duplicate model name")
    if ref == "duplicate-pool":
        doc["nodePools"].append(copy.deepcopy(doc["nodePools"][0]))
        return Broken(doc, "nodePools", "duplicate pool name")
    ghost = draw(dns_labels.filter(lambda s: s not in {m["name"] for m in doc["models"]}))
    env = _environments(doc)[0][0]
    env.setdefault("overrides", {})[ghost] = {"replicas": 1}
    return Broken(doc, "overrides", f"environments[0].overrides.{ghost}: unknown model")


# -- LeaderWorkerSet / DisaggregatedSet manifests ------------------------------------------------------


@cache
def _rendered_workloads() -> tuple[dict[str, Any], ...]:
    """Every LWS and DS the renderer makes from the example catalog (valid by construction)."""
    from lwsflow.components.catalog import load_catalog
    from lwsflow.components.manifests import render_catalog

    cat = load_catalog(EXAMPLES / "catalog.yaml")
    return tuple(o for objs in render_catalog(cat).values() for o in objs
                 if o["kind"] in ("LeaderWorkerSet", "DisaggregatedSet"))


def workload_docs() -> list[dict[str, Any]]:
    return [copy.deepcopy(o) for o in _rendered_workloads()]


_RUC = ("rolloutStrategy", "rollingUpdateConfiguration")
_bad_int_or_percent = st.one_of(st.integers(max_value=-1), st.integers(101, 10**6).map(lambda n: f"{n}%"),
                                st.sampled_from(["abc", "-1%", "1.5%", "%"]))
# (spec-relative path, bad values); the path is below ``spec`` of an LWS or of a DS role
_LWS_SPEC_BREAKS: list[tuple[tuple[str, ...], st.SearchStrategy[Any]]] = [
    (("replicas",), st.one_of(st.integers(max_value=-1), st.integers(min_value=2**31), _WORDS,
                              st.just(1.5))),
    (("leaderWorkerTemplate", "size"), st.one_of(st.integers(max_value=0), st.integers(min_value=2**31),
                                                 _WORDS)),
    (("startupPolicy",), bad_literals(("LeaderCreated", "LeaderReady")).filter(lambda v: v is not None)),
    (("leaderWorkerTemplate", "restartPolicy"),
     bad_literals(("Default", "RecreateGroupOnPodRestart", "RecreateGroupAfterStart", "None"))
     .filter(lambda v: v is not None)),
    (("rolloutStrategy", "type"), bad_literals(("RollingUpdate",)).filter(lambda v: v is not None)),
    ((*_RUC, "maxUnavailable"), _bad_int_or_percent),
    ((*_RUC, "maxSurge"), _bad_int_or_percent),
    (("networkConfig", "subdomainPolicy"), bad_literals(("Shared", "UniquePerReplica"))
     .filter(lambda v: v is not None)),
]
_NAME_BREAKS = bad_dns_labels(63).filter(lambda v: isinstance(v, str) and v != "")


def _dotted(parts: tuple[Any, ...]) -> str:
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else p)
    return out


@st.composite
def invalid_manifests(draw: st.DrawFn) -> Broken:
    """A rendered LWS or DS with one field broken; ``field`` is the API field path of the refusal."""
    kind = draw(st.sampled_from(["LeaderWorkerSet", "DisaggregatedSet"]))  # DS: one of six, drawn half
    doc = draw(st.sampled_from([d for d in workload_docs() if d["kind"] == kind]))
    if draw(st.integers(0, 9)) == 0:
        doc["metadata"]["name"] = name = draw(_NAME_BREAKS)
        return Broken(doc, "metadata.name", f"metadata.name = {name!r}")
    prefix: tuple[Any, ...] = ("spec",)
    spec = doc["spec"]
    if doc["kind"] == "DisaggregatedSet":
        i = draw(st.integers(0, len(spec["roles"]) - 1))
        if draw(st.integers(0, 4)) == 0:
            spec["roles"][i]["name"] = name = draw(_NAME_BREAKS)
            return Broken(doc, f"spec.roles[{i}]", f"spec.roles[{i}].name = {name!r}")
        prefix = ("spec", "roles", i, "spec")
        spec = spec["roles"][i]["spec"]
    path, values = draw(st.sampled_from(_LWS_SPEC_BREAKS))
    node = spec
    for p in path[:-1]:
        node = node.setdefault(p, {})
    node[path[-1]] = value = draw(values)
    full = _dotted((*prefix, *path))
    return Broken(doc, full, f"{full} = {value!r}")
