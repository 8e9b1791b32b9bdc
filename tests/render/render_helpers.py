"""Catalog builders for the render tests (a module of its own so test files can import it)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from lwsflow.components.catalog import Catalog, parse_catalog

REPO = Path(__file__).resolve().parents[2]
EXAMPLE_CATALOG = REPO / "examples" / "catalog.yaml"

H100 = {"name": "h100x8", "gpu": "nvidia-h100-80gb", "gpuMemoryGiB": 80, "gpusPerNode": 8, "nodes": 16,
        "topologyKey": "cloud.google.com/gce-topology-block"}
LLAMA_405B = {"name": "llama-405b", "model": "meta-llama/Llama-3.1-405B-Instruct", "parametersB": 405,
              "dtype": "bf16",
              "architecture": {"layers": 126, "attentionHeads": 128, "kvHeads": 8, "headDim": 128},
              "maxModelLen": 8192, "engine": "vllm", "image": "vllm/vllm-openai:v0.11.0",
              "nodePool": "h100x8", "replicas": 2}
LLAMA_70B = {"name": "llama-70b", "model": "meta-llama/Llama-3.1-70B-Instruct", "parametersB": 70.6,
             "architecture": {"layers": 80, "attentionHeads": 64, "kvHeads": 8, "headDim": 128},
             "image": "vllm/vllm-openai:v0.11.0", "nodePool": "h100x8", "replicas": 2}
LLAMA_8B = {"name": "llama-8b", "model": "meta-llama/Llama-3.1-8B-Instruct", "parametersB": 8.03,
            "architecture": {"layers": 32, "attentionHeads": 32, "kvHeads": 8, "headDim": 128},
            "image": "vllm/vllm-openai:v0.11.0", "nodePool": "h100x8", "replicas": 3}


def catalog_doc(*models: dict[str, Any], pools: list[dict[str, Any]] | None = None,
                **top: Any) -> dict[str, Any]:
    """A catalog document (deep-copied, so tests may mutate it) with the H100 pool by default."""
    doc: dict[str, Any] = {"namespace": "llm", "nodePools": copy.deepcopy(pools or [H100]),
                           "models": copy.deepcopy(list(models) or [LLAMA_405B])}
    doc.update(copy.deepcopy(top))
    return doc


def build(*models: dict[str, Any], pools: list[dict[str, Any]] | None = None, **top: Any) -> Catalog:
    return parse_catalog(catalog_doc(*models, pools=pools, **top))


def model(base: dict[str, Any], **changes: Any) -> dict[str, Any]:
    """A copy of ``base`` with top-level keys changed."""
    out = copy.deepcopy(base)
    out.update(copy.deepcopy(changes))
    return out


# The catalog of issue 31: a 405B fp8 on 2 nodes x 8 GPUs of h100-pool (H100 80GB), an 8B on one GPU.
H100_POOL = {"name": "h100-pool", "gpu": "nvidia-h100-80gb", "gpuMemoryGiB": 80, "gpusPerNode": 8, "nodes": 8}
BIG_405B = {"name": "big-405b", "model": "meta-llama/Llama-3.1-405B-Instruct-FP8", "parametersB": 405,
            "dtype": "fp8", "checkpointDtype": "fp8",
            "architecture": {"layers": 126, "attentionHeads": 128, "kvHeads": 8, "headDim": 128},
            "image": "vllm/vllm-openai:v0.11.0", "nodePool": "h100-pool", "replicas": 2,
            "tensorParallelSize": 8, "pipelineParallelSize": 2}
SMALL_8B = {"name": "llama-8b", "model": "meta-llama/Llama-3.1-8B-Instruct", "parametersB": 8.03,
            "architecture": {"layers": 32, "attentionHeads": 32, "kvHeads": 8, "headDim": 128},
            "image": "vllm/vllm-openai:v0.11.0", "nodePool": "h100-pool", "replicas": 2,
            "tensorParallelSize": 1}
ENVS = [{"name": "dev", "namespace": "llm-dev"}, {"name": "prod", "namespace": "llm-prod"}]


def user_doc(big: dict[str, Any] | None = None, small: dict[str, Any] | None = None,
             pools: list[dict[str, Any]] | None = None, **top: Any) -> dict[str, Any]:
    """The issue's catalog (``big`` and ``small`` replace its models), dev and prod in their namespaces."""
    return catalog_doc(big or BIG_405B, small or SMALL_8B, pools=pools or [H100_POOL],
                       **{"environments": ENVS, **top})
