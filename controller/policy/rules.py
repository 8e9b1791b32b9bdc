"""The RolloutPolicy CRD's CEL rules (``x-kubernetes-validations``): what the API server refuses at
``kubectl apply``, in the user's words, before the controller ever reads the policy.

The pydantic model (``model.py``) stays the one definition of a valid policy; these rules restate the
parts of it a CEL rule can check, with the same patterns (``GROUPS_PERCENT``, ``duration.PATTERN``,
``condition.CONDITION_CHARS``), and tests/rollout/test_policy_rules.py holds both to the same answers.

A rule about one stage sits on the ``stages`` list, not on its items, so that its message can count
stages as the user does: ``messageExpression`` finds the first stage that breaks it and says
``stage 2: ...`` (the API server's own path would say ``spec.stages[1]``). Only CEL that kube-apiserver
and cel-python (the embedded cluster, ``controller/api/cel.py``) both evaluate is used: macros,
``matches``, ``type()``, ``size()``; no list or string extension library. Every list and
string a rule reads is bounded (``maxItems``/``maxLength``) so that kube-apiserver's estimate of a rule's
cost stays within its budget.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from lwsflow.controller.analysis import condition
from lwsflow.controller.api import duration

MAX_STAGES = 20
# what a stage's groups may say as a percent: 1% to 100%, as the user writes it (no sign, no leading 0)
GROUPS_PERCENT = r"^(100|[1-9][0-9]?)%$"
GROUPS_MAX_LENGTH = 8  # "100%" and room for a typo the rule then names; bounds the CEL cost
DURATION_MAX_LENGTH = 32
GROUPS_SAYS = "groups must be a number of groups (1 or more) or a percent from 1% to 100%, like 25%"
BAKE_SAYS = f"bake must be {duration.EXAMPLES}"
DEADLINE_SAYS = f"progressDeadline must be {duration.EXAMPLES}, above 0"
CONDITION_SAYS = condition.CHARS_SAYS


def _lit(text: str) -> str:
    """A CEL string literal of ``text`` (single quotes; backslashes and quotes escaped)."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _indices(start: int) -> str:
    """The stage indices from ``start`` as a CEL list: the rules' only way to an index (cel-python has
    no ``lists`` library)."""
    return "[" + ", ".join(str(i) for i in range(start, MAX_STAGES)) + "]"


def _when(guard: str, rule: str) -> str:
    """``rule`` where ``guard`` holds, else true: a conditional, which cel-python evaluates lazily (it
    evaluates both sides of ``||``) and kube-apiserver alike."""
    return f"({guard}) ? ({rule}) : true"


def _each_stage(ok: Callable[[str], str], says: str, fallback: str, *, stages: str = "self",
                when: str = "") -> dict[str, str]:
    """A rule that every stage satisfies ``ok`` (a CEL condition on the stage expression it is given),
    whose message names the first stage that does not, counting from 1: ``stage 2: <says>``
    (``fallback``: the message where an API server cannot evaluate the expression)."""
    rule = f"{stages}.all(s, {ok('s')})"
    first = f"{_indices(0)}.filter(i, i < size({stages}) && !({ok(f'{stages}[i]')}))[0]"
    # the stage's number from a list of literals: kube-apiserver estimates the size of string(int) as
    # unbounded, and a message concatenated with it far over its cost budget
    numbers = "[" + ", ".join(f"'{i + 1}'" for i in range(MAX_STAGES)) + "]"
    return {"rule": _when(when, rule) if when else rule, "message": fallback,
            "messageExpression": f"'stage ' + {numbers}[{first}] + {_lit(': ' + says)}"}


def _groups_ok(s: str) -> str:
    g = f"{s}.groups"
    return f"has({g}) ? (type({g}) == int ? {g} >= 1 : {g}.matches({_lit(GROUPS_PERCENT)})) : true"


def _bake_ok(s: str) -> str:
    b = f"{s}.bake"
    return f"has({b}) ? (type({b}) == int ? {b} >= 0 : {b}.matches({_lit(duration.PATTERN)})) : true"


_BLUE_GREEN = "has(self.strategy) && self.strategy == 'blue-green'"
_STAGES = "has(self.stages) && size(self.stages) > 0"
_LAST = "self.stages[size(self.stages) - 1]"
_KIND = "self.targetRef.kind"
_HAS_KIND = f"has(self.targetRef) && has({_KIND})"  # missing: the schema's "Required value" says so
_PROBING = "has(self.pdProbe) && (!has(self.pdProbe.enabled) || self.pdProbe.enabled)"


