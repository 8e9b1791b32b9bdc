"""Scenarios: YAML data, Python generator functions, or a shipped name, all resolved to timed events.

YAML (validated with pydantic; every duration accepts ``90``, ``"30m"``, ``"1h30m"``, ``"2d"``)::

    name: deadlines
    nodes:                       # created at ``at`` (default 0) as slot-0 .. slot-9
      - {name: slot, count: 10, gpus: 1}
    jobs:                        # ``count`` copies, ``every`` apart, named long-0 .. long-9
      - {name: long, count: 10, at: 0, duration: 30m, deadline: 60m}
      - {name: tagged, duration: 1h, annotations: {scheduling.lwsflow.io/deadline: 2h}}
    lws:
      - {name: llama, replicas: 2, size: 2, gpus: 8, at: 10m, delete_at: 3h}
    deletes:
      - {at: 2h, kind: node, name: slot-3}

A generator is ``module:function`` or ``path/to/file.py:function``: ``function(rng)`` returns or
yields events from ``lwsflow.sim.evaluator.events``, with ``rng`` a ``random.Random(seed)``.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from lwsflow.controller.errors import InvalidInput
from lwsflow.sim import policies
from lwsflow.sim.evaluator import events as ev

SHIPPED_DIR = Path(__file__).resolve().parent / "scenarios"  # package data: ships in the wheel
# shipped generator scenarios, runnable by name like the YAML files in SHIPPED_DIR
GENERATORS = {
    "large": "lwsflow.sim.evaluator.generators:large_pool",
    "gang-contention": "lwsflow.sim.evaluator.generators:gang_contention",
}


def _duration(value: object) -> float:
    try:
        return policies.parse_duration(value)
    except InvalidInput as exc:
        raise ValueError(exc.message) from None


Duration = Annotated[float, BeforeValidator(_duration)]
Name = Annotated[str, Field(pattern=r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$", max_length=200)]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _Repeated(_Model):
    name: Name
    count: int = Field(default=1, ge=1, le=1_000_000)
    at: Duration = 0.0
    every: Duration = 0.0  # arrival gap between successive copies

    def expand(self) -> Iterable[tuple[str, float]]:
        for i in range(self.count):
            yield (self.name if self.count == 1 else f"{self.name}-{i}"), self.at + i * self.every


class NodeSpec(_Repeated):
    """``count`` nodes with ``gpus`` healthy accelerators each."""

    gpus: int = Field(ge=0, le=1024)


class JobSpec(_Repeated):
    """``count`` batch jobs; deadline and expected duration as fields or as the annotations."""

    duration: Duration
    pods: int = Field(default=1, ge=1, le=10_000)
    gpus: int = Field(default=1, ge=0, le=1024)
    expected: Duration | None = None
    deadline: Duration | None = None
    annotations: dict[str, str] = Field(default_factory=dict)


class LwsSpec(_Repeated):
    """A LeaderWorkerSet of ``replicas`` gangs of ``size`` pods, optionally deleted at ``delete_at``."""

    replicas: int = Field(default=1, ge=1, le=10_000)
    size: int = Field(default=1, ge=1, le=1_000)
    gpus: int = Field(default=8, ge=0, le=1024)
    delete_at: Duration | None = None


class DeleteSpec(_Model):
    at: Duration
    kind: Literal["node", "job", "lws"]
    name: Name


class ScenarioFile(_Model):
    """A scenario as written in YAML."""

    name: Name = "scenario"
    description: str = ""
    until: Duration | None = None  # stop the clock here (default: when nothing is left to happen)
    nodes: list[NodeSpec] = Field(min_length=1)
    jobs: list[JobSpec] = Field(default_factory=list)
    lws: list[LwsSpec] = Field(default_factory=list)
    deletes: list[DeleteSpec] = Field(default_factory=list)

    def events(self) -> list[ev.Event]:
        out: list[ev.Event] = []
        for n in self.nodes:
            out += [ev.NodeCreate(at, name, n.gpus) for name, at in n.expand()]
        for i, j in enumerate(self.jobs):
            exp_ann, dl_ann = policies.timing_from_annotations(j.annotations)
            expected = j.expected if j.expected is not None else exp_ann
            deadline = j.deadline if j.deadline is not None else dl_ann
            # a job no node can ever hold is a typo, not a scheduling outcome worth reporting
            if j.gpus > max(n.gpus for n in self.nodes):
                raise InvalidInput(
                    f"asks {j.gpus} GPUs per pod but no node has that many", field=f"jobs.{i}.gpus"
                )
            out += [
                ev.JobCreate(at, name, j.duration, j.pods, j.gpus, expected, deadline, j.name)
                for name, at in j.expand()
            ]
        for lw in self.lws:
            for name, at in lw.expand():
                out.append(ev.LwsCreate(at, name, lw.replicas, lw.size, lw.gpus, lw.name))
                if lw.delete_at is not None:
                    out.append(ev.LwsDelete(max(at, lw.delete_at), name))
        delete: dict[str, Callable[[float, str], ev.NodeDelete | ev.JobDelete | ev.LwsDelete]] = {
            "node": ev.NodeDelete, "job": ev.JobDelete, "lws": ev.LwsDelete}
        out += [delete[d.kind](d.at, d.name) for d in self.deletes]
        return out


@dataclass(frozen=True)
class Scenario:
    """A resolved scenario: its name, its events, and an optional horizon."""

    name: str
    events: list[ev.Event]
    until: float | None = None
    description: str = ""


def from_data(data: object, source: str = "") -> Scenario:
    """Validate a parsed YAML document; the first problem is one InvalidInput naming the field."""
    if isinstance(data, dict) and "nodes" not in data and ("cluster" in data or "objects" in data):
        # examples/scenarios also holds `lwsflow sim run` rehearsals (Kubernetes objects, a cluster)
        raise InvalidInput(
            "this is a `lwsflow sim run` scenario; `sim evaluate` wants nodes, jobs and lws",
            field="cluster",
            source=source,
        )
    try:
        spec = ScenarioFile.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err["loc"])
        raise InvalidInput(err["msg"], field=field, source=source) from None
    try:
        events = spec.events()
    except InvalidInput as exc:
        raise InvalidInput(exc.message, field=exc.field, source=source) from None
    return Scenario(spec.name, events, spec.until, spec.description)


def from_yaml(path: Path) -> Scenario:
    from lwsflow.controller.yamlio import load_yaml_documents

    docs = load_yaml_documents(path)
    if len(docs) != 1:
        raise InvalidInput(f"expected one YAML document, found {len(docs)}", source=str(path))
    return from_data(docs[0], source=str(path))


def from_generator(ref: str, seed: int, name: str = "") -> Scenario:
    """Run ``module:function`` (or ``file.py:function``) with a seeded ``random.Random``."""
    fn = _resolve(ref)
    events = list(fn(random.Random(seed)) if inspect.signature(fn).parameters else fn())
    for i, e in enumerate(events):
        if not isinstance(e, ev.Event):
            raise InvalidInput(f"item {i} is a {type(e).__name__}, not a scenario event", field=ref)
    name = name or ref.rsplit(":", 1)[1].replace("_", "-")
    return Scenario(name, events, None, (inspect.getdoc(fn) or "").split("\n")[0])


def _resolve(ref: str) -> Callable[..., Any]:
    target, _, attr = ref.rpartition(":")
    if not target or not attr.isidentifier():
        raise InvalidInput("expected module:function or path.py:function", field="SCENARIO")
    if target.endswith(".py"):
        path = Path(target)
        if not path.is_file():
            raise InvalidInput("no such file", field="SCENARIO", source=target)
        spec = importlib.util.spec_from_file_location(f"_lwsflow_scenario_{path.stem}", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    else:
        try:
            module = importlib.import_module(target)
        except ImportError as exc:
            raise InvalidInput(f"cannot import {target!r}: {exc}", field="SCENARIO") from None
    fn = getattr(module, attr, None)
    if not callable(fn):
        raise InvalidInput(f"{target!r} has no function {attr!r}", field="SCENARIO")
    return fn


def _is_evaluator_yaml(path: Path) -> bool:
    """Shipped YAML scenarios of the evaluator have top-level ``nodes`` (``sim run`` ones a ``cluster``)."""
    try:
        head = path.read_text(encoding="utf-8")[:65536]
    except OSError:
        return False
    return any(line.startswith("nodes:") for line in head.splitlines())


def shipped_names() -> list[str]:
    yamls = {p.stem for p in SHIPPED_DIR.glob("*.yaml") if _is_evaluator_yaml(p)}
    return sorted(yamls | set(GENERATORS))


def load(ref: str, seed: int = 0) -> Scenario:
    """A YAML path, a ``module:function`` generator, or a shipped scenario name."""
    path = Path(ref)
    if path.suffix in (".yaml", ".yml") or path.is_file():
        return from_yaml(path)
    if ":" in ref:
        return from_generator(ref, seed)
    if (SHIPPED_DIR / f"{ref}.yaml").is_file() and _is_evaluator_yaml(SHIPPED_DIR / f"{ref}.yaml"):
        return from_yaml(SHIPPED_DIR / f"{ref}.yaml")
    if ref in GENERATORS:
        return from_generator(GENERATORS[ref], seed, name=ref)
    raise InvalidInput(
        f"no such file or shipped scenario {ref!r} (shipped: {', '.join(shipped_names())})", field="SCENARIO"
    )
