"""Kubernetes Events on the rollout target (``kubectl describe lws NAME`` shows them).

Events are best effort: failing to record one is logged and never fails the rollout.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime

from lwsflow.controller.api.labels import ROLLOUT_PREFIX
from lwsflow.controller.api.wire import Obj
from lwsflow.controller.errors import ApiError
from lwsflow.controller.kube.client import Kube
from lwsflow.controller.kube.resources import EVENT

log = logging.getLogger("lwsflow.events")
COMPONENT = "lwsflow-rollout"
# The rollout an Event belongs to, copied from the target's rollout state (the same key): ``lwsflow
# report`` assigns Events by it, not by their order or wording.
ROLLOUT_ID = ROLLOUT_PREFIX + "id"


def _ts(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class EventRecorder:
    """Creates core/v1 Events whose ``involvedObject`` is the rollout target."""

    def __init__(self, kube: Kube, now: Callable[[], float]) -> None:
        self.kube = kube
        self.now = now
        self.recorded: list[Obj] = []  # what was emitted, for the report

    def emit(self, obj: Obj, reason: str, message: str, *, warning: bool = False) -> None:
        meta = obj.get("metadata") or {}
        ts = _ts(self.now())
        head: Obj = {"generateName": f"{meta.get('name')}.", "namespace": meta.get("namespace")}
        if rollout := str((meta.get("annotations") or {}).get(ROLLOUT_ID) or ""):
            head["annotations"] = {ROLLOUT_ID: rollout}
        ev = {
            "apiVersion": "v1", "kind": "Event",
            "metadata": head,
            "involvedObject": {"apiVersion": obj.get("apiVersion"), "kind": obj.get("kind"),
                               "name": meta.get("name"), "namespace": meta.get("namespace"),
                               "uid": meta.get("uid"), "resourceVersion": meta.get("resourceVersion")},
            "reason": reason, "message": message[:1000], "type": "Warning" if warning else "Normal",
            "source": {"component": COMPONENT}, "reportingComponent": COMPONENT,
            "reportingInstance": COMPONENT, "firstTimestamp": ts, "lastTimestamp": ts, "count": 1,
        }
        self.recorded.append({"reason": reason, "message": message, "type": ev["type"], "time": ts})
        log.log(logging.WARNING if warning else logging.INFO, "%s: %s", reason, message,
                extra={"event": reason, "object": f"{obj.get('kind')}/{meta.get('namespace')}/"
                       f"{meta.get('name')}", "cluster_time": ts})
        try:
            self.kube.create(EVENT, meta.get("namespace") or "default", ev)
        except ApiError as exc:
            log.warning("could not record event %s: %s", reason, exc)
