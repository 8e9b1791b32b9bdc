"""Helpers for the GitOps tests: a small catalog, a stand-in renderer of the same contract as
``lwsflow.components.manifests.render_model`` (so tree logic is tested apart from the real renderer's
output, which the example-catalog tests cover), and git helpers."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from lwsflow.components.catalog import Catalog, parse_catalog
from lwsflow.controller.api import labels as L

DIGEST_A = "sha256:" + "a" * 64
DIGEST_B = "sha256:" + "b" * 64
DIGEST_C = "sha256:" + "c" * 64

CATALOG: dict[str, Any] = {
    "namespace": "llm",
    "nodePools": [
        {"name": "h100x8", "gpu": "nvidia-h100-80gb", "gpuMemoryGiB": 80, "gpusPerNode": 8, "nodes": 16}
    ],
    "models": [
        {
            "name": "small",
            "model": "org/small",
            "parametersB": 8,
            "architecture": {"layers": 32, "attentionHeads": 32, "kvHeads": 8, "headDim": 128},
            "image": f"vllm/vllm-openai:v0.11.0@{DIGEST_A}",
            "nodePool": "h100x8",
            "replicas": 2,
            "rollout": {"stages": [1, "50%", "100%"], "maxUnavailable": 1, "maxSurge": 0},
        },
        {
            "name": "pd",
            "model": "org/pd",
            "parametersB": 70,
            "architecture": {"layers": 80, "attentionHeads": 64, "kvHeads": 8, "headDim": 128},
            "image": f"lmsysorg/sglang:v0.5.0@{DIGEST_A}",
            "engine": "sglang",
            "nodePool": "h100x8",
            "prefill": {"replicas": 1},
            "decode": {"replicas": 2},
        },
    ],
    "environments": [
        "dev",  # the catalog namespace, llm
        {"name": "staging", "namespace": "llm-staging"},
        {
            "name": "prod",
            "namespace": "llm-prod",
            "overrides": {
                "small": {
                    "replicas": 4,
                    "rollout": {"stages": [1, "100%"], "maxUnavailable": 0, "maxSurge": 1},
                },
                "pd": {"decode": {"replicas": 3}},
            },
        },
    ],
}


def _template(image: str, role: str) -> dict[str, Any]:
    return {
        "metadata": {"labels": {L.MODEL: "m", L.ROLE: role}},
        "spec": {
            "containers": [
                {
                    "name": "engine",
                    "image": image,
                    "args": ["--port", "8000"],
                    "env": [{"name": "A", "value": "1"}],
                }
            ]
        },
    }


def _rollout(spec: Any) -> dict[str, Any]:
    return {"maxUnavailable": spec.rollout.maxUnavailable, "maxSurge": spec.rollout.maxSurge}


def _stages(spec: Any) -> dict[str, str]:
    return {
        L.ROLLOUT_STAGES: ",".join(str(s) for s in spec.rollout.stages),
        L.ROLLOUT_DEADLINE: spec.rollout.deadline,
    }


def stand_in_render(catalog: Catalog, model: str, env: str | None = None) -> list[dict[str, Any]]:
    """Aggregated -> LWS + Service; disaggregated -> DS: the renderer's contract, minimal content."""
    spec = catalog.for_environment(model, env) if env else catalog.model(model)
    meta = {
        "name": model,
        "namespace": catalog.namespace,
        "labels": {L.MODEL: model},
        "annotations": _stages(spec),
    }
    if not spec.disaggregated:
        lws = {
            "apiVersion": L.LWS_API_VERSION,
            "kind": L.LWS_KIND,
            "metadata": meta,
            "spec": {
                "replicas": spec.replicas,
                "startupPolicy": "LeaderCreated",
                "leaderWorkerTemplate": {
                    "size": 2,
                    "restartPolicy": "RecreateGroupOnPodRestart",
                    "leaderTemplate": _template(spec.image, "aggregated"),
                    "workerTemplate": _template(spec.image, "aggregated"),
                },
                "rolloutStrategy": {
                    "type": "RollingUpdate",
                    "rollingUpdateConfiguration": {**_rollout(spec), "partition": 0},
                },
            },
        }
        svc = {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": model, "namespace": catalog.namespace, "labels": {L.MODEL: model}},
            "spec": {"selector": {L.NAME: model, L.WORKER_INDEX: "0"}, "ports": [{"port": 8000}]},
        }
        return [lws, svc]
    roles = []
    for role, rs in (("prefill", spec.prefill), ("decode", spec.decode)):
        assert rs is not None
        roles.append(
            {
                "name": role,
                "spec": {
                    "replicas": rs.replicas,
                    "leaderWorkerTemplate": {"size": 1, "workerTemplate": _template(spec.image, role)},
                    "rolloutStrategy": {
                        "type": "RollingUpdate",
                        "rollingUpdateConfiguration": {"maxUnavailable": 0, "maxSurge": 1},
                    },
                },
            }
        )
    return [{"apiVersion": L.DS_API_VERSION, "kind": L.DS_KIND, "metadata": meta, "spec": {"roles": roles}}]


def catalog_with(**changes: Any) -> Catalog:
    """The fixture catalog with top-level keys replaced (deep copies through YAML-like dicts)."""
    import copy

    data = copy.deepcopy(CATALOG)
    data.update(changes)
    return parse_catalog(data)


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True, timeout=30
    ).stdout.strip()


def identity(repo: Path) -> None:
    git(repo, "config", "user.name", "Test")
    git(repo, "config", "user.email", "test@example.invalid")
    git(repo, "config", "commit.gpgsign", "false")


def clone(remote: Path, dest: Path) -> Path:
    subprocess.run(["git", "clone", "-q", str(remote), str(dest)], check=True, timeout=30)
    identity(dest)
    return dest
