"""Blue-green, the pure part: names, green objects, weight stages, route writes, state.

llm-d's advice for upgrading P/D is a new InferencePool per revision with traffic moved by HTTPRoute
weights (docs/llm-d.md). The executor (:mod:`bluegreen`) does the I/O; everything it decides comes from
here, from its inputs alone, so a restarted controller plans the same objects and the same next step:

- **names**: green objects are ``<base>-<rev>`` (pool, pair label) and ``<base>-<rev>-<role>`` (LWS),
  ``rev`` the first 8 hex of the new templates' hash, ``base`` the blue pair's name without its own
  revision suffix (so a second blue-green does not stack suffixes);
- **selectors**: green pods carry ``lwsflow.io/pd-pair: <base>-<rev>`` and ``lwsflow.io/revision``; the
  green pool selects them; the blue pool is narrowed to ``lwsflow.io/pd-pair: <blue pair>`` before
  any green pod exists (InferencePool selectors are matchLabels only: without that the blue pool's
  model selector would also take the green pods). A DisaggregatedSet (``ds/NAME``) gets a green DS
  ``<base>-<rev>`` and the pools tell the two apart by the DS controller's own name label on the pods
  (:mod:`kinds`, where each kind's part lives);
- **weights**: green ``0`` (added with the green pool), then each ``--weights`` stage (blue gets the
  rest of 100), the blue backendRef dropped at 100;
- **state**: ``rollout.lwsflow.io/bluegreen-*`` annotations on the HTTPRoute, written in the same merge
  patch as the weights they describe (with the resourceVersion it was planned on).
"""

from __future__ import annotations

import copy
import json
import re
from dataclasses import asdict, dataclass, field

from lwsflow.controller.api import labels as L
from lwsflow.controller.api.wire import Obj
from lwsflow.controller.errors import InvalidInput
from lwsflow.controller.rollout import state

POOL_GROUP = "inference.networking.k8s.io"
ROLES = ("decode", "prefill")  # green decode comes up first; rollback deletes prefill first
PREFIX = f"{L.ROLLOUT_PREFIX}bluegreen-"
DEFAULT_WEIGHTS = "10,50,100"
REV_LEN = 8
_DNS = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")

# phases, in the order a blue-green goes through them
STARTING, SHIFTING, FINISHING, SUCCEEDED = "Starting", "Shifting", "Finishing", "Succeeded"
ROLLING_BACK, ROLLED_BACK, FAILED = "RollingBack", "RolledBack", "Failed"
DONE = (SUCCEEDED, ROLLED_BACK, FAILED)


def parse_weights(text: str) -> list[int]:
    """``"10,50,100"`` -> [10, 50, 100]: green's share in percent per stage, rising, ending at 100."""
    out: list[int] = []
    for part in (text or "").split(","):
        p = part.strip().removesuffix("%")
        if not p.isdigit() or not 0 < int(p) <= 100:
            raise InvalidInput(f"{part.strip()!r} is not a weight in 1..100 (green's percent of the traffic)",
                               field="weights")
        if out and int(p) <= out[-1]:
            raise InvalidInput(f"weights must rise: {int(p)} after {out[-1]}", field="weights")
        out.append(int(p))
    if out[-1] != 100:
        raise InvalidInput(f"the last weight is {out[-1]}; it must be 100 (every request on green)",
                           field="weights")
    return out


@dataclass(frozen=True)
class Side:
    """One revision's objects: the pair label (``kind`` ``ds`` or ``lws``: the DS's or LWS's name), its
    InferencePool and its LWS per role (a DS: none, its controller names its children)."""

    pair: str
    pool: str
    lws: dict[str, str]
    kind: str = "pair"  # the TARGET prefix: pair, ds or lws

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> Side:
        d = json.loads(text)
        return cls(d["pair"], d["pool"], dict(d["lws"]), str(d.get("kind", "pair")))


