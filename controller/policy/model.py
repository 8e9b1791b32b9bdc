"""The RolloutPolicy resource, defined once: the CRD's OpenAPI schema is generated from these models.

Field names are the wire names (camelCase) so the models read like the YAML a user writes. Durations
are Go-style strings (``90s``, ``5m``, ``1h30m``), as in Argo Rollouts and Flagger (one grammar:
``lwsflow.controller.api.duration``). The spec choices:

- ``targetRef.kind`` is ``LeaderWorkerSet``, ``DisaggregatedSet`` or ``LeaderWorkerSetPair`` (two LWS
  labelled ``lwsflow.io/pd-pair=<name>``, roles prefill and decode): the three targets the engine rolls.
- every stage has its own ``bake`` and ``checks`` (the engine runs them after the stage's gate);
  ``pause: {}`` is a manual gate *before* the stage starts, passed by ``kubectl lwsflow promote``.
- ``onFailure: hold`` keeps the canary groups and pauses for a human instead of rolling back.
- the notification webhook URL lives in a Secret (``secretKeyRef``): a URL is a credential for Slack.
- ``analysis`` is the analysis spec of ``lwsflow rollout --analysis`` (the same model), inline; the
  controller runs it after every stage's checks and records it in ``status.analysis`` (bounded).
- ``quota.onShortage`` (``refuse`` | ``inPlace``): a target with Kueue's queue label whose ClusterQueue
  cannot admit the surge groups is refused before the first write, or rolled within the quota.
- ``pdProbe`` runs the cross-revision P/D compatibility probe (``--pd-probe``) before a pair's rollout
  mixes revisions; opt-in (a canary model load per release, and the opt-in RBAC of
  ``overlays/controller/pdprobe``), for ``LeaderWorkerSetPair`` targets only (docs/controller.md).
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from lwsflow.controller.analysis.spec import AnalysisSpec
from lwsflow.controller.api.duration import duration_seconds
from lwsflow.controller.api.phases import PolicyPhase
from lwsflow.controller.policy import rules

GROUP, VERSION, KIND, PLURAL, SINGULAR = "lwsflow.io", "v1alpha1", "RolloutPolicy", "rolloutpolicies", \
    "rolloutpolicy"
API_VERSION = f"{GROUP}/{VERSION}"
SHORT_NAMES = ("rp",)

PHASES = tuple(PolicyPhase)  # status.phase: the CRD's enum is generated from PolicyPhase
HISTORY_LIMIT = 5
STAGE_TIMINGS_LIMIT = 48  # per rollout in status.history: a pair's two roles of rollout/stagelog.LIMIT
ANALYSIS_MEASUREMENTS_LIMIT = 10  # per metric, in status.analysis
ANALYSIS_VERDICTS_LIMIT = 10

_DNS_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"


# the wire value stays what the user wrote: text or a whole number of seconds (int-or-string in the CRD,
# whose CEL rules carry the one grammar's pattern, api/duration)
Duration = Annotated[int | str, Field(json_schema_extra={"x-kubernetes-int-or-string": True,
                                                         "maxLength": rules.DURATION_MAX_LENGTH})]
_GROUPS_PERCENT = re.compile(rules.GROUPS_PERCENT.removesuffix("$") + r"\Z")
DnsLabel = Annotated[str, Field(pattern=_DNS_LABEL, min_length=1, max_length=63)]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class TargetRef(_Model):
    """What the policy rolls."""

    kind: Literal["LeaderWorkerSet", "DisaggregatedSet", "LeaderWorkerSetPair"]
    name: DnsLabel


class PauseGate(_Model):
    """A manual gate: the stage waits until ``kubectl lwsflow promote`` passes it."""


class SmokeCheck(_Model):
    """The lwsflow smoke test against the target's serving endpoint (chat completion + /v1/models)."""

    timeoutSeconds: int = Field(default=300, ge=1)


class HttpCheck(_Model):
    """GET ``url``; any 2xx passes."""

    url: str = Field(pattern=r"^https?://")
    timeoutSeconds: int = Field(default=10, ge=1)


class CommandCheck(_Model):
    """Run ``command`` (argv) in the controller's container; exit 0 passes."""

    command: list[str] = Field(min_length=1)
    timeoutSeconds: int = Field(default=300, ge=1)


