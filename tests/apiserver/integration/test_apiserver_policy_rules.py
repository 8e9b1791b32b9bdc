"""`kubectl apply` of an invalid RolloutPolicy to the embedded cluster is refused by the CRD's CEL rules
(controller/policy/rules.py), in the user's words: stages counted from 1, no pattern quoted; nothing is
stored. The same cases against kube-apiserver are in tests/conformance/test_crd_api.py."""

from __future__ import annotations

import copy
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from lwsflow.controller.yamlio import dump_yaml
from lwsflow.sim.kinds import ROLLOUT_POLICY
from lwsflow.sim.store import Store

REPO = Path(__file__).resolve().parents[3]
Kubectl = Callable[..., subprocess.CompletedProcess[str]]

GOOD: dict[str, Any] = {
    "apiVersion": "lwsflow.io/v1alpha1", "kind": "RolloutPolicy",
    "metadata": {"name": "good", "namespace": "default"},
    "spec": {"targetRef": {"kind": "LeaderWorkerSet", "name": "m"},
             "stages": [{"groups": 1, "bake": "90"}, {"groups": "25%", "bake": 30}, {"groups": "100%"}],
             "progressDeadline": "30m",
             "analysis": {"metrics": [{"name": "errors", "provider": {"prometheus": {"query": "up"}},
                                       "successCondition": "result < 0.01",
                                       "compare": {"tolerance": "0.5%", "mode": "absolute"}}]}},
}

# (name, spec changes, what kubectl must print): the issue's four cases first
CASES: list[tuple[str, dict[str, Any], str]] = [
    ("groups-150", {"stages": [{"groups": 1}, {"groups": "150%"}, {"groups": "100%"}]},
     'spec.stages: Invalid value: stage 2: groups must be a number of groups (1 or more) or a '
     "percent from 1% to 100%, like 25%"),
    ("last-not-100", {"stages": [{"groups": 1}, {"groups": "50%"}]},
     'spec: Invalid value: the last stage must be groups: 100% (a rollout ends with every group '
     "on the new template)"),
    ("groups-0", {"stages": [{"groups": 0}, {"groups": "100%"}]},
     'spec.stages: Invalid value: stage 1: groups must be a number of groups (1 or more)'),
    ("condition", {"analysis": {"metrics": [{"name": "errors", "provider": {"prometheus": {"query": "up"}},
                                             "successCondition": "result < 1 %"}]}},
     'spec.analysis.metrics[0].successCondition: Invalid value: "result < 1 %": successCondition may hold '
     "only numbers, result, baseline"),
    ("condition-python", {"analysis": {"metrics": [{"name": "errors",
                                                    "provider": {"prometheus": {"query": "up"}},
                                                    "failureCondition": "result > 1 and result < 2"}]}},
     'spec.analysis.metrics[0].failureCondition: Invalid value: "result > 1 and result < 2": '
     "failureCondition is CEL: write && for and, || for or, ! for not"),
    ("bake", {"stages": [{"groups": 1}, {"groups": "100%", "bake": "5 minutes"}]},
     'spec.stages: Invalid value: stage 2: bake must be a duration like 90s, 5m, 1h30m or 500ms, '
     "or plain seconds like 90"),
    ("deadline-0", {"progressDeadline": "0s"},
     'spec.progressDeadline: Invalid value: "0s": progressDeadline must be a duration'),
    ("weight", {"stages": [{"groups": 1}, {"weight": 50}, {"groups": "100%"}]},
     'spec: Invalid value: stage 2: set groups, not weight (weight is for strategy blue-green)'),
    ("ds-stages", {"targetRef": {"kind": "DisaggregatedSet", "name": "d"}},
     "a DisaggregatedSet target has exactly one stage"),
    ("blue-green-weights", {"strategy": "blue-green", "analysis": None,
                            "targetRef": {"kind": "LeaderWorkerSetPair", "name": "p"},
                            "stages": [{"weight": 50}, {"weight": 10}, {"weight": 100}]},
     "blue-green weights must rise from stage to stage and end at 100"),
]


@pytest.fixture
def installed(kubectl: Kubectl) -> Kubectl:
    kubectl("apply", "-k", str(REPO / "overlays" / "controller"), timeout=60)
    return kubectl


def _policy(name: str, changes: dict[str, Any]) -> dict[str, Any]:
    doc = copy.deepcopy(GOOD)
    doc["metadata"]["name"] = name
    for key, value in changes.items():
        if value is None:
            doc["spec"].pop(key, None)
        else:
            doc["spec"][key] = value
    return doc


@pytest.mark.parametrize(("name", "changes", "says"), CASES, ids=[c[0] for c in CASES])
def test_invalid_policy_refused_at_apply_in_the_users_words(installed: Kubectl, name: str,
                                                            changes: dict[str, Any], says: str) -> None:
    proc = installed("apply", "-f", "-", stdin=dump_yaml(_policy(name, changes)), check=False)
    assert proc.returncode == 1, proc.stdout
    assert f'The RolloutPolicy "{name}" is invalid: ' in proc.stderr, proc.stderr
    assert says in proc.stderr, proc.stderr
    assert "should match" not in proc.stderr and "spec.stages[" not in proc.stderr, proc.stderr
    assert installed("get", "rp", name, "-n", "default", check=False).returncode == 1  # nothing stored


def test_valid_policy_admitted(installed: Kubectl) -> None:
    """The documented forms: plain seconds, a whole number of seconds, a tolerance as text ("0.5%")."""
    out = installed("apply", "-f", "-", stdin=dump_yaml(GOOD)).stdout
    assert "rolloutpolicy.lwsflow.io/good created" in out


def test_status_of_a_policy_stored_before_the_rules_can_be_written(installed: Kubectl, store: Store) -> None:
    """A policy stored before its CRD had these rules keeps working: the controller's status write (the
    spec unchanged) passes, as kube-apiserver's validation ratcheting (v1.30+) lets it; a change of the
    spec is checked."""
    store.create(ROLLOUT_POLICY.key, _policy("legacy", {"stages": [{"groups": 1}]}))  # no 100% stage
    installed("patch", "rp", "legacy", "-n", "default", "--subresource=status", "--type=merge",
              "-p", '{"status": {"phase": "Failed"}}')
    phase = installed("get", "rp", "legacy", "-n", "default", "-o", "jsonpath={.status.phase}").stdout
    assert phase == "Failed"
    proc = installed("patch", "rp", "legacy", "-n", "default", "--type=merge",
                     "-p", '{"spec": {"onFailure": "hold"}}', check=False)
    assert proc.returncode == 1 and "the last stage must be groups: 100%" in proc.stderr, proc.stderr


def test_docs_policy_is_admitted(installed: Kubectl) -> None:
    text = (REPO / "docs" / "controller.md").read_text()
    block = text.split("```yaml\n", 1)[1].split("```", 1)[0]
    installed("create", "namespace", "llm-dev", check=False)
    proc = installed("apply", "-f", "-", stdin=block, check=False)
    assert proc.returncode == 0, proc.stderr
