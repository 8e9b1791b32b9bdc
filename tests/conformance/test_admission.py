"""Check 5: what the real API server (CRD schema, CEL rules) and the upstream LWS webhooks admit.

The example catalog's rendered overlays pass ``kubectl apply --dry-run=server`` on the reference
cluster, and every held-invalid manifest of the suite (tests/api/unit/test_api_validation.py) is refused
there naming the same field that ``lwsflow validate`` names. Differences live in allowlist.yaml.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from api_examples import DS_SAMPLE, LWS_SAMPLE, example
from clusters import Target, allowed, allowlist, note, now_matches, wait_for

from lwsflow.components.kustomize import kustomize_build
from lwsflow.controller.api.validation import validate_object
from lwsflow.controller.errors import ApiError
from lwsflow.controller.kube.client import Kube
from lwsflow.controller.yamlio import dump_yaml_documents
from tests.api.unit.test_api_validation import DS_CASES, LWS_CASES, _mutate

ENVS = ("dev", "staging", "prod")
CASES = [(f"invalid/{c[0]}", LWS_SAMPLE, c[1], c[2]) for c in LWS_CASES] + [
    (f"invalid/{c[0]}", DS_SAMPLE, c[1], c[2]) for c in DS_CASES]
_PATHS = {"LeaderWorkerSet": "/apis/leaderworkerset.x-k8s.io/v1/namespaces/default/leaderworkersets",
          "DisaggregatedSet": "/apis/disaggregatedset.x-k8s.io/v1/namespaces/default/disaggregatedsets"}


@pytest.fixture(scope="module")
def kube(reference: Target) -> Kube:
    return Kube.connect(str(reference.kubeconfig), attempts=2)


@pytest.mark.parametrize("env", ENVS)
def test_rendered_overlays_pass_server_dry_run(reference: Target, rendered: Path, env: str) -> None:
    docs = kustomize_build(rendered / env)
    kinds = {d["kind"] for d in docs}
    assert {"LeaderWorkerSet", "DisaggregatedSet"} <= kinds
    for ns in sorted({d["metadata"].get("namespace") for d in docs} - {None}):
        # the differential deletes its namespaces without waiting for the namespace controller: a
        # namespace still Terminating refuses new content, even in a dry run
        wait_for(f"namespace {ns} not terminating", lambda ns=ns: reference.kubectl(
            "get", "namespace", ns, "-o", "jsonpath={.status.phase}", check=False).stdout != "Terminating",
            timeout=180, every=1.0)
        if reference.kubectl("get", "namespace", ns, check=False).returncode != 0:
            reference.kubectl("create", "namespace", ns)
    out = reference.kubectl("apply", "--dry-run=server", "-f", "-", stdin=dump_yaml_documents(docs))
    assert out.stdout.count("(server dry run)") == len(docs), out.stdout


def _canon(path: str) -> str:
    """Field paths compared case-insensitively with ``a[key]`` spelled ``a.key``: upstream v0.9.0
    names ``spec.leaderWorkerTemplate.SubGroupPolicy`` by its Go field and annotation keys with a dot."""
    return re.sub(r"(?<=\w)\[([^\]\s]+)\]", r".\1", path).lower()


def _names_field(message: str, path: str) -> bool:
    """Whether an API error message reports ``path`` as the failing field (``path: ...``, or
    ``.path: ...`` as v0.9.0's LWS webhook writes it); a webhook that decodes the object first names a
    wrongly typed field as a Go struct field."""
    want = re.escape(_canon(path))
    text = _canon(message)
    return (re.search(rf"(^|[\s\[,:])\.?{want}: ", text) is not None
            or re.search(rf"go struct field \w+\.{want} of type", text) is not None)


@pytest.mark.parametrize(("case", "base", "mutation", "path"), CASES, ids=[c[0] for c in CASES])
def test_held_invalid_refused_naming_the_same_field(kube: Kube, case: str, base: str,
                                                     mutation: dict[str, Any], path: str) -> None:
    obj = _mutate(example(base), mutation)
    assert path in [e.path for e in validate_object(obj)]  # what `lwsflow validate` names
    try:
        kube.request("POST", _PATHS[obj["kind"]], body=obj, query={"dryRun": "All"})
        message = ""
    except ApiError as exc:
        message = str(exc)
    same = _names_field(message, path)
    if case in allowlist():
        if same:
            now_matches(case)
        allowed(case)
        note("reference-answer", message[:300] or "admitted")  # the evidence, in results.json
    else:
        assert same, f"reference cluster {'admitted it' if not message else 'said: ' + message}"
