"""Catalog validation: every user mistake is one InvalidInput whose field path says where."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from lwsflow.components.catalog import load_catalog, parse_catalog
from lwsflow.controller.errors import InvalidInput
from tests.render.render_helpers import LLAMA_405B, catalog_doc

M = "models[llama-405b]"
SECRET_REF = {"name": "hf", "key": "token"}


def _m(**changes: Any) -> Callable[[dict[str, Any]], None]:
    return lambda d: d["models"][0].update(changes)


CASES = [
    ("bad-name", _m(name="Llama_405B"), "models[Llama_405B].name", "DNS-1035"),
    ("gpus-per-node", lambda d: d["nodePools"][0].update(gpusPerNode=0), "nodePools[h100x8].gpusPerNode",
     "greater than or equal to 1"),
    ("kv-heads", lambda d: d["models"][0]["architecture"].update(kvHeads=7), f"{M}.architecture",
     "kvHeads must divide attentionHeads"),
    ("unknown-pool", _m(nodePool="a100"), f"{M}.nodePool", "unknown node pool 'a100' (known: h100x8)"),
    ("replicas-and-roles", _m(prefill={"replicas": 1}, decode={"replicas": 1}), M, "not both"),
    ("only-prefill", _m(replicas=None, prefill={"replicas": 1}), M, "needs both prefill and decode"),
    ("stage", _m(rollout={"stages": ["0%"]}), f"{M}.rollout.stages", "stage '0%'"),
    ("surge", _m(rollout={"maxSurge": "150%"}), f"{M}.rollout.maxSurge", "'150%'"),
    ("bake", _m(rollout={"bake": "5 minutes"}), f"{M}.rollout.bake", "not a duration"),
    ("secret-literal", _m(env=[{"name": "OPENAI_API_KEY", "value": "sk-123"}]), f"{M}.env[OPENAI_API_KEY]",
     "looks like a secret: use secretKeyRef"),
    ("password-literal", _m(env=[{"name": "db_password", "value": "x"}]), f"{M}.env[db_password]",
     "looks like a secret"),
    ("reserved-env", _m(env=[{"name": "LWS_GROUP_SIZE", "value": "2"}]), f"{M}.env[LWS_GROUP_SIZE].name",
     "reserved"),
    ("env-both", _m(env=[{"name": "X", "value": "1", "secretKeyRef": SECRET_REF}]), f"{M}.env[X]",
     "exactly one of value or secretKeyRef"),
    ("hf-token-twice", _m(hfTokenSecret=SECRET_REF, env=[{"name": "HF_TOKEN", "secretKeyRef": SECRET_REF}]),
     M, "'HF_TOKEN' is set more than once"),
    ("typo-key", _m(replica=2), f"{M}.replica", "Extra inputs are not permitted"),
    ("hpa-disaggregated", _m(replicas=None, prefill={"replicas": 1}, decode={"replicas": 1},
                             autoscaling={"minReplicas": 1, "maxReplicas": 2}), M, "aggregated models only"),
    ("hpa-bounds", _m(autoscaling={"minReplicas": 3, "maxReplicas": 2}), f"{M}.autoscaling",
     "maxReplicas must be >= minReplicas"),
    ("hpa-replicas-outside", _m(replicas=1, autoscaling={"minReplicas": 2, "maxReplicas": 4}), M,
     "replicas 1 lies outside autoscaling 2..4"),
    ("override-replicas-on-pd", lambda d: d.update(
        models=[{**d["models"][0], "replicas": None, "prefill": {"replicas": 1}, "decode": {"replicas": 1}}],
        environments=[{"name": "dev", "overrides": {"llama-405b": {"replicas": 1}}}]),
     "environments[dev].overrides.llama-405b.replicas", "takes prefill/decode"),
    ("override-roles-on-aggregated", lambda d: d.update(
        environments=[{"name": "dev", "overrides": {"llama-405b": {"decode": {"replicas": 1}}}}]),
     "environments[dev].overrides.llama-405b", "takes replicas, not prefill/decode"),
    ("duplicate-model", lambda d: d["models"].append(dict(d["models"][0])), "models", "duplicate name"),
    ("override-unknown-model", lambda d: d.update(environments=[{"name": "prod",
                                                                 "overrides": {"nope": {"replicas": 1}}}]),
     "environments[prod].overrides", "unknown model 'nope'"),
    ("dtype", _m(dtype="bf8"), f"{M}.dtype", "'bf16'"),
    ("engine", _m(engine="tgi"), f"{M}.engine", "'vllm' or 'sglang'"),
    ("namespace", lambda d: d.update(namespace="LLM"), "namespace", "DNS-1035"),
    ("no-models", lambda d: d.update(models=[]), "models", "at least 1 item"),
]


@pytest.mark.parametrize(("mutate", "field", "fragment"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_catalog_errors_name_the_field(mutate: Callable[[dict[str, Any]], None], field: str,
                                       fragment: str) -> None:
    doc = catalog_doc(LLAMA_405B)
    mutate(doc)
    with pytest.raises(InvalidInput) as info:
        parse_catalog(doc, source="cat.yaml")
    assert info.value.field == field
    assert fragment in info.value.message
    assert str(info.value).startswith(f"cat.yaml: {field}: ")
    assert "\n" not in str(info.value)


def test_example_catalog_loads(example_catalog: Any) -> None:
    names = [m.name for m in example_catalog.models]
    assert {"llama-8b", "llama-70b", "llama-405b", "llama-70b-pd", "llama-8b-pair"} <= set(names)
    assert any(m.disaggregated and m.pdMode == "disaggregatedset" for m in example_catalog.models)
    assert any(m.disaggregated and m.pdMode == "lws-pair" for m in example_catalog.models)
    assert all("@sha256:" in m.image for m in example_catalog.models)


def test_bad_yaml_file_is_one_line(tmp_path: Any) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("models: [\n")
    with pytest.raises(InvalidInput) as info:
        load_catalog(path)
    assert str(path) in str(info.value) and "invalid YAML" in str(info.value)
