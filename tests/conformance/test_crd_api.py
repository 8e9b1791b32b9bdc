"""The CustomResourceDefinition API, compared: each CRD below is applied with ``kubectl apply`` to the
reference cluster (kube-apiserver's apiextensions v1) and to the embedded cluster; both refuse the
same ones, with the same message (the server's text kubectl prints), and both establish the valid
one and serve its kind with its structural schema (defaults, bounds, unknown fields). A RolloutPolicy
with an unknown field is refused the same way on both (kubectl leaves it to the server's strict
field validation), which is what `kubectl apply -f` of a policy does on a real cluster.
"""

from __future__ import annotations

import copy
import json
import secrets
from collections.abc import Callable
from typing import Any

import pytest
import rolloutkit
from clusters import Target, wait_for

from lwsflow.controller.policy import rules
from lwsflow.controller.yamlio import dump_yaml

GROUP = f"c{secrets.token_hex(3)}.example.com"


def crd(plural: str = "widgets") -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{GROUP}"},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {"kind": plural.capitalize()[:-1], "plural": plural},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {
                                "spec": {
                                    "type": "object",
                                    "properties": {
                                        "size": {"type": "integer", "minimum": 0, "exclusiveMinimum": True},
                                        "color": {"type": "string", "default": "blue"},
                                        "port": {
                                            "x-kubernetes-int-or-string": True,
                                            "anyOf": [{"type": "integer"}, {"type": "string"}],
                                        },
                                    },
                                }
                            },
                        }
                    },
                }
            ],
        },
    }


def _spec_prop(c: dict[str, Any], name: str, value: Any) -> None:
    c["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"][name] = value


def _mutate(name: str) -> Callable[[dict[str, Any]], None]:
    def numeric_exclusive(c: dict[str, Any]) -> None:
        _spec_prop(c, "size", {"type": "integer", "exclusiveMinimum": 0})

    def missing_type(c: dict[str, Any]) -> None:
        _spec_prop(c, "size", {"minimum": 1})

    def ref(c: dict[str, Any]) -> None:
        _spec_prop(c, "size", {"type": "integer", "$ref": "#/definitions/size"})

    def nullable_any_of(c: dict[str, Any]) -> None:
        _spec_prop(c, "size", {"anyOf": [{"type": "integer"}, {"type": "null"}]})

    def name_mismatch(c: dict[str, Any]) -> None:
        c["metadata"]["name"] = f"gadgets.{GROUP}"

    def group_without_dot(c: dict[str, Any]) -> None:
        c["spec"]["group"] = "example"
        c["metadata"]["name"] = "widgets.example"

    def bad_plural(c: dict[str, Any]) -> None:
        c["spec"]["names"]["plural"] = "Widgets"
        c["metadata"]["name"] = f"Widgets.{GROUP}"

    def array_without_items(c: dict[str, Any]) -> None:
        _spec_prop(c, "tags", {"type": "array"})

    return dict(
        numeric_exclusive=numeric_exclusive,
        missing_type=missing_type,
        ref=ref,
        nullable_any_of=nullable_any_of,
        name_mismatch=name_mismatch,
        group_without_dot=group_without_dot,
        bad_plural=bad_plural,
        array_without_items=array_without_items,
    )[name]


CASES = (
    "numeric_exclusive",
    "missing_type",
    "ref",
    "nullable_any_of",
    "name_mismatch",
    "group_without_dot",
    "bad_plural",
    "array_without_items",
)


def _refusal(t: Target, doc: dict[str, Any]) -> str:
    proc = t.kubectl("apply", "-f", "-", stdin=dump_yaml(doc), check=False)
    assert proc.returncode == 1, f"[{t.name}] accepted: {proc.stdout}"
    return proc.stderr.strip()


@pytest.mark.parametrize("case", CASES)
def test_invalid_crd_refused_alike(case: str, reference: Target, embedded: Target) -> None:
    doc = crd()
    _mutate(case)(doc)
    real, ours = _refusal(reference, doc), _refusal(embedded, doc)
    assert ours == real


def test_valid_crd_established_and_served_alike(reference: Target, embedded: Target) -> None:
    obj = {
        "apiVersion": f"{GROUP}/v1",
        "kind": "Widget",
        "metadata": {"name": "w"},
        "spec": {"size": 3, "port": "http"},
    }
    got = {}
    for t in (reference, embedded):
        t.kubectl("apply", "-f", "-", stdin=dump_yaml(crd()))
        wait_for(
            f"[{t.name}] established",
            lambda t=t: (
                "True"
                in t.kubectl(
                    "get",
                    "crd",
                    f"widgets.{GROUP}",
                    "-o",
                    "jsonpath={.status.conditions[?(@.type=='Established')].status}",
                ).stdout
            ),
            timeout=60,
        )
        wait_for(
            f"[{t.name}] served",
            lambda t=t: t.kubectl("get", "widgets", "-n", "default", check=False).returncode == 0,
            timeout=60,
        )
        t.kubectl("apply", "-n", "default", "-f", "-", stdin=dump_yaml(obj))
        live = t.kubectl("get", "widgets", "w", "-n", "default", "-o", "json").stdout
        got[t.name] = json.loads(live)["spec"]
        bad = copy.deepcopy(obj)
        bad["metadata"]["name"] = "w0"
        bad["spec"]["size"] = 0
        got[f"{t.name}-bound"] = _refusal(t, {**bad, "metadata": {"name": "w0", "namespace": "default"}})
        unknown = copy.deepcopy(obj)
        unknown["spec"]["surprise"] = 1
        # a create: on a patch of an existing object kube-apiserver words it differently (a gap,
        # docs/embedded-cluster.md)
        unknown["metadata"] = {"name": "w1", "namespace": "default"}
        got[f"{t.name}-unknown"] = _refusal(t, unknown)
        typed = copy.deepcopy(obj)
        typed["spec"]["color"] = 3
        got[f"{t.name}-type"] = _refusal(t, {**typed, "metadata": {"name": "w2", "namespace": "default"}})
    assert got["reference"] == got["embedded"] == {"size": 3, "port": "http", "color": "blue"}
    assert got["reference-type"] == got["embedded-type"]
    assert got["reference-bound"] == got["embedded-bound"]
    assert got["reference-unknown"] == got["embedded-unknown"]


