"""Rollout state persisted on the target object as controller-owned annotations.

Everything a restarted controller needs lives under ``rollout.lwsflow.io/`` on the LWS (or DS)
itself, so a rollout survives a SIGKILL at any point and rollback never depends on anything outside
the cluster: the previous template is kept gzip+base64 in an annotation next to the state.

Progress is keyed by ``id`` + stage index: ``passed`` counts the stages whose gate, bake and hooks
all succeeded, so a restart resumes at stage ``passed`` and never redoes or skips a stage.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field, fields
from datetime import UTC, datetime
from typing import Any

from lwsflow.controller.api import wire
from lwsflow.controller.api.labels import ROLLOUT_PREFIX
from lwsflow.controller.api.phases import EnginePhase
from lwsflow.controller.api.wire import Obj

STAGE_STARTED_EPOCH = ROLLOUT_PREFIX + "stage-started-epoch"  # read by the Argo CD health Lua

# Phases. Active ones are resumed by a restarted controller; the others are final.
STARTING, RUNNING, ROLLING_BACK = EnginePhase.STARTING, EnginePhase.RUNNING, EnginePhase.ROLLING_BACK
SUCCEEDED, ROLLED_BACK = EnginePhase.SUCCEEDED, EnginePhase.ROLLED_BACK
FAILED, ABORTED = EnginePhase.FAILED, EnginePhase.ABORTED
ACTIVE = frozenset({STARTING, RUNNING, ROLLING_BACK})

_KEYS = {  # attribute -> annotation suffix
    "id": "id", "phase": "phase", "stages": "stages", "targets": "targets", "passed": "passed",
    "target_hash": "target-hash", "previous_hash": "previous-hash",
    "previous_template": "previous-template", "bake_s": "bake-seconds",
    "deadline_s": "deadline-seconds", "started": "started", "updated": "updated",
    "reason": "reason", "paused": "paused", "abort": "abort", "stage_started": "stage-started",
    "no_rollback": "no-rollback", "last_good": "last-good-template", "manifest_hash": "manifest-hash",
    "gitops": "gitops", "stage_log": "stage-log", "failed_template": "failed-template",
    "inconclusive": "inconclusive-stage", "accepted": "accepted-stage",
}


# annotation text -> attribute, by the attribute's declared type (the inverse of ``annotations``)
_PARSE: dict[str, Callable[[str], Any]] = {
    "str": str, "int": int, "float": float, "bool": lambda raw: raw == "true",
    "list[int]": lambda raw: [int(x) for x in raw.split(",") if x],
}


def iso(epoch: float) -> str:
    """Cluster time as the annotations store it (RFC 3339, microseconds, UTC)."""
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def epoch(text: str) -> float | None:
    """The inverse of :func:`iso`; None for a missing or foreign value."""
    try:
        return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC).timestamp()
    except (TypeError, ValueError):
        return None


def template_of(obj: Obj) -> Obj:
    """The revision-relevant part of an LWS spec (§b: leaderWorkerTemplate and networkConfig)."""
    spec = obj.get("spec") or {}
    if "roles" in spec:  # a DisaggregatedSet: its revision is the roles' templates
        return {"roles": spec.get("roles")}
    out = {"leaderWorkerTemplate": spec.get("leaderWorkerTemplate")}
    if spec.get("networkConfig") is not None:
        out["networkConfig"] = spec["networkConfig"]
    return out


def _canonical(template: Obj) -> bytes:
    return json.dumps(template, sort_keys=True, separators=(",", ":")).encode()


def template_hash(template: Obj) -> str:
    """A stable hash of a template (canonical JSON); our own, not the LWS revision hash (§b)."""
    return hashlib.sha256(_canonical(template)).hexdigest()[:16]


def pack(template: Obj) -> str:
    """Template -> compact annotation value (gzip + base64 of canonical JSON)."""
    return base64.b64encode(gzip.compress(_canonical(template), mtime=0)).decode()


def unpack(value: str) -> Obj:
    template: Obj = json.loads(gzip.decompress(base64.b64decode(value)))
    return template


@dataclass
class RolloutState:
    """The persisted rollout record (see module docstring)."""

    id: str = ""
    phase: str = ""
    stages: str = ""
    targets: list[int] = field(default_factory=list)
    passed: int = 0
    target_hash: str = ""
    previous_hash: str = ""
    previous_template: str = ""
    bake_s: float = 0.0
    deadline_s: float = 0.0
    started: str = ""
    updated: str = ""
    reason: str = ""
    paused: bool = False
    abort: bool = False
    stage_started: str = ""
    no_rollback: bool = False
    last_good: str = ""
    manifest_hash: str = ""
    # Started without --manifest (GitOps applied the template): the end refreezes the partition at
    # replicas, so the next template Git syncs waits for a staged rollout too.
    gitops: bool = False
    # when each stage started, passed its gate and ended, and the rollback (``stagelog``): the record
    # the pictures are drawn from, whoever drove the rollout
    stage_log: str = ""
    # the template a rollback took off the target (gzip+base64): what a retry re-applies when the
    # failed template is no longer on the target (the controller's `kubectl lwsflow retry`)
    failed_template: str = ""
    # the 1-based stage whose analysis ended without a decision and paused the rollout
    # (``onInconclusive: pause``; 0: none), and the one a person then passed (promote): that stage's
    # analysis is not run again
    inconclusive: int = 0
    accepted: int = 0

    @property
    def active(self) -> bool:
        return self.phase in ACTIVE

    @property
    def done(self) -> bool:
        return bool(self.targets) and self.passed >= len(self.targets)

    @classmethod
    def from_object(cls, obj: Obj) -> RolloutState:
        ann = wire.annotations_of(obj)
        kw: dict[str, Any] = {}
        for f in fields(cls):
            raw = ann.get(ROLLOUT_PREFIX + _KEYS[f.name])
            if raw is None:
                continue
            kw[f.name] = _PARSE[str(f.type)](raw)
        return cls(**kw)

    def annotations(self, only: tuple[str, ...] = ()) -> dict[str, str | None]:
        """The annotation patch for this state (``only``: just these attributes)."""
        out: dict[str, str | None] = {}
        for name, value in asdict(self).items():
            if only and name not in only:
                continue
            if name == "targets":
                text = ",".join(str(t) for t in value)
            elif isinstance(value, bool):
                text = "true" if value else "false"
            elif isinstance(value, float):
                text = f"{value:g}"
            else:
                text = str(value)
            out[ROLLOUT_PREFIX + _KEYS[name]] = text
            if name == "stage_started":
                # Argo CD's Lua has no string library to parse RFC 3339: give it unix seconds too.
                started = epoch(text)
                out[STAGE_STARTED_EPOCH] = f"{started:.0f}" if started is not None else None
        return out


def any_active(objs: Iterable[Obj]) -> bool:
    """Whether a rollout is under way on any of these objects (a pair's roles: one rollout)."""
    return any(RolloutState.from_object(o).active for o in objs)


def manifest_hash(manifest: Obj | None, live: Obj) -> str:
    """What a rollout was asked to apply: the manifest's template as written (GitOps: the live one)."""
    return template_hash(template_of(manifest if manifest is not None else live))
