"""The RolloutPolicy CRD: generated from the pydantic models, shipped, and served by the embedded cluster."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from pydantic import ValidationError

from lwsflow.controller.api.crd import crd_info
from lwsflow.controller.api.duration import duration_seconds
from lwsflow.controller.kube.resources import ROLLOUT_POLICY
from lwsflow.controller.policy import crd, problems
from lwsflow.controller.policy.model import RolloutPolicySpec
from reliability.rollout_env import NS, Env

KUBECTL = Path(__file__).resolve().parents[3] / ".venv" / "bin" / "kubectl"


def policy(name: str = "p", **spec: object) -> dict:
    body = {"targetRef": {"kind": "LeaderWorkerSet", "name": "m"},
            "stages": [{"groups": 1, "bake": "1m"}, {"groups": "100%", "pause": {}}], **spec}
    return {"apiVersion": "lwsflow.io/v1alpha1", "kind": "RolloutPolicy",
            "metadata": {"name": name, "namespace": NS}, "spec": body}


def test_shipped_crd_equals_a_fresh_generation() -> None:
    """overlays/controller/crd.yaml and the packaged copy are generated from controller/policy/model.py
    (`python -m lwsflow.controller.policy.crd` rewrites them)."""
    for path, data in crd.rendered().items():
        assert path.read_bytes() == data, f"{path} is stale: run python -m lwsflow.controller.policy.crd"


def test_schema_is_structural() -> None:
    """Every node has a type (or is int-or-string), no $ref, no nullable anyOf: what a structural
    schema needs (apiextensions "Specifying a structural schema")."""
    def walk(node: dict, path: str) -> None:
        assert "$ref" not in node and "title" not in node, path
        if node.get("x-kubernetes-int-or-string"):
            assert node["anyOf"] == [{"type": "integer"}, {"type": "string"}], path
            return
        if node.get("x-kubernetes-preserve-unknown-fields") and set(node) <= {
                "x-kubernetes-preserve-unknown-fields", "description"}:
            return  # a number or a text like "0.5%" (compare.tolerance): free-form, the model checks it
        assert "anyOf" not in node and "type" in node, path
        assert "default" not in node, path  # the model's defaults only (crd._without_defaults)
        # OpenAPI 3.0 bounds: apiextensions v1 decodes exclusiveMinimum/Maximum as Go bools (a number
        # fails with "cannot unmarshal number ... of type bool"), next to a minimum/maximum
        for bound, flag in (("minimum", "exclusiveMinimum"), ("maximum", "exclusiveMaximum")):
            if flag in node:
                assert node[flag] is True and isinstance(node.get(bound), (int, float)), f"{path}.{flag}"
        for k, v in (node.get("properties") or {}).items():
            walk(v, f"{path}.{k}")
        if "items" in node:
            walk(node["items"], f"{path}[]")
    walk(crd.openapi_schema(), "")
    info = crd_info("rolloutpolicies")
    names = [c["name"] for c in info.printer_columns]
    assert names == ["Target", "Phase", "Stage", "Stable", "Canary", "Age"]
    assert info.subresources == {"status": {}}


@pytest.mark.parametrize(("spec", "field"), [
    ({"stages": [{"groups": 0}, {"groups": "100%"}]}, "groups"),
    ({"stages": [{"groups": "150%"}]}, "groups"),
    ({"stages": [{"groups": 1}]}, "last stage"),
    ({"stages": [{"groups": "100%", "bake": "5 minutes"}]}, "bake"),
    ({"progressDeadline": "0s"}, "progressDeadline"),
    ({"onFailure": "ignore"}, "onFailure"),
    ({"stages": [{"groups": "100%", "checks": [{"http": {"url": "http://x"},
                                                "command": {"command": ["t"]}}]}]}, "exactly one"),
    ({"targetRef": {"kind": "DisaggregatedSet", "name": "d"}}, "exactly one stage"),
    ({"targetRef": {"kind": "LeaderWorkerSetPair", "name": "d"},
      "stages": [{"groups": 1, "pause": {}}, {"groups": "100%"}]}, "first stage"),
    ({"surprise": 1}, "surprise"),
])
def test_invalid_specs_name_the_field(spec: dict, field: str) -> None:
    with pytest.raises(ValidationError) as exc:
        RolloutPolicySpec.model_validate(policy(**spec)["spec"])
    assert field in str(exc.value)


_METRIC = {"name": "errors", "provider": {"prometheus": {"query": "up"}}}


@pytest.mark.parametrize(("spec", "says"), [
    ({"stages": [{"groups": 1}, {"groups": "150%"}, {"groups": "100%"}]},
     "stage 2: groups must be a number of groups (1 or more) or a percent from 1% to 100%, like 25% "
     "(got '150%')"),
    ({"stages": [{"groups": 0}, {"groups": "100%"}]}, "stage 1: groups must be a number of groups"),
    ({"stages": [{"groups": 1}, {"groups": "100%", "bake": "5 m"}]},
     "stage 2: bake: '5 m' is not a duration like 90s, 5m, 1h30m or 500ms, or plain seconds like 90"),
    ({"stages": [{"groups": 1, "checks": [{"smoke": {}}, {}]}, {"groups": "100%"}]},
     "stage 1, check 2: a check sets exactly one of smoke, http, command"),
    ({"analysis": {"metrics": [{**_METRIC, "successCondition": "result >"}]}},
     "analysis metric errors: successCondition: 'result >': syntax error at the end: invalid syntax"),
    ({"analysis": {"metrics": [{**_METRIC, "failureCondition": "result > > 1"}]}},
     "analysis metric errors: failureCondition: 'result > > 1': syntax error at column 10: invalid syntax"),
    ({"analysis": {"metrics": [{**_METRIC, "failureCondition": "0 < result < 1"}]}},
     "analysis metric errors: failureCondition: '0 < result < 1': comparisons do not chain in CEL: write "
     "0 < result && result < 1"),
    ({"analysis": {"metrics": [{**_METRIC, "successCondition": "result"}]}},
     "analysis metric errors: successCondition: 'result' is a number, not a condition"),
    ({"onFailure": "ignore"}, "onFailure: Input should be 'rollback' or 'hold' (got 'ignore')"),
    ({"progressDeadline": "0s"}, "progressDeadline: must be above 0 (got '0s')"),
    ({"targetRef": {"kind": "DisaggregatedSet", "name": "d"}},
     "a DisaggregatedSet target has exactly one stage (groups: 100%)"),
])
def test_reconcile_time_problems_in_the_users_words(spec: dict, says: str) -> None:
    """What the controller writes to status.message for a policy the model refuses: stages and checks
    counted from 1, a metric by its name, no "Value error," (controller/policy/problems.py)."""
    body = policy(**spec)["spec"]
    with pytest.raises(ValidationError) as exc:
        RolloutPolicySpec.model_validate(body)
    text = problems.describe(exc.value, body)
    assert text.startswith(says), text
    assert "Value error" not in text and "stages.1" not in text


def test_durations() -> None:
    # the one grammar (tests/api/unit/test_duration.py): Go-style, or plain seconds
    assert duration_seconds("1h30m") == 5400 and duration_seconds("90s") == 90
    assert duration_seconds("1d") == 86400 and duration_seconds("5") == 5
    for bad in ("", "5 m", "1w", "m"):
        with pytest.raises(ValueError):
            duration_seconds(bad)


def test_embedded_cluster_serves_rolloutpolicies(env: Env) -> None:
    """create/get/list, the status subresource (main writes ignore status), and kubectl's columns."""
    created = env.kube.create(ROLLOUT_POLICY, NS, {**policy(), "status": {"phase": "Succeeded"}})
    assert "status" not in created or created["status"].get("phase") != "Succeeded"
    env.kube.merge_patch(ROLLOUT_POLICY, NS, "p", {"status": {"phase": "Progressing", "stageText": "1/2",
                                                             "stableRevision": "aaaa"}},
                         subresource="status")
    got = env.kube.get(ROLLOUT_POLICY, NS, "p")
    assert got["status"]["phase"] == "Progressing"
    out = subprocess.run([str(KUBECTL), "--kubeconfig", str(env.kubeconfig), "get", "rp", "-n", NS],
                         capture_output=True, text=True, timeout=60, check=True).stdout.split("\n")
    assert out[0].split() == ["NAME", "TARGET", "PHASE", "STAGE", "STABLE", "CANARY", "AGE"]
    assert out[1].split()[:5] == ["p", "m", "Progressing", "1/2", "aaaa"]
    doc = json.loads(subprocess.run([str(KUBECTL), "--kubeconfig", str(env.kubeconfig), "get",
                                     "rolloutpolicies.lwsflow.io", "-n", NS, "-o", "json"],
                                    capture_output=True, text=True, timeout=60, check=True).stdout)
    assert doc["items"][0]["spec"]["targetRef"]["name"] == "m"