class Check(_Model):
    """One check after a stage's gate and bake: exactly one of ``smoke``, ``http``, ``command``."""

    name: str = ""
    smoke: SmokeCheck | None = None
    http: HttpCheck | None = None
    command: CommandCheck | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> Check:
        if sum(x is not None for x in (self.smoke, self.http, self.command)) != 1:
            raise ValueError("a check sets exactly one of smoke, http, command")
        return self


class Stage(_Model):
    """One stage: groups on the new template (or blue-green: green's traffic weight), then bake and checks."""

    groups: int | str | None = Field(default=None, json_schema_extra={"x-kubernetes-int-or-string": True,
                                                                      "maxLength": rules.GROUPS_MAX_LENGTH})
    weight: int | None = Field(default=None, ge=1, le=100)
    bake: Duration = "0s"
    pause: PauseGate | None = None
    checks: list[Check] = Field(default_factory=list)

    @field_validator("groups")
    @classmethod
    def _groups(cls, v: int | str | None) -> int | str | None:
        if v is None:
            return v
        if isinstance(v, bool) or (isinstance(v, int) and v < 1) or (isinstance(v, str)
                                                                   and not _GROUPS_PERCENT.match(v)):
            raise ValueError(f"{rules.GROUPS_SAYS} (got {v!r})")
        return v

    @field_validator("bake", mode="before")  # before: true or 1.0 would pass as the int 1
    @classmethod
    def _bake(cls, v: object) -> object:
        duration_seconds(v)
        if isinstance(v, float):
            raise ValueError(f"{v!r}: write a fraction of a second as text (\"{v}\") or in ms (500ms)")
        return v


class SecretKeyRef(_Model):
    name: DnsLabel
    key: str = Field(min_length=1)


class Webhook(_Model):
    """A Slack-compatible incoming webhook; its URL is read from a Secret in the policy's namespace."""

    secretKeyRef: SecretKeyRef


class Notifications(_Model):
    webhooks: list[Webhook] = Field(default_factory=list)


class PdProbe(_Model):
    """Before a pair's rollout mixes revisions: hand KV off across them both ways (docs/rollout.md
    "Cross-revision P/D compatibility"); an incompatible release is refused or switched all at once."""

    enabled: bool = True
    onIncompatible: Literal["refuse", "all-at-once"] = "refuse"


class QuotaPolicy(_Model):
    """A target with Kueue's queue label (rollout/quota.py): what to do when its ClusterQueue cannot
    admit the surge groups. ``refuse`` (the default): nothing is written, the status says why;
    ``inPlace``: roll with the surge the quota admits (none: in place, the budget written on the target)."""

    onShortage: Literal["refuse", "inPlace"] = "refuse"


