"""Typed views of the wire objects where the controller reads them (metadata, status, conditions).

Objects travel as the API server's JSON (``Obj``): the controller patches them and must keep every
key it does not know. Where it *reads* them, these TypedDicts name the fields it relies on, and the
accessors return the part (``{}`` when absent or malformed), so a typo in a field name is a type
error rather than a silent ``None``.
"""

from __future__ import annotations

from typing import Any, TypedDict, cast

Obj = dict[str, Any]
"""A Kubernetes object (or patch) as JSON: what the API server sends and accepts."""


class ConditionView(TypedDict, total=False):
    """A ``metav1.Condition`` as read from ``status.conditions``."""

    type: str
    status: str  # "True" | "False" | "Unknown"
    reason: str
    message: str
    observedGeneration: int
    lastTransitionTime: str


class RoleStatusView(TypedDict, total=False):
    """One ``status.roleStatuses`` entry of a DisaggregatedSet (lws-semantics §f)."""

    name: str
    replicas: int
    readyReplicas: int
    updatedReplicas: int


class StatusView(TypedDict, total=False):
    """``status`` of a LeaderWorkerSet or DisaggregatedSet (lws-semantics §c, §f)."""

    observedGeneration: int
    replicas: int
    readyReplicas: int
    updatedReplicas: int
    conditions: list[ConditionView]
    roleStatuses: list[RoleStatusView]


class MetadataView(TypedDict, total=False):
    """The ``metadata`` fields the controller reads."""

    name: str
    namespace: str
    uid: str
    generation: int
    resourceVersion: str
    deletionTimestamp: str
    labels: dict[str, str]
    annotations: dict[str, str]


def _part(obj: Obj, key: str) -> dict[str, Any]:
    v = obj.get(key)
    return v if isinstance(v, dict) else {}


def metadata(obj: Obj) -> MetadataView:
    """``obj.metadata`` ({} when absent)."""
    return cast(MetadataView, _part(obj, "metadata"))


def status(obj: Obj) -> StatusView:
    """``obj.status`` ({} when absent: the controller has not reported yet)."""
    return cast(StatusView, _part(obj, "status"))


def spec(obj: Obj) -> dict[str, Any]:
    """``obj.spec`` ({} when absent)."""
    return _part(obj, "spec")


def labels_of(obj: Obj) -> dict[str, str]:
    return metadata(obj).get("labels") or {}


def annotations_of(obj: Obj) -> dict[str, str]:
    return metadata(obj).get("annotations") or {}


def conditions(obj: Obj) -> list[ConditionView]:
    """``status.conditions``, keeping only well-formed entries."""
    conds = status(obj).get("conditions")
    return [c for c in conds if isinstance(c, dict)] if isinstance(conds, list) else []
