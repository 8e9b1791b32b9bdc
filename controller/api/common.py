"""Building blocks shared by the LeaderWorkerSet and DisaggregatedSet models.

Every model keeps the wire spelling (camelCase aliases) and unknown keys (``extra="allow"``), so a
manifest survives ``model_validate`` -> ``model_dump(by_alias=True, exclude_unset=True)`` unchanged.
Models are strict (no ``"2"`` -> 2 coercion): the API server would reject such input, and silently
converting it would break the lossless round trip.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from lwsflow.controller.api.intstr import IntOrString

__all__ = ["ApiModel", "Condition", "IntOrString", "ObjectMeta", "TemplateMeta", "as_dict", "as_int",
           "field_path"]


class ApiModel(BaseModel):
    """Base of every API model: camelCase on the wire, snake_case in Python, nothing dropped."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
        extra="allow",
        strict=True,
    )

    def to_dict(self) -> dict[str, Any]:
        """The wire form: camelCase keys, only the fields that were set (lossless round trip)."""
        return self.model_dump(by_alias=True, exclude_unset=True, mode="json")


class ObjectMeta(ApiModel):
    """The parts of ``metadata`` lwsflow reads; everything else is kept as extra keys."""

    name: str | None = Field(None, description="Object name (DNS-1035 label for LWS).")
    generate_name: str | None = Field(None, description="Prefix for a server-generated name.")
    namespace: str | None = Field(None, description="Namespace of the object.")
    labels: dict[str, str] | None = Field(None, description="Labels.")
    annotations: dict[str, str] | None = Field(None, description="Annotations.")
    generation: int | None = Field(None, description="Spec generation, bumped by the API server.")
    resource_version: str | None = Field(None, description="Opaque version for optimistic concurrency.")
    uid: str | None = Field(None, description="Server-assigned unique id.")


class TemplateMeta(ApiModel):
    """``metadata`` of an embedded template (what the CRD allows there)."""

    name: str | None = Field(None, description="Name (usually unused in templates).")
    namespace: str | None = Field(None, description="Namespace (usually unused in templates).")
    labels: dict[str, str] | None = Field(None, description="Labels stamped on created objects.")
    annotations: dict[str, str] | None = Field(None, description="Annotations stamped on created objects.")
    finalizers: list[str] | None = Field(None, description="Finalizers stamped on created objects.")


class Condition(ApiModel):
    """A ``metav1.Condition``."""

    type: str = Field(description="Condition type, e.g. Available, Progressing, UpdateInProgress.")
    status: Literal["True", "False", "Unknown"] = Field(description="True, False or Unknown.")
    reason: str | None = Field(None, description="CamelCase machine-readable reason.")
    message: str | None = Field(None, description="Human-readable detail.")
    last_transition_time: str | None = Field(None, description="RFC 3339 time of the last status flip.")
    observed_generation: int | None = Field(
        None, description="metadata.generation the condition was computed for.")


def as_int(v: Any) -> int | None:
    """``v`` when it is an int (a bool is not), else None: for rules that skip wrongly typed values."""
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def as_dict(v: Any) -> dict[str, Any]:
    """``v`` when it is a mapping, else {}: walks malformed manifests without type errors."""
    return v if isinstance(v, dict) else {}


def field_path(parts: Iterable[str | int]) -> str:
    """``("spec", "roles", 0, "name")`` -> ``spec.roles[0].name``."""
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else part
    return out