def stages_rules() -> list[dict[str, str]]:
    """On ``spec.stages``: each stage's own fields."""
    return [_each_stage(_groups_ok, GROUPS_SAYS, f"each stage's {GROUPS_SAYS}"),
            _each_stage(_bake_ok, BAKE_SAYS, f"each stage's {BAKE_SAYS}")]


def spec_rules() -> list[dict[str, str]]:
    """On ``spec``: how the stages fit the strategy and the target (``RolloutPolicySpec``'s validators)."""
    return [
        _each_stage(lambda s: f"has({s}.groups) && !has({s}.weight)",
                    "set groups, not weight (weight is for strategy blue-green)",
                    "a partition stage sets groups, not weight (weight is for strategy blue-green)",
                    stages="self.stages", when=f"!({_BLUE_GREEN}) && has(self.stages)"),
        {"rule": _when(f"!({_BLUE_GREEN}) && {_STAGES}",
                       f"has({_LAST}.groups) && type({_LAST}.groups) == string && {_LAST}.groups == '100%'"),
         "message": "the last stage must be groups: 100% (a rollout ends with every group on the new "
                    "template)"},
        _each_stage(lambda s: f"has({s}.weight) && !has({s}.groups)",
                    "set weight (green's percent of the traffic), not groups",
                    "a blue-green stage sets weight (green's percent of the traffic), not groups",
                    stages="self.stages", when=f"({_BLUE_GREEN}) && has(self.stages)"),
        {"rule": _when(f"({_BLUE_GREEN}) && {_STAGES} && self.stages.all(s, has(s.weight))",
                       f"{_LAST}.weight == 100 && {_indices(1)}.all(i, i >= size(self.stages) || "
                       "self.stages[i].weight > self.stages[i - 1].weight)"),
         "message": "blue-green weights must rise from stage to stage and end at 100"},
        {"rule": _when(f"({_BLUE_GREEN}) && {_HAS_KIND}", f"{_KIND} == 'LeaderWorkerSetPair'"),
         "message": "strategy blue-green rolls a LeaderWorkerSetPair (a second P/D pair beside it)"},
        {"rule": _when(f"{_HAS_KIND} && {_KIND} == 'DisaggregatedSet' && has(self.stages)",
                       "size(self.stages) == 1"),
         "message": "a DisaggregatedSet target has exactly one stage (groups: 100%)"},
        {"rule": _when(f"{_HAS_KIND} && {_KIND} == 'LeaderWorkerSetPair' && {_STAGES}",
                       "!has(self.stages[0].pause)"),
         "message": "a LeaderWorkerSetPair cannot have a manual gate before its first stage"},
        {"rule": _when(f"({_PROBING}) && {_HAS_KIND}", f"{_KIND} == 'LeaderWorkerSetPair'"),
         "message": "pdProbe is for a LeaderWorkerSetPair target (prefill and decode roles whose revisions "
                    "could mix)"},
        {"rule": _when(_PROBING, f"!({_BLUE_GREEN})"),
         "message": "pdProbe is for strategy partition: blue-green never mixes revisions (green is a new "
                    "pool)"},
    ]


def deadline_rules() -> list[dict[str, str]]:
    """On ``spec.progressDeadline`` (int-or-string): the duration grammar, and more than no time."""
    return [{"rule": f"type(self) == int ? self > 0 : (self.matches({_lit(duration.PATTERN)}) && "
                     f"!self.matches({_lit(duration.ZERO_PATTERN)}))",
             "message": DEADLINE_SAYS}]


def condition_rules(field: str) -> list[dict[str, str]]:
    """On an analysis metric's ``successCondition``/``failureCondition`` (itself CEL): what a rule can
    check of it, its characters and the old Python words; its grammar and types are checked by the
    controller (``condition.parse``)."""
    return [{"rule": f"self.matches({_lit(condition.CONDITION_CHARS)})",
             "message": f"{field} {CONDITION_SAYS}"},
            {"rule": f"!self.matches({_lit(condition.PYTHON_WORDS)})",
             "message": f"{field} is CEL: {condition.MIGRATE_SAYS}"}]


def attach(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` (the generated ``openAPIV3Schema``) with the rules and the bounds they need."""
    spec = schema["properties"]["spec"]
    props = spec["properties"]
    spec["x-kubernetes-validations"] = spec_rules()
    props["stages"]["x-kubernetes-validations"] = stages_rules()
    props["progressDeadline"]["x-kubernetes-validations"] = deadline_rules()
    metric = props["analysis"]["properties"]["metrics"]["items"]["properties"]
    for field in ("successCondition", "failureCondition"):
        metric[field]["x-kubernetes-validations"] = condition_rules(field)
    return schema
