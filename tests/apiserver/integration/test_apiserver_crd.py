"""The embedded cluster's CustomResourceDefinition API: a CRD applied with kubectl is validated as
apiextensions v1 validates it, Established at once, and its kind is then served (discovery, CRUD,
watch, OpenAPI) with the CRD's structural schema: defaults, pruning or refusal of unknown fields,
validation. The wording of the refusals is compared with kube-apiserver's in
tests/conformance/test_crd_api.py; `lwsflow sim serve` and the docs' RolloutPolicy are below."""

from __future__ import annotations

import copy
import json
import secrets
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from lwsflow.controller.yamlio import dump_yaml
from lwsflow.sim import kinds
from lwsflow.sim.apiserver import ApiServer
from lwsflow.sim.apiserver.crds import served_type
from tests.apiserver.apiserver_helpers import http

REPO = Path(__file__).resolve().parents[3]
Kubectl = Callable[..., subprocess.CompletedProcess[str]]


def widget_crd(group: str) -> dict[str, Any]:
    """A small namespaced CRD: a typed spec with a default, a bound, an int-or-string, a status."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"widgets.{group}"},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"kind": "Widget", "plural": "widgets", "shortNames": ["wdg"]},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {
                                "spec": {
                                    "type": "object",
                                    "required": ["size"],
                                    "properties": {
                                        "size": {"type": "integer", "minimum": 0, "exclusiveMinimum": True},
                                        "color": {
                                            "type": "string",
                                            "default": "blue",
                                            "enum": ["blue", "red"],
                                        },
                                        "port": {
                                            "x-kubernetes-int-or-string": True,
                                            "anyOf": [{"type": "integer"}, {"type": "string"}],
                                        },
                                        "extra": {
                                            "type": "object",
                                            "x-kubernetes-preserve-unknown-fields": True,
                                        },
                                    },
                                },
                                "status": {"type": "object", "properties": {"ready": {"type": "boolean"}}},
                            },
                        }
                    },
                }
            ],
        },
    }


@pytest.fixture
def group() -> Iterator[str]:
    """A group of its own per test: the served kinds are process-wide (docs/embedded-cluster.md)."""
    g = f"t{secrets.token_hex(3)}.example.com"
    yield g
    kinds.unregister(f"widgets.{g}")


def test_applied_crd_is_established_and_its_kind_served(kubectl: Kubectl, group: str) -> None:
    out = kubectl("apply", "-f", "-", stdin=dump_yaml(widget_crd(group)))
    assert f"customresourcedefinition.apiextensions.k8s.io/widgets.{group} created" in out.stdout
    crd = json.loads(kubectl("get", "crd", f"widgets.{group}", "-o", "json").stdout)
    conds = {c["type"]: (c["status"], c["reason"]) for c in crd["status"]["conditions"]}
    assert conds == {
        "NamesAccepted": ("True", "NoConflicts"),
        "Established": ("True", "InitialNamesAccepted"),
    }
    assert crd["status"]["acceptedNames"]["listKind"] == "WidgetList"
    assert crd["spec"]["names"]["singular"] == "widget" and crd["status"]["storedVersions"] == ["v1"]
    # discovery: kubectl resolves the short name; CRUD with defaults and validation
    assert "widgets" in kubectl("api-resources", "--api-group", group).stdout
    w = {
        "apiVersion": f"{group}/v1",
        "kind": "Widget",
        "metadata": {"name": "w1", "namespace": "default"},
        "spec": {"size": 2, "port": "http", "extra": {"anything": [1, 2]}},
    }
    kubectl("apply", "-f", "-", stdin=dump_yaml(w))
    got = json.loads(kubectl("get", "wdg", "w1", "-o", "json").stdout)
    assert got["spec"] == {"size": 2, "color": "blue", "port": "http", "extra": {"anything": [1, 2]}}
    bad = copy.deepcopy(w)
    bad["metadata"]["name"] = "w2"
    bad["spec"]["size"] = 0
    proc = kubectl("apply", "-f", "-", stdin=dump_yaml(bad), check=False)
    assert proc.returncode == 1, proc.stderr
    want = 'Widget "w2" is invalid: spec.size: Invalid value: 0: spec.size in body should be greater than 0'
    assert want in proc.stderr, proc.stderr
    unknown = copy.deepcopy(w)
    unknown["spec"]["surprise"] = 1
    proc = kubectl("apply", "-f", "-", stdin=dump_yaml(unknown), check=False)
    assert 'strict decoding error: unknown field "spec.surprise"' in proc.stderr, proc.stderr
    # a deleted CRD's kind is no longer served
    kubectl("delete", "crd", f"widgets.{group}")
    proc = kubectl("get", "widgets", check=False)  # kubectl's cached discovery still maps it: a 404
    assert proc.returncode == 1 and "the server could not find the requested resource" in proc.stderr, (
        proc.stderr
    )


def test_watch_of_a_served_kind(server: ApiServer, group: str) -> None:
    assert (
        http(server, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", widget_crd(group))[0]
        == 201
    )
    base = f"/apis/{group}/v1/namespaces/default/widgets"
    status, _h, lst = http(server, "GET", base)
    assert status == 200 and lst["kind"] == "WidgetList" and lst["items"] == []
    body = {"apiVersion": f"{group}/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"size": 1}}
    assert http(server, "POST", base, body)[0] == 201
    rtype, _schema = served_type(widget_crd(group))
    w = server.store.watch(rtype.key, None, since=lst["metadata"]["resourceVersion"])
    try:
        ev = w.next(timeout=5)
        assert ev is not None and ev.type == "ADDED" and ev.object["spec"]["color"] == "blue"
    finally:
        w.stop()


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (
            lambda c: c["metadata"].update(name="gadgets.x.example.com"),
            'metadata.name: Invalid value: "gadgets.x.example.com": must be spec.names.plural+"."+spec.group',
        ),
        (
            lambda c: c["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"][
                "properties"
            ]["size"].pop("type"),
            "spec.validation.openAPIV3Schema.properties[spec].properties[size].type: Required value: "
            "must not be empty for specified object fields",
        ),
        (
            lambda c: c["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"][
                "properties"
            ].update(ref={"$ref": "#/definitions/x"}),
            "spec.validation.openAPIV3Schema.properties[spec].properties[ref].$ref: "
            "Forbidden: $ref is not "
            "supported",
        ),
        (
            lambda c: c["spec"]["names"].update(plural="Widgets"),
            'spec.names.plural: Invalid value: "Widgets": a DNS-1035 label must consist of lower case',
        ),
    ],
)
def test_invalid_crds_are_refused_with_the_field(
    kubectl: Kubectl, group: str, mutate: Any, message: str
) -> None:
    crd = widget_crd(group)
    mutate(crd)
    proc = kubectl("apply", "-f", "-", stdin=dump_yaml(crd), check=False)
    assert proc.returncode == 1 and message in proc.stderr, proc.stderr
    assert "is invalid" in proc.stderr


def test_numeric_exclusive_bound_cannot_be_decoded(kubectl: Kubectl, group: str) -> None:
    """What issue 22 found on kube-apiserver: the JSON Schema 2020 bound is a 400, not a 422."""
    crd = widget_crd(group)
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["size"] = {
        "type": "integer",
        "exclusiveMinimum": 0,
    }
    proc = kubectl("apply", "-f", "-", stdin=dump_yaml(crd), check=False)
    assert proc.returncode == 1
    assert "cannot unmarshal number into Go struct field JSONSchemaProps" in proc.stderr, proc.stderr
    assert "exclusiveMinimum of type bool" in proc.stderr


def test_overlay_controller_installs(kubectl: Kubectl) -> None:
    """`kubectl apply -k overlays/controller` on a fresh embedded cluster, as on a real one."""
    out = kubectl("apply", "-k", str(REPO / "overlays" / "controller"), timeout=60).stdout
    for line in (
        "namespace/lwsflow-system created",
        "customresourcedefinition.apiextensions.k8s.io/rolloutpolicies.lwsflow.io created",
        "deployment.apps/lwsflow-controller created",
        "poddisruptionbudget.policy/lwsflow-controller created",
    ):
        assert line in out, out
    crd = json.loads(kubectl("get", "crd", "rolloutpolicies.lwsflow.io", "-o", "json").stdout)
    assert {c["type"] for c in crd["status"]["conditions"]} == {"NamesAccepted", "Established"}


def test_openapi_v2_protobuf_and_json(server: ApiServer, kubectl: Kubectl) -> None:
    """kubectl's fallback document: served in gnostic protobuf (kubectl decodes it when v3 does not
    list a kind's group: it then answers that the kind is not served, not that validation failed)
    and in JSON, with the policy's schema."""
    proc = kubectl("apply", "-f", "-", check=False, stdin=dump_yaml({
        "apiVersion": "argoproj.io/v1alpha1", "kind": "Application", "metadata": {"name": "a"}}))
    assert proc.returncode == 1
    assert 'no matches for kind "Application" in version "argoproj.io/v1alpha1"' in proc.stderr, proc.stderr
    status, _headers, doc = http(server, "GET", "/openapi/v2")
    assert status == 200 and doc["swagger"] == "2.0"
    rp = doc["definitions"]["io.lwsflow.v1alpha1.RolloutPolicy"]
    assert rp["x-kubernetes-group-version-kind"] == [
        {"group": "lwsflow.io", "version": "v1alpha1", "kind": "RolloutPolicy"}
    ]
    assert "anyOf" not in json.dumps(rp)  # what Swagger 2.0 cannot say is dropped
    patch = doc["paths"]["/apis/lwsflow.io/v1alpha1/namespaces/{namespace}/rolloutpolicies/{name}"]["patch"]
    assert "fieldValidation" in {p["name"] for p in patch["parameters"]}