def revision_of(manifests: dict[str, Obj]) -> str:
    """The green revision suffix: a hash of both roles' templates (same manifest, same names)."""
    return state.template_hash({r: state.template_of(manifests[r]) for r in ROLES})[:REV_LEN]


def base_name(blue_pair: str, blue_lws: dict[str, Obj]) -> str:
    """The blue pair's name without the revision suffix an earlier blue-green gave it."""
    rev = (blue_lws["decode"]["metadata"].get("labels") or {}).get(L.REVISION, "")
    return blue_pair[: -len(rev) - 1] if rev and blue_pair.endswith(f"-{rev}") else blue_pair


def green_side(base: str, rev: str) -> Side:
    pair = f"{base}-{rev}"
    names = {r: f"{pair}-{r}" for r in ROLES}
    for n in (pair, *names.values()):
        if len(n) > 63 or not _DNS.fullmatch(n):
            raise InvalidInput(f"green object name {n!r} is not a DNS label of at most 63 characters; "
                               "shorten the pair's name", field="target")
    return Side(pair, pair, names)


def _template_labels(lws: Obj) -> list[Obj]:
    """The label maps of the LWS's pod templates (leader, when set, and worker)."""
    lwt = lws.setdefault("spec", {}).setdefault("leaderWorkerTemplate", {})
    out = []
    for key in ("leaderTemplate", "workerTemplate"):
        if key in lwt and lwt[key] is not None:
            out.append(lwt[key].setdefault("metadata", {}).setdefault("labels", {}))
    return out


def fresh_copy(manifest: Obj, name: str, namespace: str, labels: dict[str, str]) -> Obj:
    """``manifest`` as a new object: renamed, ``labels`` added, without server fields, status or
    rollout state annotations."""
    obj = copy.deepcopy(manifest)
    meta = obj.setdefault("metadata", {})
    for k in ("resourceVersion", "uid", "generation", "creationTimestamp", "managedFields"):
        meta.pop(k, None)
    obj.pop("status", None)
    meta.update(name=name, namespace=namespace, labels={**(meta.get("labels") or {}), **labels})
    meta["annotations"] = {k: v for k, v in (meta.get("annotations") or {}).items()
                           if not k.startswith(L.ROLLOUT_PREFIX)}
    return obj


def fresh_lws(manifest: Obj, name: str, namespace: str, labels: dict[str, str],
              pod_labels: dict[str, str]) -> Obj:
    """A new LWS from ``manifest`` (:func:`fresh_copy`), ``pod_labels`` on its pod templates, at
    partition 0 (a fresh LWS: nothing to stage, every group starts on its template)."""
    obj = fresh_copy(manifest, name, namespace, labels)
    for tl in _template_labels(obj):
        tl.update(pod_labels)
    ruc = ((obj["spec"].get("rolloutStrategy") or {}).get("rollingUpdateConfiguration"))
    if isinstance(ruc, dict) and "partition" in ruc:
        ruc["partition"] = 0
    return obj


def green_lws(manifest: Obj, green: Side, role: str, rev: str, namespace: str) -> Obj:
    """The new revision's LWS for ``role``: the manifest renamed, relabelled and at partition 0."""
    mark = {L.PD_PAIR: green.pair, L.REVISION: rev, L.ROLE: role}
    return fresh_lws(manifest, green.lws[role], namespace, mark, mark)


def pod_labels(lws: Obj) -> dict[str, str]:
    """Labels every pod of ``lws`` carries from its templates (leader and worker in common)."""
    maps = _template_labels(copy.deepcopy(lws))
    common = dict(maps[0]) if maps else {}
    for m in maps[1:]:
        common = {k: v for k, v in common.items() if m.get(k) == v}
    return common


