"""The compiled pipelines: kfp IR loads back and matches the committed copy; Argo YAML is schema-valid."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import jsonschema
import pytest
import yaml
from google.protobuf import json_format
from kfp import components as kfp_components
from kfp.pipeline_spec import pipeline_spec_pb2

from lwsflow.controller.api.paths import argo_schema
from lwsflow.pipelines.compile import DIST, argo_manifest, compile_all

STEPS = ["build-image", "render", "build-overlays", "promote-source", "rollout", "smoke-test",
         "promote-target"]
SECRETISH = ("password", "secret", "token", "credential", "apikey", "api_key")


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("dist")
    kfp_path, argo_path = compile_all(out)
    return {"kfp": kfp_path, "argo": argo_path}


def _argo_validator(kind: str) -> jsonschema.protocols.Validator:
    schema = json.loads(argo_schema().read_text())  # Argo Workflows v3.7.4 (scripts/upstream/go.mod)
    wrapped = {"$ref": f"#/definitions/io.argoproj.workflow.v1alpha1.{kind}",
               "definitions": schema["definitions"]}
    return jsonschema.Draft202012Validator(wrapped)


@pytest.mark.parametrize("kind", ["kfp", "argo"])
def test_committed_copy_matches_the_source(compiled: dict[str, Path], kind: str) -> None:
    committed = DIST / compiled[kind].name
    assert committed.is_file(), f"{committed} missing: run `lwsflow pipeline compile --out pipelines/dist`"
    assert compiled[kind].read_text() == committed.read_text(), (
        f"{committed} is stale: run `lwsflow pipeline compile --out pipelines/dist`")


def test_kfp_yaml_loads_back_and_parses_as_the_ir_proto(compiled: dict[str, Path]) -> None:
    loaded = kfp_components.load_component_from_file(str(compiled["kfp"]))
    assert loaded.name == "deploy-model"
    assert {"model", "repo_url", "image", "catalog", "image_context", "source_env", "target_env", "stages",
            } <= set(loaded.component_spec.inputs)
    docs = list(yaml.safe_load_all(compiled["kfp"].read_text()))
    spec = pipeline_spec_pb2.PipelineSpec()
    json_format.ParseDict(docs[0], spec)  # raises on any field the IR does not have
    # empty stages by default: the rollout step then uses the catalog's stages for the environment
    assert docs[0]["root"]["inputDefinitions"]["parameters"]["stages"]["defaultValue"] == ""
    dag = spec.root.dag.tasks
    assert dag["render"].dependent_tasks == ["build-image"]
    assert sorted(dag["rollout"].dependent_tasks) == ["promote", "render"]  # env comes from render
    # no environment name is built in: render resolves them in the catalog's order (issue 13.2)
    params = docs[0]["root"]["inputDefinitions"]["parameters"]
    assert params["source_env"]["defaultValue"] == params["target_env"]["defaultValue"] == ""
    assert "staging" not in compiled["kfp"].read_text() and "staging" not in compiled["argo"].read_text()
    # The conditional promotion sits in a condition branch gated on the smoke test.
    cond = next(t for name, t in dag.items() if name.startswith("condition"))
    assert "smoke-test" in cond.trigger_policy.condition


def test_kfp_platform_spec_carries_secrets_and_the_gpu_pool(compiled: dict[str, Path]) -> None:
    docs = list(yaml.safe_load_all(compiled["kfp"].read_text()))
    execs = docs[1]["platforms"]["kubernetes"]["deploymentSpec"]["executors"]
    build = execs["exec-build-image"]
    assert {s["secretName"] for s in build["secretAsEnv"]} == {"lwsflow-git", "lwsflow-registry"}
    smoke = execs["exec-smoke-test"]
    # the default placement: the example catalog's H100 pool (nodeSelector and toleration)
    assert smoke["nodeSelector"]["labels"] == {"cloud.google.com/gke-accelerator": "nvidia-h100-80gb"}
    assert smoke["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    assert {s["secretName"] for s in smoke["secretAsEnv"]} == {"lwsflow-api-token"}
    # the other steps need no GPU pool
    others = [e for name, e in execs.items() if name != "exec-smoke-test"]
    assert not any("nodeSelector" in e or "tolerations" in e for e in others)


def test_default_placement_is_the_example_catalogs_h100_pool(example_catalog: Path) -> None:
    from lwsflow.components.catalog import load_catalog
    from lwsflow.components.step_placement import DEFAULT_PLACEMENT

    pool = next(p for p in load_catalog(example_catalog).nodePools if p.name == "h100x8")
    assert DEFAULT_PLACEMENT.node_selector == pool.nodeSelector
    assert [(t.key, t.operator, t.value or "", t.effect) for t in DEFAULT_PLACEMENT.tolerations] == [
        (t.key, t.operator, t.value or "", t.effect) for t in pool.tolerations]


def _placed(kfp_path: Path, argo: dict) -> tuple[dict, dict]:
    execs = list(yaml.safe_load_all(kfp_path.read_text()))[1]["platforms"]["kubernetes"]["deploymentSpec"]
    smoke_tpl = next(t for t in argo["spec"]["templates"] if t["name"] == "smoke-test")
    return execs["executors"]["exec-smoke-test"], smoke_tpl


def test_compile_places_the_smoke_test_where_the_flags_say(tmp_path: Path) -> None:
    from lwsflow.cli import main

    assert main(["pipeline", "compile", "--out", str(tmp_path / "own"), "--node-selector", "pool=gpu-a",
                 "--node-selector", "zone=b", "--toleration", "dedicated=llm:NoExecute"]) == 0
    kfp_smoke, argo_smoke = _placed(tmp_path / "own" / "deploy-model.kfp.yaml",
                                    yaml.safe_load((tmp_path / "own" / "deploy-model.argo.yaml").read_text()))
    assert kfp_smoke["nodeSelector"]["labels"] == argo_smoke["nodeSelector"] == {"pool": "gpu-a", "zone": "b"}
    tol = {"key": "dedicated", "operator": "Equal", "value": "llm", "effect": "NoExecute"}
    assert kfp_smoke["tolerations"] == argo_smoke["tolerations"] == [tol]  # flags replace the default

    assert main(["pipeline", "compile", "--out", str(tmp_path / "any"), "--any-node"]) == 0
    kfp_smoke, argo_smoke = _placed(tmp_path / "any" / "deploy-model.kfp.yaml",
                                    yaml.safe_load((tmp_path / "any" / "deploy-model.argo.yaml").read_text()))
    assert not {"nodeSelector", "tolerations"} & (set(kfp_smoke) | set(argo_smoke))
    doc = yaml.safe_load((tmp_path / "any" / "deploy-model.argo.yaml").read_text())
    assert list(_argo_validator("WorkflowTemplate").iter_errors(doc)) == []


@pytest.mark.parametrize(("args", "message"), [
    (["--node-selector", "pool"], "--node-selector: 'pool': expected KEY=VALUE"),
    (["--node-selector", "a=1", "--node-selector", "a=2"], "--node-selector: 'a=2': 'a' given twice"),
    (["--node-selector", "bad key=x"], "--node-selector: 'bad key=x': 'bad key' is not a valid label key"),
    (["--toleration", "nvidia.com/gpu"], "--toleration: 'nvidia.com/gpu': expected KEY[=VALUE]:EFFECT"),
    (["--toleration", "k=v:Never"], "--toleration: 'k=v:Never': effect must be one of NoSchedule, "
                                    "PreferNoSchedule, NoExecute"),
    (["--any-node", "--toleration", "k:NoSchedule"], "--any-node: --any-node takes no --node-selector or "
                                                      "--toleration"),
])
def test_bad_placement_flags_are_one_line_user_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                      args: list[str], message: str) -> None:
    from lwsflow.cli import main

    assert main(["pipeline", "compile", "--out", str(tmp_path), *args]) == 2
    assert capsys.readouterr().err.strip() == f"error: {message}"
    assert not list(tmp_path.iterdir())  # nothing compiled


def test_no_secret_values_in_parameters(compiled: dict[str, Path]) -> None:
    kfp_doc = next(yaml.safe_load_all(compiled["kfp"].read_text()))
    kfp_params = set(kfp_doc["root"]["inputDefinitions"]["parameters"])
    argo_params = {p["name"] for p in argo_manifest()["spec"]["arguments"]["parameters"]}
    assert kfp_params == argo_params
    for name in kfp_params:
        assert not any(s in name.lower() for s in SECRETISH), name
    # Every credential-looking env var in the Argo templates comes from a secretKeyRef.
    for tpl in argo_manifest()["spec"]["templates"]:
        for env in tpl.get("script", {}).get("env", []):
            assert "value" not in env and env["valueFrom"]["secretKeyRef"]["name"].startswith("lwsflow-")


def test_argo_workflow_template_validates_against_the_schema(compiled: dict[str, Path]) -> None:
    doc = yaml.safe_load(compiled["argo"].read_text())
    errors = list(_argo_validator("WorkflowTemplate").iter_errors(doc))
    assert errors == []
    assert doc["spec"]["onExit"] == "report"
    params = {p["name"]: p.get("value") for p in doc["spec"]["arguments"]["parameters"]}
    assert params["stages"] == ""  # the catalog's stages unless a run sets them
    dag = next(t for t in doc["spec"]["templates"] if t["name"] == "deploy")["dag"]["tasks"]
    assert [t["name"] for t in dag] == STEPS
    retried = {t["name"] for t in doc["spec"]["templates"] if "retryStrategy" in t}
    assert retried == {"build-image", "render", "build-overlays", "smoke-test"}


def test_schema_check_catches_a_wrongly_typed_field(compiled: dict[str, Path]) -> None:
    doc = yaml.safe_load(compiled["argo"].read_text())
    doc["spec"]["templates"][0]["retryStrategy"] = {"limit": {"not": "a number"}}
    assert list(_argo_validator("WorkflowTemplate").iter_errors(doc))


def test_hera_round_trip_is_lossless_and_catches_misspelled_fields(compiled: dict[str, Path]) -> None:
    from hera.workflows.models import WorkflowTemplate

    doc = yaml.safe_load(compiled["argo"].read_text())

    def round_trip(d: dict) -> dict:
        return WorkflowTemplate.model_validate(d).model_dump(by_alias=True, exclude_none=True)

    assert round_trip(doc) == doc
    typo = copy.deepcopy(doc)
    typo["spec"]["templates"][2]["retryStrategey"] = {"limit": 1}  # the schema alone lets this through
    assert list(_argo_validator("WorkflowTemplate").iter_errors(typo)) == []
    assert round_trip(typo) != typo


def test_argo_inline_scripts_are_valid_python_that_call_the_step_functions() -> None:
    """Argo runs each script's source as it is: it must compile (a top-level ``return`` would not)."""
    from lwsflow.components import steps

    templates = argo_manifest()["spec"]["templates"]
    scripts = {t["name"]: t["script"]["source"] for t in templates if "script" in t}
    assert set(scripts) == {"build-image", "render", "build-overlays", "promote", "rollout", "smoke-test",
                            "report"}
    for name, source in scripts.items():
        compile(source, name, "exec")
        if name != "report":
            fn = name.replace("-", "_")
            assert f"steps.{fn}(" in source and hasattr(steps, fn)
            assert "steps.write_outputs(" in source
