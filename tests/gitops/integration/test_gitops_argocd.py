"""Argo CD: the Applications, and the Lua health checks run in a real Lua runtime (lupa) sandboxed
like Argo CD's VM (base, table and a safe ``os`` only; no string or math library)."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import lupa
import pytest
import yaml

from lwsflow.cli import main
from lwsflow.components.argocd import (
    HEALTH_KEY,
    PARTITION_POINTER,
    argocd_files,
    health_configmap,
    health_script,
)
from lwsflow.components.kustomize import kustomize_build
from lwsflow.controller.yamlio import parse_yaml_documents

NOW = 1_800_000_000
_SANDBOX = """
local script, obj, now = ...
debug.setmetatable("", nil)  -- Argo CD's VM never opens the string library: no ("x"):sub either
local env = {obj = obj, ipairs = ipairs, pairs = pairs, next = next, tonumber = tonumber,
             tostring = tostring, type = type, error = error, pcall = pcall, select = select,
             table = table, os = {time = function() return now end}}
local chunk
if setfenv then  -- Lua 5.1, the dialect of Argo CD's gopher-lua
  chunk = assert(loadstring(script, "health"))
  setfenv(chunk, env)
else
  chunk = assert(load(script, "health", "t", env))
end
local ok, hs = pcall(chunk)
debug.setmetatable("", {__index = string})
if not ok then error(hs) end
return hs.status, hs.message
"""
# Lua 5.1 is what Argo CD runs (gopher-lua); the current Lua catches anything 5.1-only.
RUNTIMES = {"lua51": importlib.import_module("lupa.lua51"), "lua-current": lupa}


def run_health(kind: str, obj: dict[str, Any], runtime: str = "lua51") -> tuple[str, str]:
    lua = RUNTIMES[runtime].LuaRuntime()
    status, message = lua.execute(_SANDBOX, health_script(kind), lua.table_from(obj, recursive=True), NOW)
    return str(status), str(message)


@pytest.fixture(params=sorted(RUNTIMES))
def runtime(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def lws(
    replicas: int | None,
    status: dict[str, Any] | None,
    generation: int = 2,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": "m", "generation": generation, "annotations": annotations or {}},
        "spec": {"leaderWorkerTemplate": {"size": 2}},
    }
    if replicas is not None:
        obj["spec"]["replicas"] = replicas
    if status is not None:
        obj["status"] = {"observedGeneration": generation, **status}
    return obj


def frozen(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` with the partition the renderer and the rollout controller leave at rest (= replicas)."""
    obj["spec"]["rolloutStrategy"] = {"type": "RollingUpdate", "rollingUpdateConfiguration": {
        "partition": obj["spec"].get("replicas", 1), "maxSurge": 0, "maxUnavailable": 1}}
    return obj


def counts(r: int, ready: int, updated: int, *conds: tuple[str, str]) -> dict[str, Any]:
    return {
        "replicas": r,
        "readyReplicas": ready,
        "updatedReplicas": updated,
        "conditions": [{"type": t, "status": s, "reason": "R", "message": "m"} for t, s in conds],
    }


UPDATING = ("UpdateInProgress", "True")
# One table of status documents for the Lua health checks and controller/api/status.py (which
# tests/api/unit/test_api_status_table.py runs on the same rows): they agree on every row.
STATUS_DOCUMENTS = yaml.safe_load((Path(__file__).parents[2] / "data" / "status_documents.yaml").read_text())


@pytest.mark.parametrize("row", STATUS_DOCUMENTS, ids=[r["id"] for r in STATUS_DOCUMENTS])
def test_health_table(row: dict[str, Any], runtime: str) -> None:
    got_status, got_message = run_health(row["kind"], row["object"], runtime)
    assert (got_status, row["message"] in got_message) == (row["lua"], True), got_message


def test_table_covers_every_health_state() -> None:
    """Both kinds reach Healthy, Progressing and Degraded in the table (no verdict goes untested)."""
    for kind in ("LeaderWorkerSet", "DisaggregatedSet"):
        verdicts = {r["lua"] for r in STATUS_DOCUMENTS if r["kind"] == kind}
        assert verdicts == {"Healthy", "Progressing", "Degraded"}


