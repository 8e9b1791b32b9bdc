"""Wait for the in-cluster controller's verdict on a template (the pipeline step's controller mode).

When a RolloutPolicy owns a target, the pipeline must not drive that target's rollout too (two
drivers would fight over the partition): the step applies the release as a GitOps sync would and
then only watches the policy until the controller reports the template's outcome.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from lwsflow.controller.api.phases import PolicyPhase
from lwsflow.controller.api.wire import Obj
from lwsflow.controller.clock import Clock
from lwsflow.controller.errors import Forbidden, NotFound, OperationFailed
from lwsflow.controller.kube import watch
from lwsflow.controller.kube.client import Kube
from lwsflow.controller.kube.resources import ROLLOUT_POLICY

FINAL_BAD = (PolicyPhase.ROLLED_BACK, PolicyPhase.FAILED, PolicyPhase.ABORTED)
TARGET_KINDS = {"lws": "LeaderWorkerSet", "ds": "DisaggregatedSet", "pair": "LeaderWorkerSetPair"}


def find_policy(kube: Kube, namespace: str, kind: str, name: str) -> Obj | None:
    """The RolloutPolicy whose targetRef is ``kind``/``name`` (``kind``: lws, ds or pair), if any."""
    try:
        items, _ = kube.list(ROLLOUT_POLICY, namespace)
    except (NotFound, Forbidden):  # no RolloutPolicy CRD (no in-cluster controller), or not ours to see
        return None
    for p in items:
        ref = (p.get("spec") or {}).get("targetRef") or {}
        if ref.get("kind") == TARGET_KINDS.get(kind) and ref.get("name") == name:
            return p
    return None


# the rollout waits for a person, not the cluster
HUMAN_PHASES = (PolicyPhase.WAITING_FOR_PROMOTION, PolicyPhase.PAUSED)


def verdict(status: Obj, template_hash: str) -> str | None:
    """"Succeeded", a failed phase, "Refused" (the P/D probe held the template: pd/incluster.py),
    or None (no verdict on ``template_hash`` yet)."""
    probe = status.get("pdProbe") or {}
    if probe.get("verdict") == "Refused" and template_hash in str(probe.get("templateKey") or "").split(","):
        return "Refused"
    if status.get("stableRevision") == template_hash and status.get("phase") in (PolicyPhase.IDLE,
                                                                                PolicyPhase.SUCCEEDED):
        return PolicyPhase.SUCCEEDED.value
    for h in reversed(status.get("history") or []):
        if h.get("templateHash") == template_hash:
            if h.get("outcome") == PolicyPhase.SUCCEEDED and status.get("stableRevision") == template_hash:
                return PolicyPhase.SUCCEEDED.value
            if h.get("outcome") in FINAL_BAD:
                return str(h["outcome"])
            break
    return None


def check_budget_s(policy: Obj) -> float:
    """Wall seconds the policy's stage checks may take together (their ``timeoutSeconds``)."""
    defaults = {"smoke": 300, "http": 10, "command": 300}
    total = 0.0
    for stage in (policy.get("spec") or {}).get("stages") or []:
        for check in stage.get("checks") or []:
            for kind, default in defaults.items():
                if isinstance(check.get(kind), dict):
                    total += float(check[kind].get("timeoutSeconds") or default)
    return total


def await_verdict(kube: Kube, clock: Clock, namespace: str, policy: str, template_hash: str, *,
                  timeout_s: float, on_phase: Callable[[str], None] = lambda _p: None,
                  checks_wall_s: float = 0.0) -> Obj:
    """The policy's status once the controller decided on ``template_hash``; OperationFailed when
    ``timeout_s`` of cluster time passes first (a stopped controller, a rollout stuck past its
    deadlines). Time spent waiting for a person (``WaitingForPromotion``, ``Paused``) does not
    count: a human's pace is not the cluster's (the embedded cluster runs x600); the pipeline task's
    own timeout bounds a gate nobody passes. Stage checks run in wall time (an analysis waits for
    Prometheus's clock), so the wait also lasts at least ``checks_wall_s`` wall seconds
    (``check_budget_s``): on a cluster faster than real time they would exhaust ``timeout_s``."""
    deadline = clock.now() + timeout_s
    wall_floor = time.monotonic() + checks_wall_s
    last = ""
    held_since: float | None = None
    while True:
        for obj in watch.follow(kube, ROLLOUT_POLICY, namespace, policy, wall_budget=2.0):
            status = obj.get("status") or {}
            phase = str(status.get("phase") or "")
            if phase != last:
                on_phase(phase)
                last = phase
            if verdict(status, template_hash) is not None:
                return status
            now = clock.now()
            if phase in HUMAN_PHASES:
                held_since = now if held_since is None else held_since
                continue
            if held_since is not None:
                deadline += now - held_since
                held_since = None
            if now > deadline and time.monotonic() > wall_floor:
                raise OperationFailed(f"rolloutpolicy {namespace}/{policy}: no verdict on template "
                                      f"{template_hash} within {timeout_s:g}s (phase {phase or 'none'})")
        time.sleep(0)  # the follow budget ran out: look again