def narrowed_blue_selector(blue_pool: Obj, blue_pair: str, blue_lws: dict[str, Obj]) -> dict[str, str]:
    """The blue pool's matchLabels with ``lwsflow.io/pd-pair: <blue pair>`` added (green pods carry
    another pair label, so they stay out); refuses when the blue pods do not carry that label."""
    match = dict(((blue_pool.get("spec") or {}).get("selector") or {}).get("matchLabels") or {})
    for role, obj in blue_lws.items():
        if pod_labels(obj).get(L.PD_PAIR) != blue_pair:
            raise InvalidInput(f"the pods of {obj['metadata']['name']} ({role}) carry no {L.PD_PAIR}="
                               f"{blue_pair} label, so no InferencePool selector can keep the green pods "
                               "out of the blue pool; add it to the pod templates first", field="target")
    match[L.PD_PAIR] = blue_pair
    return match


def green_pool(blue_pool: Obj, green: Side, rev: str, namespace: str, *,
               select: dict[str, str] | None = None) -> Obj:
    """The green InferencePool: the blue one's ports and picker, selecting only the green pods (by
    ``select``; a pair's default: its pair and revision labels)."""
    spec = copy.deepcopy(blue_pool.get("spec") or {})
    match = dict((spec.get("selector") or {}).get("matchLabels") or {})
    match.update(select if select is not None else {L.PD_PAIR: green.pair, L.REVISION: rev})
    spec["selector"] = {"matchLabels": dict(sorted(match.items()))}
    labels = {**((blue_pool.get("metadata") or {}).get("labels") or {}), L.REVISION: rev}
    return {"apiVersion": blue_pool.get("apiVersion", f"{POOL_GROUP}/v1"), "kind": "InferencePool",
            "metadata": {"name": green.pool, "namespace": namespace, "labels": labels}, "spec": spec}


