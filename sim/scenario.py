"""Rollout rehearsals: a scenario is a cluster config, objects, timed actions and an until-condition.

```yaml
name: 8-group rollout, 10-minute model load
cluster: {pools: [...], timings: {...}}     # optional: ClusterConfig.default() otherwise
objects: [<LeaderWorkerSet or DisaggregatedSet manifest>, ...]   # applied at t=0
actions:
  - {at: 30m, label: "v2 stage 1", patch: {name: demo, patch: {spec: {...}}}}   # JSON merge patch
  - {at: 45m, fault: {kind: crash, pod: demo-3-1}}
  - {at: 1h, apply: <manifest>}
until: {available: [demo], timeout: 6h}      # default: every object, 6h of virtual time
```

``run_scenario`` plays it in virtual time and returns the timeline; it never sleeps.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, model_validator

from lwsflow.controller.api.duration import duration_seconds
from lwsflow.controller.errors import FieldError, InvalidInput, NotFound, ValidationFailed
from lwsflow.sim import kinds
from lwsflow.sim.cluster import Cluster, SimTimeout
from lwsflow.sim.config import ClusterConfig
from lwsflow.sim.faults import Fault, inject
from lwsflow.sim.namespaces import namespace_defaults, require_namespace
from lwsflow.sim.timeline import Timeline


def parse_duration(value: object) -> float:
    """Seconds from ``90``, ``"90s"``, ``"10m"``, ``"1h30m"``: lwsflow's one duration grammar
    (``controller/api/duration.py``); ValueError for pydantic to name the field."""
    return duration_seconds(value)


Duration = Annotated[float, BeforeValidator(parse_duration)]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Patch(_Model):
    """A JSON merge patch of one live object."""

    kind: str = "LeaderWorkerSet"
    apiVersion: str = ""
    name: str
    namespace: str = "default"
    patch: dict[str, Any]


class Action(_Model):
    """One timed action: apply a manifest, patch an object, or inject a fault."""

    at: Duration
    label: str = ""
    apply: dict[str, Any] | None = None
    patch: Patch | None = None
    fault: Fault | None = None

    @model_validator(mode="after")
    def _one(self) -> Action:
        if sum(x is not None for x in (self.apply, self.patch, self.fault)) != 1:
            raise ValueError("exactly one of apply, patch, fault is required")
        return self

    def describe(self) -> str:
        if self.label:
            return self.label
        if self.apply is not None:
            return f"apply {self.apply.get('kind', '?')}/{self.apply.get('metadata', {}).get('name', '?')}"
        if self.patch is not None:
            return f"patch {self.patch.kind}/{self.patch.name}"
        assert self.fault is not None
        return f"fault {self.fault.kind} {self.fault.pod or self.fault.node or self.fault.image}"


class Until(_Model):
    """When the rehearsal is done: these objects Available (and rolled), or the timeout."""

    available: list[str] | None = None  # LWS / DS names; None: every object of the scenario
    timeout: Duration = 6 * 3600.0


class Scenario(_Model):
    """A rollout rehearsal: cluster, objects, timed actions, until-condition."""

    name: str = ""
    cluster: ClusterConfig | None = None
    objects: list[dict[str, Any]] = Field(default_factory=list)
    actions: list[Action] = Field(default_factory=list)
    until: Until = Field(default_factory=Until)


@dataclass
class ScenarioResult:
    """What a played scenario left: the cluster, its timeline, and whether until held."""

    scenario: Scenario
    cluster: Cluster
    timeline: Timeline
    reached: bool
    elapsed: float  # virtual seconds


def load_scenario(path: str | Path) -> Scenario:
    from lwsflow.controller.yamlio import load_yaml_documents

    docs = load_yaml_documents(Path(path))
    if len(docs) != 1:
        raise InvalidInput(f"expected one YAML document, found {len(docs)}", source=str(path))
    return parse_scenario(docs[0], source=str(path))


def parse_scenario(data: object, source: str = "") -> Scenario:
    try:
        return Scenario.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err["loc"])
        msg = err["msg"].removeprefix("Value error, ")
        raise InvalidInput(msg, field=field, source=source) from None


def apply_object(c: Cluster, obj: dict[str, Any], where: str = "") -> None:
    """Create or replace one manifest in the cluster (LWS/DS validated and defaulted like the API)."""
    try:
        rtype = kinds.for_object(obj)
    except (KeyError, AttributeError):
        raise InvalidInput(
            f"unsupported kind {obj.get('kind')!r} ({obj.get('apiVersion')!r})", field=f"{where}.kind"
        ) from None
    if rtype in (kinds.LWS, kinds.DS):
        from lwsflow.controller.api.defaults import default_object
        from lwsflow.controller.api.validation import validate_object

        errors = validate_object(obj)
        if errors:
            raise ValidationFailed(
                [FieldError(f"{where}.{e.path}" if where else e.path, e.message) for e in errors]
            )
        obj = default_object(obj)
    meta = obj.get("metadata") or {}
    ns = (meta.get("namespace") or "default") if rtype.namespaced else ""
    if c.store.try_get(rtype.key, ns, meta.get("name", "")) is None:
        try:
            require_namespace(c.store, rtype, ns)
        except NotFound as exc:  # as the API: namespaces are created explicitly (a Namespace object)
            raise InvalidInput(str(exc), field=f"{where}.metadata.namespace") from None
        c.store.create(rtype.key, namespace_defaults(dict(obj)) if rtype is kinds.NAMESPACE else obj)
    else:
        c.store.replace(rtype.key, obj, check_version=False)


def _run_action(c: Cluster, i: int, a: Action, tl: Timeline) -> None:
    tl.mark(c.now(), a.describe())
    where = f"actions[{i}]"
    try:
        if a.apply is not None:
            apply_object(c, a.apply, f"{where}.apply")
        elif a.patch is not None:
            p = a.patch
            rtype = next(
                (
                    t
                    for t in kinds.ALL
                    if t.kind == p.kind and (not p.apiVersion or t.api_version == p.apiVersion)
                ),
                None,
            )
            if rtype is None:
                raise InvalidInput(f"unsupported kind {p.kind!r}", field=f"{where}.patch.kind")
            live = c.store.try_get(rtype.key, p.namespace if rtype.namespaced else "", p.name)
            if live is None:
                raise InvalidInput(
                    f"{p.kind} {p.namespace}/{p.name} does not exist at that time",
                    field=f"{where}.patch.name",
                )
            # imported here: the apiserver package is ~60 ms of imports `sim run` otherwise skips
            from lwsflow.sim.apiserver.patch import json_merge_patch

            new = json_merge_patch(live, p.patch)
            new.pop("status", None)
            apply_object(c, new, f"{where}.patch")
        elif a.fault is not None:
            inject(c, a.fault)
    except InvalidInput as exc:
        if exc.field.startswith(where):
            raise
        raise InvalidInput(exc.message, field=f"{where}.{exc.field}" if exc.field else where) from None


def _done(c: Cluster, names: list[tuple[str, str, str]]) -> bool:
    for key, ns, name in names:
        o = c.store.get_raw(key, ns, name)
        if o is None:
            return False
        st = o.get("status") or {}
        conds = {x.get("type"): x.get("status") for x in st.get("conditions") or []}
        if st.get("observedGeneration") != o["metadata"].get("generation"):
            return False
        if conds.get("Available") != "True":
            return False
        if key == kinds.LWS.key:
            if conds.get("UpdateInProgress") == "True":
                return False
            ru = ((o["spec"].get("rolloutStrategy") or {}).get("rollingUpdateConfiguration")) or {}
            want = int(o["spec"].get("replicas", 1))
            if not ru.get("partition") and not (
                st.get("replicas") == st.get("readyReplicas") == st.get("updatedReplicas") == want
            ):
                return False  # the final stage also waits for surge groups to go (§c)
    return True


def run_scenario(sc: Scenario) -> ScenarioResult:
    c = Cluster(sc.cluster.model_copy(deep=True) if sc.cluster else None)
    tl = Timeline(c.now())
    watched: dict[str, tuple[str, str, str]] = {}
    for i, obj in enumerate(sc.objects):
        apply_object(c, obj, f"objects[{i}]")
    for obj in sc.objects + [a.apply for a in sc.actions if a.apply is not None]:
        rtype = kinds.for_object(obj)
        if rtype in (kinds.LWS, kinds.DS):
            meta = obj.get("metadata") or {}
            watched.setdefault(meta["name"], (rtype.key, meta.get("namespace") or "default", meta["name"]))
    if sc.until.available is not None:
        missing = [n for n in sc.until.available if n not in watched]
        if missing:
            raise InvalidInput(
                f"no LeaderWorkerSet or DisaggregatedSet named {missing[0]!r} in the scenario",
                field="until.available",
            )
        names = [watched[n] for n in sc.until.available]
    else:
        names = list(watched.values())
    start = c.now()
    for i, a in enumerate(sc.actions):
        c.at(start + a.at, functools.partial(_run_action, c, i, a, tl))
    last = start + max([a.at for a in sc.actions] or [0.0])

    def pred(cl: Cluster) -> bool:
        tl.sample(cl)
        return cl.now() >= last and _done(cl, names)

    try:
        c.run_until(pred, max(sc.until.timeout, last - start))
        reached = True
    except SimTimeout:
        reached = False
    tl.sample(c)
    return ScenarioResult(sc, c, tl, reached, c.now() - start)