class RolloutPolicySpec(_Model):
    targetRef: TargetRef
    # partition: stages of groups updated in place; blue-green: a second P/D pair in its own
    # InferencePool, traffic moved by HTTPRoute weights (docs/rollout.md "Blue-green")
    strategy: Literal["partition", "blue-green"] = "partition"
    stages: list[Stage] = Field(min_length=1, max_length=rules.MAX_STAGES)
    progressDeadline: Duration = "30m"
    onFailure: Literal["rollback", "hold"] = "rollback"
    notifications: Notifications | None = None
    analysis: AnalysisSpec | None = None  # run after every stage's checks (docs/analysis.md)
    pdProbe: PdProbe | None = None  # off unless set: `pdProbe: {}` probes with onIncompatible refuse
    quota: QuotaPolicy | None = None  # Kueue: the surge the target's ClusterQueue cannot admit is refused

    @field_validator("progressDeadline", mode="before")
    @classmethod
    def _deadline(cls, v: object) -> object:
        if duration_seconds(v) <= 0:
            raise ValueError(f"must be above 0 (got {v!r})")
        if isinstance(v, float):
            raise ValueError(f"{v!r}: write a fraction of a second as text (\"{v}\") or in ms (500ms)")
        return v

    @field_validator("stages")
    @classmethod
    def _stages_fit_strategy(cls, v: list[Stage], info: ValidationInfo) -> list[Stage]:
        if info.data.get("strategy") == "blue-green":
            if any(s.weight is None or s.groups is not None for s in v):
                raise ValueError("a blue-green stage sets weight (green's percent of the traffic), "
                                 "not groups")
            weights = [s.weight or 0 for s in v]
            if weights != sorted(set(weights)) or weights[-1] != 100:
                raise ValueError(f"blue-green weights must rise and end at 100 (got {weights})")
            return v
        if any(s.weight is not None or s.groups is None for s in v):
            raise ValueError("a partition stage sets groups, not weight (weight is for strategy blue-green)")
        if v and v[-1].groups != "100%":
            raise ValueError(f"the last stage must be groups: 100% (got {v[-1].groups!r}): a rollout ends "
                             "with every group on the new template")
        return v

    @model_validator(mode="after")
    def _stages_fit_target(self) -> RolloutPolicySpec:
        kind = self.targetRef.kind
        if self.strategy == "blue-green" and kind != "LeaderWorkerSetPair":
            raise ValueError("strategy blue-green rolls a LeaderWorkerSetPair (a second P/D pair beside it)")
        if kind == "DisaggregatedSet" and len(self.stages) != 1:
            # the DS controller rolls every role at once: it has no partition to stage with
            raise ValueError("a DisaggregatedSet target has exactly one stage (groups: 100%)")
        if kind == "LeaderWorkerSetPair" and self.stages[0].pause is not None:
            # the pair coordinator starts both roles' rollouts together with stage 1
            raise ValueError("a LeaderWorkerSetPair cannot have a manual gate before its first stage")
        return self

    @model_validator(mode="after")
    def _pd_probe_fits_target(self) -> RolloutPolicySpec:
        if self.pdProbe is None or not self.pdProbe.enabled:
            return self
        if self.targetRef.kind == "LeaderWorkerSet":
            raise ValueError("pdProbe is for a LeaderWorkerSetPair target: a LeaderWorkerSet has no "
                             "prefill and decode roles whose revisions could mix")
        if self.targetRef.kind == "DisaggregatedSet":
            # no partition: the DS controller mixes revisions as soon as Git applies the new roles
            raise ValueError("pdProbe is for a LeaderWorkerSetPair target: a DisaggregatedSet has no "
                             "partition, so its controller mixes revisions as soon as Git applies the new "
                             "roles, before any probe could answer; probe it before the sync (`lwsflow "
                             "rollout run ds/NAME --manifest FILE --pd-probe`)")
        if self.strategy == "blue-green":
            raise ValueError("pdProbe is for strategy partition: blue-green never mixes revisions "
                             "(green is a new pool)")
        return self

    def stages_text(self) -> str:
        """The engine's stage list (``"1,25%,100%"``; blue-green: the weights ``"10,50,100"``)."""
        return ",".join(str(s.weight if self.strategy == "blue-green" else s.groups) for s in self.stages)


class Condition(_Model):
    type: str
    status: Literal["True", "False", "Unknown"]
    reason: str = ""
    message: str = ""
    lastTransitionTime: str = ""


class StageTiming(_Model):
    """One stage of a rollout as the target recorded it (``rollout.lwsflow.io/stage-log``): started,
    gate passed (readiness; bake and checks follow), ended; RFC 3339 in the cluster's clock."""

    stage: int
    role: str = ""  # prefill or decode: the LWS of a pair the stage moved
    groups: int = 0  # groups on the new revision once the stage passed
    replicas: int = 0
    started: str = ""
    gatePassed: str = ""
    ended: str = ""
    result: str = ""  # passed | failed
    minReady: int | None = None  # the fewest ready groups seen during the stage


class RolloutRecord(_Model):
    """One past rollout: its outcome and timing, stage by stage (what ``lwsflow report`` draws)."""

    id: str
    templateHash: str = ""
    outcome: str = ""
    started: str = ""
    finished: str = ""
    message: str = ""
    stages: list[StageTiming] = Field(default_factory=list, max_length=STAGE_TIMINGS_LIMIT)
    rollbackStarted: str = ""
    rollbackFinished: str = ""


