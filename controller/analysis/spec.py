"""The analysis spec a user writes (pydantic v2): metrics measured over time, each with a provider, a
query with ``{{args}}``, success/failure conditions, and an optional comparison with the stable revision.

Semantics follow Argo Rollouts' AnalysisTemplate: ``count`` measurements ``interval`` apart; a
measurement is failed when ``failureCondition`` holds, or when ``successCondition`` is set and does not
hold; the metric fails when more than ``failureLimit`` measurements failed, is in error after more than
``consecutiveErrorLimit`` provider errors in a row, and is inconclusive when more than
``inconclusiveLimit`` measurements could not be judged (no data); ``evaluate.py`` has the rest (no pass
without evidence).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic.config import JsonDict

from lwsflow.controller.analysis import condition
from lwsflow.controller.api.duration import duration_seconds
from lwsflow.controller.errors import InvalidInput

ARGS = ("revision", "stable_revision", "namespace", "lws", "stable_lws", "role", "window", "elapsed")
_ARG_RE = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
# argument values end up inside PromQL label matchers and URLs: keep them to label-value-safe characters
ARG_VALUE = re.compile(r"^[A-Za-z0-9._-]*$")


# a proportion's tolerance at or above this is no test of a rare-event ratio (0.5 meant 50 points)
PROPORTION_TOLERANCE_MAX = 0.1
# the absolute guard of mode proportion: a ratio above this fails whatever the stable's (Argo's
# failureCondition of the same name in spirit)
DEFAULT_MAX_RATIO = 0.05
# a number or a text like "0.5%": no structural schema type says both (the RolloutPolicy CRD leaves the
# value to this model; controller/policy/crd.py)
NUMBER_OR_TEXT: JsonDict = {"x-lwsflow-number-or-text": True}
MAX_METRICS = 32  # a bound the RolloutPolicy CRD needs for its rules' cost estimate


def promql_duration(seconds: float) -> str:
    """A PromQL range literal for ``seconds`` (whole milliseconds)."""
    return f"{max(round(seconds * 1000), 1)}ms"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class PrometheusProvider(_Model):
    address: str | None = None  # None: the --prometheus URL given to the run
    query: str = Field(min_length=1)


class HttpProvider(_Model):
    url: str = Field(min_length=1)
    json_path: str = Field("", alias="jsonPath")  # dotted path into the JSON answer; "": the body is a number
    timeout: float = Field(10.0, gt=0)


class CommandProvider(_Model):
    argv: list[str] = Field(min_length=1)  # prints a number on its last stdout line
    timeout: float = Field(60.0, gt=0)


class SmokeProvider(_Model):
    """The smoke test (components/smoke) against the new revision's serving pods of ``{{lws}}``:
    the value is the share of checks that passed (0..1), or with ``check`` that check's share, or
    with ``check`` and ``figure`` the worst (largest) of that figure over the pods (e.g. ``check:
    stream-latency``, ``figure: ttft_s``); no such check or figure: no data."""

    check: str = ""
    figure: str = ""
    timeout: float = Field(120.0, gt=0)

    @model_validator(mode="after")
    def _figure_needs_check(self) -> SmokeProvider:
        if self.figure and not self.check:
            raise ValueError("figure needs check (the smoke check that measures it)")
        return self


class Provider(_Model):
    prometheus: PrometheusProvider | None = None
    smoke: SmokeProvider | None = None
    http: HttpProvider | None = None
    command: CommandProvider | None = None

    @model_validator(mode="after")
    def _one(self) -> Provider:
        if sum(p is not None for p in (self.prometheus, self.smoke, self.http, self.command)) != 1:
            raise ValueError("give exactly one of prometheus, smoke, http, command")
        return self

    @property
    def kind(self) -> str:
        for kind in ("prometheus", "smoke", "http", "command"):
            if getattr(self, kind) is not None:
                return kind
        raise AssertionError("validated: one provider is set")

    def templates(self) -> list[str]:
        if self.prometheus:
            return [self.prometheus.query]
        if self.smoke:
            return []
        if self.http:
            return [self.http.url]
        assert self.command is not None
        return list(self.command.argv)


class Compare(_Model):
    """New revision against stable over the same window.

    ``relative`` / ``absolute``: pass while the new value is no worse than the stable one by more than
    ``tolerance`` (percent of it, or points). ``proportion`` (rare-event ratios): the query counts the
    events and ``total`` the requests; fail when a one-sided test at ``alpha`` shows the new ratio above
    the stable's plus ``tolerance`` points. ``histogram`` (latency quantiles): the query gives bucket
    counts ``by (le)``; fail when a one-sided test at ``alpha`` shows more of the new revision's requests
    above a bucket boundary than the stable's above the boundary divided by ``1 + tolerance/100``
    (``stats.py``); for a histogram observed per token (ITL), ``requests`` is the query counting the
    requests the observations come from, so the test counts requests, not tokens, as samples."""

    mode: Literal["relative", "absolute", "proportion", "histogram"] = "relative"
    # relative / histogram: percent (10 or "10%"); proportion / absolute: in the value's own unit,
    # for a ratio points of it (0.005 or "0.5%")
    tolerance: float = Field(ge=0, json_schema_extra=NUMBER_OR_TEXT)
    better: Literal["lower", "higher"] = "lower"  # latency and error ratios: lower is better
    alpha: float = Field(0.01, gt=0, lt=0.5)  # proportion / histogram: false-positive rate per measurement
    quantile: float = Field(0.95, gt=0, lt=1)  # histogram: the quantile the tolerance is about
    total: str = ""  # proportion: the query for the requests the events are among
    requests: str = ""  # histogram: the query for the requests behind per-token observations
    # proportion: the absolute guard, a ratio no release may show whatever the stable's (0.05 or "5%")
    max_ratio: float | None = Field(None, gt=0, le=1, alias="maxRatio", json_schema_extra=NUMBER_OR_TEXT)

    @field_validator("tolerance", "max_ratio", mode="before")
    @classmethod
    def _percent(cls, v: object, info: ValidationInfo) -> object:
        """``"0.5%"``: a ratio's points (0.005) for maxRatio and modes proportion / absolute; the
        percent itself (10) where the tolerance is a percentage (relative, histogram)."""
        if not isinstance(v, str) or not v.strip().endswith("%"):
            return v
        try:
            number = float(v.strip()[:-1])
        except ValueError:
            raise ValueError(f"{v!r} is not a number or a percentage like \"0.5%\"") from None
        mode = info.data.get("mode", "relative")
        percent = info.field_name == "tolerance" and mode in ("relative", "histogram")
        return number if percent else number / 100

    @field_validator("tolerance")
    @classmethod
    def _meaningful(cls, v: float, info: ValidationInfo) -> float:
        mode = info.data.get("mode", "relative")
        if mode == "proportion" and not 0 < v < PROPORTION_TOLERANCE_MAX:
            # 0 can never be shown (an equal release is never shown within it, so it never passes);
            # 0.1 and above is no test of a rare-event ratio: `tolerance: 0.5` meant 50 points
            raise ValueError(f"{v:g} is a ratio's points in mode proportion and must be above 0 and below "
                             f"{PROPORTION_TOLERANCE_MAX:g}: write half a point as 0.005 or \"0.5%\"")
        if mode == "histogram" and v <= 0:
            raise ValueError("the percent slower allowed in mode histogram must be above 0 (an equally "
                             "fast release is never shown within 0): e.g. 10 or \"10%\"")
        return v

    @model_validator(mode="after")
    def _mode_fields(self) -> Compare:
        fields = self.model_fields_set
        if self.mode == "proportion" and not self.total:
            raise ValueError("mode proportion needs total (the query counting the requests)")
        if self.mode != "proportion" and self.total:
            raise ValueError("total is only for mode proportion")
        if self.mode != "histogram" and self.requests:
            raise ValueError("requests is only for mode histogram")
        if self.mode != "histogram" and "quantile" in fields:
            raise ValueError("quantile is only for mode histogram")
        if not self.statistical and "alpha" in fields:
            raise ValueError("alpha is only for modes proportion and histogram")
        if self.statistical and self.better != "lower":
            raise ValueError(f"mode {self.mode} compares where lower is better; better must be lower")
        if self.mode != "proportion" and self.max_ratio is not None:
            raise ValueError("maxRatio is only for mode proportion")
        return self

    @property
    def guard(self) -> float | None:
        """The absolute guard of a proportion (default ``DEFAULT_MAX_RATIO``; 1 switches it off)."""
        if self.mode != "proportion":
            return None
        bound = DEFAULT_MAX_RATIO if self.max_ratio is None else self.max_ratio
        return None if bound >= 1 else bound

    @property
    def statistical(self) -> bool:
        return self.mode in ("proportion", "histogram")

    def condition(self) -> str | None:
        """The bound as a condition (relative/absolute); None for the statistical modes."""
        if self.statistical:
            return None
        t = self.tolerance
        if self.better == "lower":
            bound = f"baseline * {1 + t / 100!r}" if self.mode == "relative" else f"baseline + {t!r}"
            return f"result <= {bound}"
        bound = f"baseline * {1 - t / 100!r}" if self.mode == "relative" else f"baseline - {t!r}"
        return f"result >= {bound}"


# a number of seconds or "30s": int-or-string in the RolloutPolicy CRD (its schema comes from here)
_DURATION_SCHEMA: JsonDict = {"x-kubernetes-int-or-string": True}
Duration = Annotated[float, Field(gt=0, json_schema_extra=_DURATION_SCHEMA)]


class Metric(_Model):
    name: Annotated[str, StringConstraints(pattern=r"^[a-z0-9]([-a-z0-9_]*[a-z0-9])?$", max_length=63)]
    provider: Provider
    # CEL (condition.py); bounded for the RolloutPolicy CRD's rules (their cost estimate) as parse bounds them
    success_condition: str | None = Field(None, alias="successCondition", max_length=condition.MAX_LENGTH)
    failure_condition: str | None = Field(None, alias="failureCondition", max_length=condition.MAX_LENGTH)
    compare: Compare | None = None
    interval: Duration = 30.0
    count: int = Field(1, ge=1, le=1000)
    failure_limit: int = Field(0, ge=0, alias="failureLimit")
    inconclusive_limit: int = Field(0, ge=0, alias="inconclusiveLimit")
    # provider errors in a row beyond this end the metric in error (Argo Rollouts' default 4)
    consecutive_error_limit: int = Field(4, ge=0, alias="consecutiveErrorLimit")
    initial_delay: float = Field(0.0, ge=0, alias="initialDelay", json_schema_extra=_DURATION_SCHEMA)

    @field_validator("interval", "initial_delay", mode="before")
    @classmethod
    def _duration(cls, v: object) -> float:
        return duration_seconds(v)

    @field_validator("success_condition", "failure_condition")
    @classmethod
    def _condition(cls, v: str | None) -> str | None:
        if v is not None:
            condition.parse(v)
        return v

    @model_validator(mode="after")
    def _coherent(self) -> Metric:
        if not (self.success_condition or self.failure_condition or self.compare):
            raise ValueError("give successCondition, failureCondition or compare")
        uses_baseline = any("baseline" in condition.parse(c).names
                            for c in (self.success_condition, self.failure_condition) if c)
        if uses_baseline and not self.compare:
            raise ValueError("a condition reads 'baseline' but no compare block measures the stable revision")
        if self.compare and self.provider.kind != "prometheus":
            raise ValueError("compare needs the prometheus provider (one query per revision)")
        for text in self.templates():
            for arg in _ARG_RE.findall(text):
                if arg not in ARGS:
                    raise ValueError(f"unknown argument {{{{{arg}}}}} (known: {', '.join(ARGS)})")
        return self

    def templates(self) -> list[str]:
        """Every text with ``{{args}}``: the provider's, and compare's ``total`` / ``requests`` query."""
        extra = [q for q in (self.compare.total, self.compare.requests) if q] if self.compare else []
        return self.provider.templates() + extra

    def conditions(self) -> tuple[condition.Condition | None, condition.Condition | None]:
        """(success, failure) checked; compare adds its bound to the success condition."""
        succ = condition.parse(self.success_condition) if self.success_condition else None
        text = self.compare.condition() if self.compare else None
        if text:
            bound = condition.parse(text)
            succ = condition.both(succ, bound) if succ else bound
        return succ, condition.parse(self.failure_condition) if self.failure_condition else None


class AnalysisSpec(_Model):
    metrics: list[Metric] = Field(min_length=1, max_length=MAX_METRICS)
    window: Duration | None = None  # the {{window}} argument; default: each metric's interval
    # an analysis that ends without a decision (too little traffic to show a pass or a failure):
    # pause for a person (promote passes the stage, abort rolls back), as Argo Rollouts does, or
    # roll back as a failure would
    on_inconclusive: Literal["pause", "rollback"] = Field("pause", alias="onInconclusive")

    @field_validator("window", mode="before")
    @classmethod
    def _window(cls, v: object) -> float | None:
        return None if v is None else duration_seconds(v)

    @model_validator(mode="after")
    def _unique(self) -> AnalysisSpec:
        names = [m.name for m in self.metrics]
        if len(set(names)) != len(names):
            raise ValueError("metric names must be unique")
        return self


def render(text: str, args: dict[str, str]) -> str:
    """Substitute ``{{arg}}``; InvalidInput when the spec uses an argument this run has no value for."""
    def sub(m: re.Match[str]) -> str:
        name = m.group(1)
        if name not in args:
            raise InvalidInput(f"{{{{{name}}}}} is used but no value was given", field=f"args.{name}")
        return args[name]
    return _ARG_RE.sub(sub, text)


def check_args(args: dict[str, str]) -> None:
    for k, v in args.items():
        if not ARG_VALUE.match(v):
            raise InvalidInput(f"{v!r} may only hold letters, digits, '.', '_' and '-'", field=k)


def validate_spec(data: object, source: str = "") -> AnalysisSpec:
    """Validate a spec document; InvalidInput names the first bad field."""
    try:
        return AnalysisSpec.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        msg = str(err["msg"]).removeprefix("Value error, ")
        raise InvalidInput(msg, field=where or "spec", source=source) from None


def load_spec(path: Path) -> AnalysisSpec:
    """A spec file (YAML), or a built-in template name (``vllm``, ``sglang``, ``vllm-pd``...)."""
    from lwsflow.controller.analysis.templates import TEMPLATES

    if not path.exists() and str(path) in TEMPLATES:
        return validate_spec(TEMPLATES[str(path)](), source=f"builtin:{path}")
    from lwsflow.controller.yamlio import load_yaml_documents

    docs = load_yaml_documents(path)
    if len(docs) != 1:
        raise InvalidInput(f"expected one YAML document, found {len(docs)}", source=str(path))
    return validate_spec(docs[0], source=str(path))
