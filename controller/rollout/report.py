"""The rollout report: what happened, in the cluster's clock, as JSON (``--report FILE``)."""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class StageRecord:
    """One stage of one target (``role`` names the LWS in a P/D pair)."""

    index: int  # 1-based
    target_groups: int
    partition: int
    role: str = ""
    started: float | None = None
    gate_passed: float | None = None
    ended: float | None = None
    result: str = "running"  # running | passed | failed
    gate: dict[str, bool] = field(default_factory=dict)
    gate_detail: str = ""
    min_ready_groups: int | None = None
    api_requests: int = 0
    reaction_s: float | None = None  # gate observed true -> next stage's partition written
    hooks: list[str] = field(default_factory=list)
    analysis: list[dict[str, Any]] = field(default_factory=list)  # every measurement of the stage's hooks
    resumed: bool = False  # this record was continued by a restarted controller


@dataclass
class RolloutReport:
    """The whole rollout; ``min_ready_groups`` is the lowest ready count seen against ``floor``."""

    kind: str
    namespace: str
    name: str
    rollout_id: str = ""
    stages_spec: str = ""
    targets: list[int] = field(default_factory=list)
    started: float | None = None
    ended: float | None = None
    result: str = "running"
    message: str = ""
    floor: int | None = None
    min_ready_groups: int | None = None
    max_pd_skew: float | None = None
    stages: list[StageRecord] = field(default_factory=list)
    rollbacks: list[dict[str, Any]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    api_requests: int = 0
    api_retries: int = 0
    api_conflicts: int = 0  # writes answered 409 and retried after a backoff (rollout.retry)
    partitions_written: list[int] = field(default_factory=list)

    def stage(self, index: int, target_groups: int, partition: int, role: str = "") -> StageRecord:
        """The record of stage ``index`` (1-based) for ``role``, created on first use."""
        for rec in self.stages:
            if rec.index == index and rec.role == role:
                return rec
        rec = StageRecord(index, target_groups, partition, role)
        self.stages.append(rec)
        return rec

    def see_ready(self, ready: int) -> None:
        self.min_ready_groups = ready if self.min_ready_groups is None else min(self.min_ready_groups,
                                                                                 ready)

    def see_floor(self, floor: int) -> None:
        """Record an availability floor in force (the lowest one seen is reported)."""
        self.floor = floor if self.floor is None else min(self.floor, floor)

    def close(self, result: str, message: str, ended: float, *, api_requests: int, api_retries: int,
              events: list[dict[str, Any]]) -> None:
        """Fill in how the rollout ended and what it cost."""
        # str(): a plain str for the report's JSON/YAML, not an outcome.Result member
        self.result, self.message, self.ended = str(result), message, ended
        self.api_requests, self.api_retries, self.events = api_requests, api_retries, list(events)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def write(self, path: str | Path) -> None:
        """Write atomically (temp file + rename) so a reader never sees half a report."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".report-", dir=path.parent)
        with os.fdopen(fd, "w") as fh:
            json.dump(self.to_dict(), fh, indent=2, sort_keys=True)
            fh.write("\n")
        os.replace(tmp, path)
