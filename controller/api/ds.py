"""Typed ``disaggregatedset.x-k8s.io/v1`` DisaggregatedSet (api/disaggregatedset/v1/*_types.go).

Each role embeds a full LeaderWorkerSetSpec; the DS controller creates one child LWS per role, slice
and revision (``<ds>-<slice>-<rev8>-<role>``). See lws-semantics.md section f.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from lwsflow.controller.api import intstr
from lwsflow.controller.api.common import (
    ApiModel,
    Condition,
    IntOrString,
    ObjectMeta,
    TemplateMeta,
)
from lwsflow.controller.api.labels import DS_API_VERSION, DS_KIND
from lwsflow.controller.api.lws import LeaderWorkerSetSpec

ScalingMode = Literal["Static", "External"]
PlacementType = Literal["None", "ExclusiveSlice", "ExclusiveTopology"]


class RoleScaling(ApiModel):
    """Who owns a role's replica count."""

    mode: ScalingMode | None = Field(
        None, description="Static (spec.replicas, default) or External (DisaggregatedSetRoleScaler).")


class Role(ApiModel):
    """One role (e.g. prefill, decode): an embedded LeaderWorkerSet spec plus role metadata."""

    name: str = Field(description="Role name: DNS label, 1..63 characters, unique in the DS.")
    scaling: RoleScaling | None = Field(None, description="Scaling mode of this role.")
    metadata: TemplateMeta | None = Field(None, description="Labels/annotations of the child LWS.")
    spec: LeaderWorkerSetSpec = Field(description="The child LeaderWorkerSet spec.")

    @property
    def external(self) -> bool:
        return bool(self.scaling and self.scaling.mode == "External")

    def planner_budget(self, target: int | None = None) -> tuple[int, int]:
        """(maxSurge, maxUnavailable) as the DS planner reads them (executor.go L268-L300).

        No rollingUpdateConfiguration -> (1, 0). Otherwise values resolve against the role's
        target (surge up, unavailable down); if unavailable > 0 both are used, else if surge > 0
        (surge, 0), else the (1, 0) default again.
        """
        replicas = self.spec.resolved_replicas() if target is None else target
        rs = self.spec.rollout_strategy
        ruc = rs.rolling_update_configuration if rs else None
        if ruc is None:
            return 1, 0
        # CRD defaults fill missing sub-fields when the configuration is present (surge 0, unavail 1)
        surge_v: IntOrString = 0 if ruc.max_surge is None else ruc.max_surge
        unav_v: IntOrString = 1 if ruc.max_unavailable is None else ruc.max_unavailable
        surge = intstr.scaled_value(surge_v, replicas, round_up=True)
        unavailable = intstr.scaled_value(unav_v, replicas, round_up=False)
        if unavailable > 0:
            return surge, unavailable
        if surge > 0:
            return surge, 0
        return 1, 0


class PlacementPolicy(ApiModel):
    """Co-locate each slice's roles in one topology domain and spread slices across domains."""

    type: PlacementType | None = Field(
        None, description="None (default), ExclusiveSlice or ExclusiveTopology.")
    topology: str | None = Field(None, description="Node label key of the topology domain (required "
                                                   "when type is not None).")


class DisaggregatedSetSpec(ApiModel):
    """``spec`` of a DisaggregatedSet."""

    roles: list[Role] = Field(description="2..10 roles, keyed by name.")
    slices: int | None = Field(None, description="Independent copies of the whole role topology; "
                                                 "default 1, 1..100.")
    placement_policy: PlacementPolicy | None = Field(None, description="Slice placement.")

    def role(self, name: str) -> Role | None:
        return next((r for r in self.roles if r.name == name), None)

    def resolved_slices(self) -> int:
        return 1 if self.slices is None else self.slices


class RoleStatus(ApiModel):
    """Per-role counts summed over the role's child LWS (main after v0.10.0 only)."""

    name: str = Field(description="Role name.")
    replicas: int | None = Field(None, description="Σ child LWS status.replicas, all slices and revisions.")
    ready_replicas: int | None = Field(None, description="Σ child LWS status.readyReplicas, same scope.")
    updated_replicas: int | None = Field(None, description="Σ status.updatedReplicas at the target revision.")


class DisaggregatedSetStatus(ApiModel):
    """``status`` of a DisaggregatedSet."""

    observed_generation: int | None = Field(None, description="metadata.generation last reconciled.")
    role_statuses: list[RoleStatus] | None = Field(None, description="One entry per spec role, spec order.")
    conditions: list[Condition] | None = Field(None, description="Exactly one of Available/Progressing True.")


class DisaggregatedSet(ApiModel):
    """A ``disaggregatedset.x-k8s.io/v1`` DisaggregatedSet."""

    api_version: Literal["disaggregatedset.x-k8s.io/v1"] = Field(DS_API_VERSION, description="API version.")
    kind: Literal["DisaggregatedSet"] = Field(DS_KIND, description="Kind.")
    metadata: ObjectMeta = Field(default_factory=ObjectMeta, description="Object metadata.")
    spec: DisaggregatedSetSpec = Field(description="Desired state.")
    status: DisaggregatedSetStatus | None = Field(None, description="Observed state.")


class RoleScalerSpec(ApiModel):
    """``spec`` of a DisaggregatedSetRoleScaler: the desired replicas of one External role."""

    replicas: int | None = Field(None, description="Desired replicas of the role (HPA writes it via /scale).")


class RoleScalerStatus(ApiModel):
    """``status`` of a DisaggregatedSetRoleScaler."""

    replicas: int | None = Field(None, description="Σ child LWS status.replicas over all revisions.")
    selector: str | None = Field(None, description="Leader-pod label selector of the role (scale).")
    observed_generation: int | None = Field(None, description="metadata.generation last reconciled.")
    conditions: list[Condition] | None = Field(None, description="Conditions.")


class DisaggregatedSetRoleScaler(ApiModel):
    """``DisaggregatedSetRoleScaler <ds>-<role>``: the /scale target of an External role."""

    api_version: Literal["disaggregatedset.x-k8s.io/v1"] = Field(DS_API_VERSION, description="API version.")
    kind: Literal["DisaggregatedSetRoleScaler"] = Field("DisaggregatedSetRoleScaler", description="Kind.")
    metadata: ObjectMeta = Field(default_factory=ObjectMeta, description="Object metadata.")
    spec: RoleScalerSpec = Field(description="Desired state.")
    status: RoleScalerStatus | None = Field(None, description="Observed state.")