def _docs_policy() -> str:
    """The RolloutPolicy example of docs/controller.md (its first ```yaml block), as written."""
    text = (REPO / "docs" / "controller.md").read_text()
    block = text.split("```yaml\n", 1)[1].split("```", 1)[0]
    assert "kind: RolloutPolicy" in block
    return block


def test_kubectl_apply_f_of_the_docs_policy_to_sim_serve(tmp_path: Path) -> None:
    """`kubectl apply -f policy.yaml` with kubectl's default (client-side) validation, against
    `lwsflow sim serve`: the docs' policy is created; one with an unknown field is refused as
    kube-apiserver refuses it (kubectl finds fieldValidation in the OpenAPI and lets the server check
    strictly; tests/conformance/test_crd_api.py shows the reference cluster's answer is the same)."""
    import signal
    import sys

    kc = tmp_path / "sim.kubeconfig"
    proc = subprocess.Popen(
        [
            str(Path(sys.executable).parent / "lwsflow"),
            "sim",
            "serve",
            "--kubeconfig",
            str(kc),
            "--duration",
            "120",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().startswith("serving https://127.0.0.1:")

        def kubectl(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                [
                    str(Path(sys.executable).parent / "kubectl"),
                    "--kubeconfig",
                    str(kc),
                    "--cache-dir",
                    str(tmp_path / "kcache"),
                    *args,
                ],
                input=stdin,
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            )

        policy = _docs_policy()
        assert kubectl("create", "namespace", "llm-dev").returncode == 0
        out = kubectl("apply", "-f", "-", stdin=policy)
        assert out.returncode == 0 and "rolloutpolicy.lwsflow.io/llama-70b created" in out.stdout, out.stderr
        bad = policy.replace("name: llama-70b, namespace", "name: other, namespace").replace(
            "  onFailure: rollback", "  onFailur: rollback"
        )
        out = kubectl("apply", "-f", "-", stdin=bad)
        assert out.returncode == 1
        assert (
            'RolloutPolicy in version "v1alpha1" cannot be handled as a RolloutPolicy: '
            "strict decoding error: "
            'unknown field "spec.onFailur"'
        ) in out.stderr, out.stderr
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=15)