def selects(pool: Obj, pod_label_map: dict[str, str]) -> bool:
    """Whether ``pool``'s matchLabels select pods labelled ``pod_label_map`` (leaders: worker-index 0)."""
    match = ((pool.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
    have = {**pod_label_map, L.WORKER_INDEX: "0"}
    return bool(match) and all(have.get(k) == v for k, v in match.items())


def _is_pool_ref(ref: Obj, name: str) -> bool:
    return ref.get("kind") == "InferencePool" and ref.get("group") == POOL_GROUP and ref.get("name") == name


def references(route: Obj, pool: str) -> bool:
    return any(_is_pool_ref(ref, pool) for rule in (route.get("spec") or {}).get("rules") or []
               for ref in rule.get("backendRefs") or [])


def rules_with(route: Obj, blue: str, green: str, green_weight: int | None, *,
               drop_blue: bool = False) -> list[Obj]:
    """The route's rules with green at ``green_weight`` percent beside blue (blue: the rest of 100).

    ``green_weight`` None removes the green backendRef (rollback); ``drop_blue`` removes the blue one
    (the end). Only rules that reference the blue or green pool change; other backends keep theirs.
    """
    rules = copy.deepcopy((route.get("spec") or {}).get("rules") or [])
    for rule in rules:
        refs = rule.get("backendRefs") or []
        if not any(_is_pool_ref(r, blue) or _is_pool_ref(r, green) for r in refs):
            continue
        out = []
        for ref in refs:
            if _is_pool_ref(ref, green):
                continue  # re-added below, after blue, at its planned weight
            if _is_pool_ref(ref, blue):
                if drop_blue:
                    continue
                ref["weight"] = 100 - (green_weight or 0)
            out.append(ref)
        if green_weight is not None:
            at = next((i + 1 for i, r in enumerate(out) if _is_pool_ref(r, blue)), len(out))
            out.insert(at, {"group": POOL_GROUP, "kind": "InferencePool", "name": green,
                            "weight": green_weight})
        rule["backendRefs"] = out
    return rules


def green_weight_of(route: Obj, green: str) -> int | None:
    """Green's weight in the route as it stands (None: no green backendRef)."""
    for rule in (route.get("spec") or {}).get("rules") or []:
        for ref in rule.get("backendRefs") or []:
            if _is_pool_ref(ref, green):
                return int(ref.get("weight", 1))
    return None


@dataclass
class BlueGreenState:
    """The persisted progress, as ``rollout.lwsflow.io/bluegreen-*`` annotations on the HTTPRoute.

    ``stage`` is the index of the weight stage whose weights are written (-1: green at 0, not shifted
    yet); ``passed`` counts the stages whose bake and checks passed, so ``passed`` is ``stage`` (the
    stage is being checked) or ``stage + 1`` (it passed; the next one is to be written).
    """

    id: str = ""
    phase: str = ""
    blue: Side | None = None
    green: Side | None = None
    weights: list[int] = field(default_factory=list)
    stage: int = -1
    passed: int = 0
    manifest_hash: str = ""
    reason: str = ""
    stage_started: float = 0.0
    bake_s: float = 0.0
    deadline_s: float = 1800.0
    # set by the in-cluster controller (GitOps): the route rules and blue pool selector from before the
    # rollout, as JSON; the end folds green back into the blue pair instead of deleting blue
    fold_back: str = ""

    @property
    def active(self) -> bool:
        return bool(self.phase) and self.phase not in DONE

    @classmethod
    def from_route(cls, route: Obj) -> BlueGreenState:
        a = (route.get("metadata") or {}).get("annotations") or {}

        def get(k: str, default: str = "") -> str:
            return str(a.get(PREFIX + k, default))

        if not get("phase"):
            return cls()
        return cls(get("id"), get("phase"), Side.from_json(get("blue")), Side.from_json(get("green")),
                   [int(w) for w in get("weights").split(",") if w], int(get("stage", "-1")),
                   int(get("passed", "0")), get("manifest-hash"), get("reason"),
                   float(get("stage-started", "0")), float(get("bake-seconds", "0")),
                   float(get("deadline-seconds", "1800")), get("fold-back"))

    def annotations(self) -> dict[str, str]:
        assert self.blue is not None and self.green is not None
        return {PREFIX + k: v for k, v in {
            "id": self.id, "phase": self.phase, "blue": self.blue.to_json(), "green": self.green.to_json(),
            "weights": ",".join(str(w) for w in self.weights), "stage": str(self.stage),
            "passed": str(self.passed), "manifest-hash": self.manifest_hash, "reason": self.reason,
            "stage-started": f"{self.stage_started:.3f}", "bake-seconds": f"{self.bake_s:g}",
            "deadline-seconds": f"{self.deadline_s:g}",
            **({"fold-back": self.fold_back} if self.fold_back else {})}.items()}


def route_patch(route: Obj, st: BlueGreenState, rules: list[Obj] | None = None) -> Obj:
    """One merge patch: the state and (when given) the rules, on the resourceVersion it was planned on.

    ``rules`` is a list, which a merge patch replaces whole: the precondition makes a concurrent writer
    a 409 (re-read, re-plan) instead of a lost update.
    """
    patch: Obj = {"metadata": {"resourceVersion": route["metadata"]["resourceVersion"],
                               "annotations": st.annotations()}}
    if rules is not None:
        patch["spec"] = {"rules": rules}
    return patch


@dataclass(frozen=True)
class Action:
    """What the executor does next: ``await-green``, ``check`` (bake + checks of ``stage``), ``shift``
    (write ``stage``'s weights with the previous stage's pass), ``finish``, ``rollback``, ``report``."""

    kind: str
    stage: int = -1


def next_action(st: BlueGreenState) -> Action:
    """The next step from the persisted state alone (table-tested; the same after a restart)."""
    if st.phase in DONE:
        return Action("report")
    if st.phase == ROLLING_BACK:
        return Action("rollback")
    if st.phase == FINISHING:
        return Action("finish")
    if st.phase == STARTING:
        return Action("await-green")
    if st.passed == st.stage + 1:  # the written stage passed (or none was written yet)
        return Action("finish") if st.passed >= len(st.weights) else Action("shift", st.passed)
    return Action("check", st.stage)
