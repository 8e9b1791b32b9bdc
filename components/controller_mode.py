"""The rollout step's controller mode: a RolloutPolicy owns the target, so the step only syncs.

It applies the release the way an Argo CD sync does (the template, with the partition frozen at
replicas, under its own field manager) and waits for the in-cluster controller's verdict on that
template (``lwsflow.controller.policy.wait``). It never moves a partition: the controller does.
"""

from __future__ import annotations

import copy
import re
from typing import Any

from lwsflow.controller.api import labels as L
from lwsflow.controller.api.phases import PolicyPhase, Result
from lwsflow.controller.kube.resources import BY_KIND
from lwsflow.controller.rollout import state

FIELD_MANAGER = "lwsflow-pipeline-sync"


def frozen(doc: dict[str, Any]) -> dict[str, Any]:
    """``doc`` with an LWS partition at replicas (what the rendered overlays carry for GitOps)."""
    out = copy.deepcopy(doc)
    if out.get("kind") == L.LWS_KIND:
        spec = out.setdefault("spec", {})
        ruc = spec.setdefault("rolloutStrategy", {}).setdefault("rollingUpdateConfiguration", {})
        ruc["partition"] = int(spec.get("replicas") or 1)
    out.pop("status", None)
    return out


def sync_and_wait(kube: Any, clock: Any, workloads: list[dict[str, Any]], policy: dict[str, Any],
                  deadline_s: float, log: Any) -> dict[str, Any]:
    """Apply ``workloads`` frozen, wait for the verdict; the report (``result`` as the engine's)."""
    from lwsflow.controller.policy import wait

    meta = policy["metadata"]
    live = []
    for d in workloads:
        # the template as the API server stores it (defaults applied): what the controller hashes
        live.append(kube.apply(BY_KIND[d["kind"]], frozen(d), field_manager=FIELD_MANAGER))
    want = state.template_hash(state.template_of(live[0]))
    log(f"rolloutpolicy {meta['namespace']}/{meta['name']} owns the target: waiting for the in-cluster "
        f"controller's verdict on template {want}")
    started = clock.now()
    status = wait.await_verdict(kube, clock, meta["namespace"], meta["name"], want, timeout_s=deadline_s,
                                on_phase=lambda p: log(f"  policy phase {p}"),
                                checks_wall_s=wait.check_budget_s(policy))
    outcome = wait.verdict(status, want)
    results: dict[str, str] = {PolicyPhase.SUCCEEDED: Result.SUCCEEDED.value,
                               PolicyPhase.ROLLED_BACK: Result.ROLLED_BACK.value}
    result = results.get(outcome or "", Result.FAILED.value)
    stages = int(status.get("stages") or 0)
    message = str(status.get("message", ""))
    # the stage the rollout failed at, from the engine's reason ("stage 2 deadline (...) passed: ...")
    failed_at = re.match(r"(?:rolled back: )?stage (\d+) ", message)
    ok = result == Result.SUCCEEDED
    passed = stages if ok else (int(failed_at.group(1)) - 1 if failed_at else 0)
    return {"mode": "controller", "policy": meta["name"], "result": result, "message": message,
            "started": started, "ended": clock.now(), "stagesTotal": stages,
            "stages": [{"index": i + 1, "result": "passed"} for i in range(passed)]
            + ([{"index": passed + 1, "result": "failed"}] if failed_at and not ok else []),
            "rolloutId": status.get("rolloutId", "")}
