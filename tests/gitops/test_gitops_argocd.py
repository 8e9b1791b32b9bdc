"""Argo CD: the Applications, and the Lua health checks run in a real Lua runtime (lupa) sandboxed
like Argo CD's VM (base, table and a safe ``os`` only; no string or math library)."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import lupa
import pytest

from lwsflow.components.argocd import (
    HEALTH_KEY,
    PARTITION_POINTER,
    argocd_files,
    health_configmap,
    health_script,
)
from lwsflow.components.kustomize import kustomize_build
from lwsflow.controller.yamlio import parse_yaml_documents
from lwsflow.pipelines.cli import main

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


AVAILABLE = ("Available", "True")
PROGRESSING = ("Progressing", "True")
UPDATING = ("UpdateInProgress", "True")
RUNNING = {"rollout.lwsflow.io/phase": "Running", "rollout.lwsflow.io/deadline-seconds": "1800"}

LWS_CASES = [
    pytest.param(lws(4, None), "Progressing", "report status", id="no-status-yet"),
    pytest.param(
        lws(4, counts(4, 4, 4, AVAILABLE), generation=3)
        | {"status": {"observedGeneration": 2, **counts(4, 4, 4, AVAILABLE)}},
        "Progressing",
        "observe generation 3",
        id="stale-generation",
    ),
    pytest.param(lws(4, counts(4, 4, 4, AVAILABLE)), "Healthy", "all 4 groups", id="at-rest"),
    # issue 4: frozen at rest (partition = replicas, every group current) is healthy...
    pytest.param(
        frozen(lws(4, counts(4, 4, 4, AVAILABLE), annotations={"rollout.lwsflow.io/phase": "Succeeded"})),
        "Healthy", "all 4 groups", id="frozen-at-rest",
    ),
    # ...a synced template waiting frozen for the controller is not (no group updated yet, §c: the
    # LWS still reports Available because no group in [P, R) exists to update)
    pytest.param(
        frozen(lws(4, counts(4, 4, 0, AVAILABLE))), "Progressing",
        "status.updatedReplicas 0 != spec.replicas 4", id="synced-template-frozen",
    ),
    # §d worked trace, R=4 U=1 S=1 P=2: the stage is done (Available) but the surge group remains
    pytest.param(
        lws(4, counts(5, 5, 3, AVAILABLE)),
        "Progressing",
        "status.replicas 5 != spec.replicas 4; status.readyReplicas 5 != spec.replicas 4; "
        "status.updatedReplicas 3 != spec.replicas 4",
        id="surge-mid-stage-5-5-3",
    ),
    pytest.param(
        lws(4, counts(5, 4, 1, PROGRESSING, UPDATING)),
        "Progressing",
        "status.updatedReplicas 1",
        id="surge-created-tick0",
    ),
    # §c: R=4 S=2, groups 2-5 updated: updated == spec.replicas while groups 0-1 are still old
    pytest.param(
        lws(4, counts(6, 6, 4, PROGRESSING)),
        "Progressing",
        "status.replicas 6 != spec.replicas 4",
        id="surge-updated-equals-spec",
    ),
    pytest.param(
        lws(3, counts(3, 1, 3, PROGRESSING)),
        "Progressing",
        "status.readyReplicas 1 != spec.replicas 3",
        id="groups-starting",
    ),
    pytest.param(
        lws(4, counts(4, 3, 2, UPDATING, PROGRESSING)),
        "Progressing",
        "status.updatedReplicas 2",
        id="rolling-one-at-a-time",
    ),
    pytest.param(lws(0, {"replicas": 0}), "Healthy", "all 0 groups", id="scaled-to-zero"),
    pytest.param(lws(None, counts(1, 1, 1, AVAILABLE)), "Healthy", "all 1 groups", id="default-replicas"),
    pytest.param(
        lws(4, counts(4, 3, 4, ("Failed", "True"))), "Degraded", "Failed (R): m", id="failed-condition"
    ),
    pytest.param(
        lws(4, counts(4, 4, 2, ("Progressing", "False")) | {"observedGeneration": 2} | {}),
        "Progressing",
        "status.updatedReplicas 2",
        id="progressing-false-no-deadline",
    ),
    pytest.param(
        lws(
            4,
            counts(4, 4, 4, AVAILABLE),
            annotations={
                "rollout.lwsflow.io/phase": "RolledBack",
                "rollout.lwsflow.io/reason": "gate timed out",
            },
        ),
        "Degraded",
        "RolledBack: gate timed out",
        id="rolled-back",
    ),
    pytest.param(
        lws(
            4,
            counts(4, 3, 2, UPDATING),
            annotations={**RUNNING, "rollout.lwsflow.io/stage-started-epoch": str(NOW - 2000)},
        ),
        "Degraded",
        "no progress for 2000s (deadline 1800s)",
        id="deadline-passed",
    ),
    pytest.param(
        lws(
            4,
            counts(4, 3, 2, UPDATING),
            annotations={**RUNNING, "rollout.lwsflow.io/stage-started-epoch": str(NOW - 60)},
        ),
        "Progressing",
        "status.updatedReplicas 2",
        id="deadline-not-yet",
    ),
    pytest.param(
        lws(
            4,
            counts(4, 4, 4, AVAILABLE),
            annotations={**RUNNING, "rollout.lwsflow.io/stage-started-epoch": str(NOW - 9000)},
        ),
        "Healthy",
        "all 4",
        id="deadline-irrelevant-when-done",
    ),
]


@pytest.mark.parametrize(("obj", "status", "message"), LWS_CASES)
def test_lws_health(obj: dict[str, Any], status: str, message: str, runtime: str) -> None:
    got_status, got_message = run_health("LeaderWorkerSet", obj, runtime)
    assert (got_status, message in got_message) == (status, True), got_message


def ds(
    roles: dict[str, int],
    role_status: list[dict[str, Any]] | None,
    slices: int | None = None,
    generation: int = 1,
    conditions: list[dict[str, str]] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"roles": [{"name": n, "spec": {"replicas": r}} for n, r in roles.items()]}
    if slices is not None:
        spec["slices"] = slices
    obj: dict[str, Any] = {
        "apiVersion": "disaggregatedset.x-k8s.io/v1",
        "kind": "DisaggregatedSet",
        "metadata": {"name": "pd", "generation": generation},
        "spec": spec,
    }
    if role_status is not None:
        obj["status"] = {"observedGeneration": 1, "roleStatuses": role_status, "conditions": conditions or []}
    return obj


def role(name: str, r: int, ready: int, updated: int) -> dict[str, Any]:
    return {"name": name, "replicas": r, "readyReplicas": ready, "updatedReplicas": updated}


DS_CASES = [
    pytest.param(ds({"prefill": 2, "decode": 2}, None), "Progressing", "LWS v0.10.0", id="v0.10-no-status"),
    pytest.param(
        ds({"prefill": 2, "decode": 2}, [role("prefill", 2, 2, 2), role("decode", 2, 2, 2)]),
        "Healthy",
        "all roles",
        id="at-rest",
    ),
    # §f medium_6_2_surge1 mid-rollout (old 4,2 | new 3,1): counts span both revisions
    pytest.param(
        ds({"prefill": 6, "decode": 2}, [role("prefill", 7, 7, 3), role("decode", 3, 3, 1)]),
        "Progressing",
        "role prefill: replicas 7 != desired 6",
        id="mid-rollout",
    ),
    pytest.param(
        ds({"prefill": 2, "decode": 2}, [role("prefill", 4, 4, 4), role("decode", 4, 4, 4)], slices=2),
        "Healthy",
        "all roles",
        id="two-slices",
    ),
    pytest.param(
        ds({"prefill": 2, "decode": 2}, [role("prefill", 2, 2, 2), role("decode", 2, 2, 2)], generation=2),
        "Progressing",
        "observe generation 2",
        id="stale-generation",
    ),
    pytest.param(
        ds({"prefill": 2, "decode": 2}, [role("prefill", 2, 2, 2)]),
        "Progressing",
        "role decode: no status",
        id="role-missing",
    ),
    pytest.param(
        ds(
            {"prefill": 1, "decode": 1},
            [role("prefill", 1, 0, 1), role("decode", 1, 1, 1)],
            conditions=[{"type": "Failed", "status": "True", "reason": "X", "message": "boom"}],
        ),
        "Degraded",
        "boom",
        id="failed-condition",
    ),
]


@pytest.mark.parametrize(("obj", "status", "message"), DS_CASES)
def test_ds_health(obj: dict[str, Any], status: str, message: str, runtime: str) -> None:
    got_status, got_message = run_health("DisaggregatedSet", obj, runtime)
    assert (got_status, message in got_message) == (status, True), got_message


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