def test_applications_ignore_the_partition_and_build(tree: Path, tmp_path: Path) -> None:
    files = argocd_files(tree, repo_url="https://git.example/llm.git")
    assert sorted(files) == [
        "application-dev.yaml",
        "application-prod.yaml",
        "application-staging.yaml",
        "argocd-cm-health.yaml",
        "kustomization.yaml",
    ]
    app = parse_yaml_documents(files["application-prod.yaml"])[0]
    assert app["spec"]["source"]["path"] == "overlays/prod"
    assert app["spec"]["destination"]["namespace"] == "llm-prod"
    assert app["spec"]["ignoreDifferences"] == [
        {"group": "leaderworkerset.x-k8s.io", "kind": "LeaderWorkerSet", "jsonPointers": [PARTITION_POINTER]}
    ]
    assert "RespectIgnoreDifferences=true" in app["spec"]["syncPolicy"]["syncOptions"]
    cm = parse_yaml_documents(files["argocd-cm-health.yaml"])[0]
    assert cm == health_configmap()
    assert set(cm["data"]) == {
        HEALTH_KEY.format(group="leaderworkerset.x-k8s.io", kind="LeaderWorkerSet"),
        HEALTH_KEY.format(group="disaggregatedset.x-k8s.io", kind="DisaggregatedSet"),
        HEALTH_KEY.format(group="lwsflow.io", kind="RolloutPolicy"),
    }
    out = tmp_path / "argocd"
    assert main(["argocd", str(tree), "--out", str(out), "--repo-url", "https://git.example/llm.git"]) == 0
    assert (
        main(["argocd", str(tree), "--out", str(out), "--repo-url", "https://git.example/llm.git", "--check"])
        == 0
    )
    assert [o["metadata"]["name"] for o in kustomize_build(out)] == [
        "lwsflow-dev",
        "lwsflow-prod",
        "lwsflow-staging",
    ]
    assert (
        main(["argocd", str(tree), "--out", str(out), "--repo-url", "https://other.example/x.git", "--check"])
        == 1
    )


def test_committed_argocd_folder_is_current() -> None:
    """overlays/argocd/ is what `lwsflow argocd` writes for the committed tree (its repo URL kept)."""
    from lwsflow.controller.api.paths import repo_root

    root = repo_root() / "overlays"
    url = parse_yaml_documents((root / "argocd" / "application-dev.yaml").read_bytes())[0]["spec"]["source"]
    assert (
        main(["argocd", str(root), "--out", str(root / "argocd"), "--repo-url", url["repoURL"], "--check"])
        == 0
    )


@pytest.mark.parametrize(
    "body",
    [
        'return {status = string.upper("x")}',
        'return {status = ("x"):upper()}',
        "return {status = math.floor(1.5)}",
    ],
)
def test_sandbox_is_as_strict_as_argocd(body: str, runtime: str) -> None:
    """The health scripts pass in a VM without string/math libraries, as Argo CD's default VM is."""
    lua = RUNTIMES[runtime].LuaRuntime()
    with pytest.raises(RUNTIMES[runtime].LuaError, match=r"nil value|index a string"):
        lua.execute(_SANDBOX, body, lua.table_from({}), NOW)


def test_health_reads_the_annotations_the_rollout_controller_writes(runtime: str) -> None:
    """The Lua deadline check and the controller agree on names and formats (state.py writes them)."""
    from lwsflow.controller.rollout import state

    rec = state.RolloutState(id="r1", phase=state.RUNNING, deadline_s=1800.0,
                             stage_started=state.iso(NOW - 2000))
    ann = {k: v for k, v in rec.annotations(("id", "phase", "deadline_s", "stage_started")).items() if v}
    assert ann[state.STAGE_STARTED_EPOCH] == str(NOW - 2000)
    status, message = run_health("LeaderWorkerSet", lws(4, counts(4, 3, 2, UPDATING), annotations=ann),
                                 runtime)
    assert (status, "no progress for 2000s" in message) == ("Degraded", True)
