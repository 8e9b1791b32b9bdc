"""The controller's own writes to a target outside a rollout: adopting what runs as the stable template
(``last-good-template``), and putting a failed template back for a retry. Each writes one merge patch
(the adoption on the resourceVersion it decided on) and stores the answer in the informer cache, so
the status computed next and the next pass read what was written.
"""

from __future__ import annotations

import logging

from lwsflow.controller.api import labels as L
from lwsflow.controller.api.labels import ROLLOUT_PREFIX
from lwsflow.controller.api.wire import Obj
from lwsflow.controller.incluster.cache import Caches
from lwsflow.controller.incluster.driver import resource_of
from lwsflow.controller.kube.client import Kube
from lwsflow.controller.kube.resources import DS, LWS
from lwsflow.controller.policy import gates
from lwsflow.controller.policy import status as pstatus
from lwsflow.controller.policy.model import RolloutPolicySpec
from lwsflow.controller.rollout import gate, state
from lwsflow.controller.rollout.ds import DsKind

log = logging.getLogger("lwsflow.controller")

LAST_GOOD = ROLLOUT_PREFIX + "last-good-template"


def fully_rolled(kube: Kube, spec: RolloutPolicySpec, obj: Obj) -> bool:
    """Every group of the target on one template, Ready (the gate's full equality)."""
    if spec.targetRef.kind == "DisaggregatedSet":  # a DS without status: judged by its child LWS
        ns = str(obj["metadata"].get("namespace") or "")
        return gate.ds_gate(obj, DsKind(kube, ns).children(obj)).passed
    return gate.lws_fully_rolled(obj).passed


def adopt(kube: Kube, cache: Caches | None, spec: RolloutPolicySpec, obj: Obj) -> None:
    """Record the target's running template as its stable one."""
    meta = obj["metadata"]
    res = resource_of(spec.targetRef.kind) if spec.targetRef.kind != "LeaderWorkerSetPair" else LWS
    out = kube.merge_patch(res, meta["namespace"], meta["name"], {"metadata": {
        "resourceVersion": meta["resourceVersion"],
        "annotations": {LAST_GOOD: state.pack(state.template_of(obj))}}}, field_manager=L.FIELD_MANAGER)
    if cache is not None:  # the status computed next reads the adopted copy
        (cache.ds if res == DS else cache.lws).store(out)
    log.info("%s/%s: adopted the running template as stable", meta["namespace"], meta["name"])


def adopt_first_sight(kube: Kube, cache: Caches | None, spec: RolloutPolicySpec, obj: Obj) -> bool:
    """First sight of a target (no stable template, no rollout) fully rolled: what runs everywhere is
    the stable revision, adopted as such. Whether it was adopted."""
    st = state.RolloutState.from_object(obj)
    if pstatus.stable_hash(st) or st.id or not fully_rolled(kube, spec, obj):
        return False
    adopt(kube, cache, spec, obj)
    return True


def reapply_failed(kube: Kube, cache: Caches | None, obj: Obj, failed: Obj) -> str:
    """A retry asked after the rollback took the failed template off the target: put the template the
    rollback recorded back (frozen at partition = replicas); the next pass rolls it out as the retry.
    A DisaggregatedSet has no partition to hold it: `kubectl lwsflow retry` refuses it. The message to
    record."""
    st = state.RolloutState.from_object(obj)
    meta = obj["metadata"]
    out = kube.merge_patch(LWS, meta["namespace"], meta["name"], gates.reapply_patch(obj, failed),
                           field_manager=L.FIELD_MANAGER)
    if cache is not None:  # the status computed next (and the next pass) read the re-applied copy
        cache.lws.store(out)
    return (f"retry of rollout {st.id}: template {st.target_hash} put back on LeaderWorkerSet/"
            f"{meta['name']} (partition {gate.replicas(obj)}); its rollout starts again")