class AnalysisMeasurementStatus(_Model):
    """One measurement (``controller/analysis/evaluate.Measurement``) at a stage."""

    stage: int
    index: int
    phase: Literal["successful", "failed", "inconclusive", "error"]
    value: float | None = None
    baseline: float | None = None
    detail: str = ""
    time: str = ""


class AnalysisMetricStatus(_Model):
    """A metric over the current rollout: counts of every measurement, the last few in full."""

    name: str
    phase: str = ""  # the verdict at the latest stage that measured it ("" while running)
    successful: int = 0
    failed: int = 0
    inconclusive: int = 0
    error: int = 0  # provider errors
    measurements: list[AnalysisMeasurementStatus] = Field(default_factory=list,
                                                          max_length=ANALYSIS_MEASUREMENTS_LIMIT)


class AnalysisVerdict(_Model):
    stage: int
    phase: Literal["Successful", "Failed", "Inconclusive", "Error", "Skipped"]
    revision: str = ""
    stableRevision: str = ""
    message: str = ""
    time: str = ""


class AnalysisStatus(_Model):
    """The analysis of the current (or last) rollout: what the controller measured and decided."""

    rolloutId: str = ""
    stage: int = 0
    phase: Literal["Running", "Successful", "Failed", "Inconclusive", "Skipped"] = "Running"
    revision: str = ""
    stableRevision: str = ""
    metrics: list[AnalysisMetricStatus] = Field(default_factory=list)
    verdicts: list[AnalysisVerdict] = Field(default_factory=list, max_length=ANALYSIS_VERDICTS_LIMIT)


class PdProbeStatus(_Model):
    """The P/D probe's verdict on one template of the pair (``templateKey``: decode's and prefill's
    template hashes) under one policy generation. Refused and NotRun hold that template: it is not
    rolled, nor probed again, until Git syncs another (NotRun: or ``RETRY_NOT_RUN_S`` have passed)."""

    templateKey: str = ""
    observedGeneration: int = 0
    verdict: Literal["Probing", "Compatible", "AllAtOnce", "Refused", "NotRun"] = "Probing"
    failed: list[str] = Field(default_factory=list)  # directions, e.g. "new prefill -> old decode"
    message: str = ""
    time: str = ""


class BlueGreenStatus(_Model):
    """A blue-green rollout's traffic (``strategy: blue-green``): the pairs, their pools and weights."""

    phase: str = ""  # the executor's phase: Starting, Shifting, Finishing, Succeeded, RolledBack, Failed
    bluePair: str = ""
    greenPair: str = ""
    bluePool: str = ""
    greenPool: str = ""
    blueWeight: int = 0  # the HTTPRoute's backendRef weights as they stand
    greenWeight: int = 0
    weights: list[int] = Field(default_factory=list)  # green's weight per stage


class RolloutPolicyStatus(_Model):
    # use_enum_values: a parsed status holds the plain str, as the wire does
    model_config = ConfigDict(extra="forbid", populate_by_name=True, use_enum_values=True)

    observedGeneration: int = 0
    phase: PolicyPhase = Field(default=PolicyPhase.IDLE, validate_default=True)
    message: str = ""
    rolloutId: str = ""
    currentStage: int = 0  # 1-based stage in progress (0: none)
    stages: int = 0
    stageText: str = ""  # "2/4" for the printer column
    observedTemplateHash: str = ""
    stableRevision: str = ""
    canaryRevision: str = ""
    promotedStage: int = 0
    conditions: list[Condition] = Field(default_factory=list)
    history: list[RolloutRecord] = Field(default_factory=list, max_length=HISTORY_LIMIT)
    analysis: AnalysisStatus | None = None  # written by the rollout's driver, not derived
    pdProbe: PdProbeStatus | None = None  # written by the driver before a pair's rollout starts
    blueGreen: BlueGreenStatus | None = None  # strategy blue-green: derived from the HTTPRoute's state


class RolloutPolicy(_Model):
    apiVersion: Literal["lwsflow.io/v1alpha1"] = "lwsflow.io/v1alpha1"
    kind: Literal["RolloutPolicy"] = "RolloutPolicy"
    metadata: dict[str, Any] = Field(default_factory=dict)
    spec: RolloutPolicySpec
    status: RolloutPolicyStatus | None = None