def test_embedded_cluster_validates_against_the_schema(env: Env) -> None:
    """Like kube-apiserver with a structural schema: a policy that violates it is refused with 422
    naming the field, on create and on a status write."""
    from lwsflow.controller.errors import ApiError

    with pytest.raises(ApiError) as exc:
        env.kube.create(ROLLOUT_POLICY, NS, policy("bad", onFailure="ignore"))
    assert exc.value.status == 422 and "spec.onFailure" in str(exc.value)
    env.kube.create(ROLLOUT_POLICY, NS, policy("ok"))
    with pytest.raises(ApiError) as exc:
        env.kube.merge_patch(ROLLOUT_POLICY, NS, "ok", {"status": {"phase": "Sleeping"}},
                             subresource="status")
    assert exc.value.status == 422 and "status.phase" in str(exc.value)


def test_generation_does_not_depend_on_what_was_imported_before() -> None:
    """hera re-registers ``str`` on PyYAML's global SafeRepresenter when imported; the generated CRD
    must come out the same bytes whether or not hera (the Argo templates) was imported first."""
    import subprocess
    import sys

    code = ("import sys; {pre}from lwsflow.controller.policy import crd; "
            "sys.stdout.buffer.write(b''.join(crd.rendered().values()))")
    plain = subprocess.run([sys.executable, "-c", code.format(pre="")], capture_output=True, check=True)
    after_hera = subprocess.run([sys.executable, "-c", code.format(pre="import hera._yaml; ")],
                                capture_output=True, check=True)
    assert plain.stdout == after_hera.stdout
