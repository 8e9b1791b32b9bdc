"""The one duration grammar (controller/api/duration.py): Go-style or plain seconds, read alike by the
CLI, the catalog and the RolloutPolicy CRD (its CEL rules on the embedded cluster, and the model)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from pydantic import ValidationError

from lwsflow.controller.analysis.spec import validate_spec
from lwsflow.controller.api import cel
from lwsflow.controller.api.crd import crd_info
from lwsflow.controller.api.duration import PATTERN, ZERO_PATTERN, duration_seconds, parse_duration
from lwsflow.controller.api.schema_check import schema_errors_for
from lwsflow.controller.errors import InvalidInput
from lwsflow.controller.policy.model import RolloutPolicySpec
from lwsflow.rehearsal.cli.sim_token import token_seconds


@pytest.mark.parametrize(("text", "seconds"), [
    ("90s", 90), ("5m", 300), ("1h", 3600), ("1h30m", 5400), ("500ms", 0.5), ("250ms", 0.25),
    ("1.5m", 90), ("1.5h", 5400), ("2d", 172800), ("8760h", 8760 * 3600), ("0s", 0), ("1m30s500ms", 90.5),
    ("30m1h", 5400),  # Go sums terms in any order
])
def test_go_style_durations(text: str, seconds: float) -> None:
    assert duration_seconds(text) == seconds
    assert parse_duration(text, "bake") == seconds


@pytest.mark.parametrize(("value", "seconds"), [("12", 12), ("0.5", 0.5), ("90", 90), (30, 30), (2.5, 2.5),
                                                (0, 0)])
def test_plain_seconds_everywhere(value: object, seconds: float) -> None:
    assert duration_seconds(value) == seconds


@pytest.mark.parametrize("bad", ["", "5 minutes", "30 s", "m", "-1s", "+1s", "1e3s", "1.s", ".5s", "5.",
                                 "5m\nx", "5m\n", " 5m ", "5m ", "5mx", "m5", "1w", "1us", "1H", "1h 30m",
                                 "-5", "1e3", True, None, [], float("inf"), float("nan"), -1])
def test_everything_else_is_refused_naming_the_field(bad: object) -> None:
    with pytest.raises(InvalidInput, match="not a duration like 90s, 5m, 1h30m or 500ms") as exc:
        parse_duration(bad, "--bake")
    assert exc.value.field == "--bake"


# what a user types, and whether it is a duration (the one list every reader is held to below)
ACCEPTED = ["90s", "5m", "1h30m", "500ms", "1.5h", "2d", "30m1h", "90", "0.5", "0", "0s"]
REFUSED = ["", "5 minutes", "30 s", "-1s", "1e3s", "1w", "1H", "5m\n", " 5m", "-5", ".5", "1h 30m", "m"]


def test_the_schema_pattern_is_the_same_grammar() -> None:
    """PATTERN (in the CRD's CEL rules) accepts exactly what the parser reads, in Python and in CEL."""
    pattern = re.compile(PATTERN.removesuffix("$") + r"\Z")
    for text in ACCEPTED:
        assert pattern.match(text) and cel.holds(f"self.matches({_cel(PATTERN)})", text) is True, text
        duration_seconds(text)
    for text in REFUSED:
        assert not pattern.match(text), text
        # RE2's $ is the end of the text, as \Z is Python's: "5m\n" is refused there too
        assert cel.holds(f"self.matches({_cel(PATTERN)})", text) is False, text
        with pytest.raises(ValueError):
            duration_seconds(text)
    zero = re.compile(ZERO_PATTERN.removesuffix("$") + r"\Z")
    assert [t for t in ACCEPTED if zero.match(t)] == [t for t in ACCEPTED if duration_seconds(t) == 0]


def _cel(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _cli_refuses(capsys: pytest.CaptureFixture[str], flag: str, value: str) -> bool:
    """`lwsflow rollout run` with ``--flag value``: True when it refuses the value (exit 2, one line
    naming the flag); an accepted value fails later, on the kubeconfig that is not there."""
    from lwsflow.cli import main

    code = main(["rollout", "run", "lws/x", f"--{flag}", value, "--kubeconfig", "/nonexistent/kubeconfig"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    return err[0].startswith(f"error: {flag}: ")


_POOL = {"name": "h100x8", "gpu": "nvidia-h100-80gb", "gpuMemoryGiB": 80, "gpusPerNode": 8, "nodes": 4}
_MODEL = {"name": "llama-8b", "model": "meta-llama/Llama-3.1-8B-Instruct", "parametersB": 8.03,
          "architecture": {"layers": 32, "attentionHeads": 32, "kvHeads": 8, "headDim": 128},
          "image": "vllm/vllm-openai:v0.11.0", "nodePool": "h100x8", "replicas": 2}


def _catalog_refuses(field: str, value: object) -> bool:
    from lwsflow.components.catalog import parse_catalog

    try:
        parse_catalog({"namespace": "llm", "nodePools": [_POOL],
                       "models": [{**_MODEL, "rollout": {field: value}}]})
    except InvalidInput as exc:
        assert exc.field == f"models[llama-8b].rollout.{field}", exc
        return True
    return False


def _crd_refuses(field: str, value: object) -> bool:
    """The embedded cluster's admission of a policy (the CRD's structural schema and CEL rules), held
    to the model the controller validates it with."""
    stages: list[dict[str, Any]] = [{"groups": 1}, {"groups": "100%"}]
    spec: dict[str, Any] = {"targetRef": {"kind": "LeaderWorkerSet", "name": "m"}, "stages": stages}
    if field == "bake":
        stages[0]["bake"] = value
    else:
        spec["progressDeadline"] = value
    policy = {"apiVersion": "lwsflow.io/v1alpha1", "kind": "RolloutPolicy", "metadata": {"name": "p"},
              "spec": spec}
    errors = schema_errors_for(policy, crd_info("rolloutpolicies").schema)
    try:
        RolloutPolicySpec.model_validate(spec)
        model_refuses = False
    except ValidationError:
        model_refuses = True
    assert bool(errors) == model_refuses, (value, errors)
    return model_refuses


@pytest.mark.parametrize("text", ACCEPTED + REFUSED)
def test_cli_catalog_and_crd_read_a_bake_alike(text: str, capsys: pytest.CaptureFixture[str]) -> None:
    refused = text in REFUSED
    assert _cli_refuses(capsys, "bake", text) is refused
    assert _catalog_refuses("bake", text) is refused
    assert _crd_refuses("bake", text) is refused


@pytest.mark.parametrize(("value", "refused"), [("30m", False), ("90", False), (90, False), ("0s", True),
                                                ("0", True), (0, True), ("0.0m", True), ("5 m", True)])
def test_cli_catalog_and_crd_read_a_deadline_alike(value: object, refused: bool,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """A deadline is a duration above 0 in each of them; a YAML whole number is seconds in both files."""
    if isinstance(value, str):
        assert _cli_refuses(capsys, "deadline", value) is refused
    assert _catalog_refuses("deadline", value) is refused
    assert _crd_refuses("progressDeadline", value) is refused


def test_a_whole_number_in_yaml_is_seconds_and_a_fraction_is_text() -> None:
    """bake: 90 reads as 90 s in the catalog and in a policy; 1.5 (a YAML float) is refused by both:
    the CRD's int-or-string field cannot carry it, so the catalog says to write it as text."""
    assert not _catalog_refuses("bake", 90) and not _crd_refuses("bake", 90)
    assert _catalog_refuses("bake", 1.5) and _crd_refuses("bake", 1.5)
    assert not _catalog_refuses("bake", "1.5") and not _crd_refuses("bake", "1.5")


def test_each_user_reads_it() -> None:
    """RolloutPolicy, analysis specs, sim token (whole seconds, >= 10m): one grammar."""
    stage = {"groups": "100%", "bake": "1h30m"}
    spec = RolloutPolicySpec.model_validate({"targetRef": {"kind": "LeaderWorkerSet", "name": "a"},
                                             "stages": [stage], "progressDeadline": "1.5h"})
    assert spec.stages[0].bake == "1h30m"
    spec = RolloutPolicySpec.model_validate({"targetRef": {"kind": "LeaderWorkerSet", "name": "a"},
                                             "stages": [{**stage, "bake": "90"}], "progressDeadline": 600})
    assert (duration_seconds(spec.stages[0].bake), duration_seconds(spec.progressDeadline)) == (90, 600)
    with pytest.raises(ValidationError, match=r"stages\.0\.bake"):
        RolloutPolicySpec.model_validate({"targetRef": {"kind": "LeaderWorkerSet", "name": "a"},
                                          "stages": [{**stage, "bake": "90 s"}]})
    metric = {"name": "m", "provider": {"prometheus": {"query": "up"}}, "successCondition": "result > 0"}
    analysis = validate_spec({"metrics": [{**metric, "interval": "1m30s", "initialDelay": 5}],
                              "window": "2m"})
    assert (analysis.metrics[0].interval, analysis.metrics[0].initial_delay, analysis.window) == (90, 5, 120)
    assert token_seconds("2d") == 172800 and token_seconds("90m") == 5400 and token_seconds("600") == 600
    for bad, message in (("5m", "at least 10m"), ("600.5s", "whole seconds"), ("10 m", "not a duration")):
        with pytest.raises(InvalidInput, match=message):
            token_seconds(bad)