def test_policy_with_unknown_field_refused_alike(reference: Target, embedded: Target,
                                                 policy_crd: None) -> None:
    policy = {
        "apiVersion": "lwsflow.io/v1alpha1",
        "kind": "RolloutPolicy",
        "metadata": {"name": "unknown-field", "namespace": "default"},
        "spec": {
            "targetRef": {"kind": "LeaderWorkerSet", "name": "m"},
            "stages": [{"groups": "100%"}],
            "onFailur": "rollback",
        },
    }
    out = {t.name: _refusal(t, policy) for t in (reference, embedded)}
    assert out["reference"] == out["embedded"]
    assert 'strict decoding error: unknown field "spec.onFailur"' in out["reference"]


def _policy(name: str, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"targetRef": {"kind": "LeaderWorkerSet", "name": "m"},
                            "stages": [{"groups": 1, "bake": "90"}, {"groups": "100%", "bake": 30}], **spec}
    return {"apiVersion": "lwsflow.io/v1alpha1", "kind": "RolloutPolicy",
            "metadata": {"name": name, "namespace": "default"}, "spec": body}


_METRIC = {"name": "errors", "provider": {"prometheus": {"query": "up"}}}
# issue 31's invalid policies (and a duration), each refused at `kubectl apply` by the CRD's CEL rules
# (controller/policy/rules.py) with the user's words: what kube-apiserver prints, the embedded cluster too
INVALID_POLICIES: list[tuple[str, dict[str, Any], str]] = [
    ("groups-150", {"stages": [{"groups": 1}, {"groups": "150%"}, {"groups": "100%"}]},
     f'spec.stages: Invalid value: stage 2: {rules.GROUPS_SAYS}'),
    ("last-not-100", {"stages": [{"groups": 1}, {"groups": "50%"}]},
     'spec: Invalid value: the last stage must be groups: 100%'),
    ("groups-0", {"stages": [{"groups": 0}, {"groups": "100%"}]},
     f'spec.stages: Invalid value: stage 1: {rules.GROUPS_SAYS}'),
    ("condition-chars", {"analysis": {"metrics": [{**_METRIC, "successCondition": "result < 1 %"}]}},
     f'spec.analysis.metrics[0].successCondition: Invalid value: "result < 1 %": successCondition '
     f"{rules.CONDITION_SAYS}"),
    ("bake-words", {"stages": [{"groups": 1}, {"groups": "100%", "bake": "5 minutes"}]},
     f'spec.stages: Invalid value: stage 2: {rules.BAKE_SAYS}'),
]


@pytest.fixture
def policy_crd(reference: Target, embedded: Target) -> None:
    for t in (reference, embedded):
        t.kubectl("apply", "-k", str(rolloutkit.REPO / "overlays" / "controller"), timeout=120)
        wait_for(
            f"[{t.name}] RolloutPolicy served",
            lambda t=t: t.kubectl("get", "rolloutpolicies", "-n", "default", check=False).returncode == 0,
            timeout=60,
        )


@pytest.mark.parametrize(("name", "spec", "says"), INVALID_POLICIES, ids=[c[0] for c in INVALID_POLICIES])
def test_invalid_policy_refused_by_the_crd_rules_alike(policy_crd: None, reference: Target, embedded: Target,
                                                       name: str, spec: dict[str, Any], says: str) -> None:
    """kube-apiserver compiles the CRD's rules (within its CEL cost budget: the CRD was established) and
    refuses each policy with the message the embedded cluster prints: stages counted from 1."""
    out = {t.name: _refusal(t, _policy(name, **spec)) for t in (reference, embedded)}
    assert says in out["reference"], out["reference"]
    assert out["reference"] == out["embedded"]


def test_valid_policy_with_plain_seconds_and_a_tolerance_in_percent_admitted_alike(
        policy_crd: None, reference: Target, embedded: Target) -> None:
    """One duration grammar: plain seconds ("90", 30) are admitted as the CLI and the catalog take them;
    a compare tolerance may be written "0.5%" (issue 23), as analysis specs take it."""
    compare = {"mode": "absolute", "tolerance": "0.5%"}
    good = _policy("plain-seconds", progressDeadline=600, analysis={"metrics": [
        {**_METRIC, "successCondition": "result < 0.01", "compare": compare}]})
    for t in (reference, embedded):
        t.kubectl("apply", "--dry-run=server", "-f", "-", stdin=dump_yaml(good))
