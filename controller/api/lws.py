"""Typed ``leaderworkerset.x-k8s.io/v1`` LeaderWorkerSet (api/leaderworkerset/v1/leaderworkerset_types.go).

Pod templates stay plain mappings (their schema is the core PodTemplateSpec; the CRD schema checks
them). Fields proposed for LWS v1.0 (``groupIdentity``, ``maxGroupRestarts``, ``restartBackoff``)
are accepted when present and never required; the upstream CRD at the pinned commit lacks them.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from lwsflow.controller.api import intstr
from lwsflow.controller.api.common import ApiModel, Condition, IntOrString, ObjectMeta
from lwsflow.controller.api.labels import LWS_API_VERSION, LWS_KIND

RestartPolicy = Literal["RecreateGroupOnPodRestart", "RecreateGroupAfterStart", "None", "Default"]
StartupPolicy = Literal["LeaderCreated", "LeaderReady"]
SubdomainPolicy = Literal["Shared", "UniquePerReplica"]
SubGroupPolicyType = Literal["LeaderWorker", "LeaderExcluded"]
GroupIdentity = Literal["Ordinal", "Hash"]


class SubGroupPolicy(ApiModel):
    """Split each group into subgroups (e.g. one per TPU slice / node set). Immutable."""

    sub_group_policy_type: SubGroupPolicyType | None = Field(
        None, description="LeaderWorker (leader in subgroup 0) or LeaderExcluded; default LeaderWorker.")
    sub_group_size: int | None = Field(
        None, description="Pods per subgroup: 1..size, and size or size-1 divisible by it.")


class PvcRetentionPolicy(ApiModel):
    """StatefulSet PVC retention policy copied to the leader and worker StatefulSets."""

    when_deleted: str | None = Field(None, description="Retain or Delete when the set is deleted.")
    when_scaled: str | None = Field(None, description="Retain or Delete when the set is scaled down.")


class LeaderWorkerTemplate(ApiModel):
    """One group: a leader pod plus ``size-1`` worker pods. Every field here is part of the revision."""

    leader_template: dict[str, Any] | None = Field(
        None, description="PodTemplateSpec of the leader (worker-index 0); falls back to workerTemplate.")
    worker_template: dict[str, Any] = Field(description="PodTemplateSpec of workers 1..size-1.")
    size: int | None = Field(None, description="Pods per group including the leader; default 1, >= 1.")
    restart_policy: RestartPolicy | None = Field(
        None, description="Group restart policy; default RecreateGroupOnPodRestart (Default means None).")
    sub_group_policy: SubGroupPolicy | None = Field(None, description="Optional subgroup split.")
    volume_claim_templates: list[dict[str, Any]] | None = Field(
        None, description="PersistentVolumeClaims added to the leader and worker StatefulSets.")
    persistent_volume_claim_retention_policy: PvcRetentionPolicy | None = Field(
        None, description="What happens to the claims on delete / scale-down.")
    max_group_restarts: int | None = Field(
        None, description="LWS v1.0 proposal (KEP-820, PR #877): restart budget per group.")
    restart_backoff: str | dict[str, Any] | None = Field(
        None, description="LWS v1.0 proposal (PR #877): backoff between group restarts.")


class RollingUpdateConfiguration(ApiModel):
    """Pace of a rolling update over groups (highest index first)."""

    partition: int | None = Field(
        None, description="Groups with index < partition stay on the old revision; default 0, >= 0.")
    max_unavailable: IntOrString | None = Field(
        None, description="Groups that may be unavailable; int or percent (rounds down); default 1.")
    max_surge: IntOrString | None = Field(
        None, description="Extra groups during an update; int or percent (rounds up, capped at replicas); "
                          "default 0.")


class RolloutStrategy(ApiModel):
    """How a template change is rolled out."""

    type: Literal["RollingUpdate"] | None = Field(None, description="Only RollingUpdate exists (default).")
    rolling_update_configuration: RollingUpdateConfiguration | None = Field(
        None, description="Partition / maxUnavailable / maxSurge; the webhook fills {1, 0, 0} when absent.")


class NetworkConfig(ApiModel):
    """Headless Service layout."""

    subdomain_policy: SubdomainPolicy | None = Field(
        None, description="Shared (one Service, default) or UniquePerReplica (one per group).")


class LeaderWorkerSetSpec(ApiModel):
    """``spec`` of a LeaderWorkerSet (also embedded as each DisaggregatedSet role's spec)."""

    replicas: int | None = Field(None, description="Number of groups; default 1, 0..1,000,000.")
    leader_worker_template: LeaderWorkerTemplate = Field(description="The group template.")
    rollout_strategy: RolloutStrategy | None = Field(None, description="Rolling-update settings.")
    startup_policy: StartupPolicy | None = Field(
        None, description="LeaderCreated (default) or LeaderReady (workers after the leader is Ready).")
    network_config: NetworkConfig | None = Field(None, description="Headless Service layout.")
    group_identity: GroupIdentity | None = Field(
        None, description="LWS v1.0 proposal: group naming by Ordinal index or Hash.")

    def resolved_replicas(self) -> int:
        """``replicas`` with the CRD default (1) applied."""
        return 1 if self.replicas is None else self.replicas

    def resolved_size(self) -> int:
        """``leaderWorkerTemplate.size`` with the CRD default (1) applied."""
        size = self.leader_worker_template.size
        return 1 if size is None else size

    def _ruc(self) -> RollingUpdateConfiguration | None:
        return self.rollout_strategy.rolling_update_configuration if self.rollout_strategy else None

    def resolved_partition(self) -> int:
        """User partition (default 0)."""
        ruc = self._ruc()
        return ruc.partition if ruc and ruc.partition is not None else 0

    def resolved_max_surge(self) -> int:
        """maxSurge as groups: percent rounds up, capped at replicas (upstream controller L304-L315)."""
        ruc = self._ruc()
        replicas = self.resolved_replicas()
        return intstr.max_surge(ruc.max_surge if ruc else None, replicas)

    def resolved_max_unavailable(self) -> int:
        """maxUnavailable as groups: percent rounds down; default 1 (webhook / CRD default)."""
        ruc = self._ruc()
        value = ruc.max_unavailable if ruc else None
        return intstr.max_unavailable(value, self.resolved_replicas())


class LeaderWorkerSetStatus(ApiModel):
    """``status`` as the LWS controller writes it (counts include surge groups)."""

    replicas: int | None = Field(None, description="Leader pods created, surge groups included.")
    ready_replicas: int | None = Field(None, description="Groups ready (any index, surge included).")
    updated_replicas: int | None = Field(None, description="Groups on the current revision (any index).")
    observed_generation: int | None = Field(None, description="metadata.generation last reconciled.")
    conditions: list[Condition] | None = Field(
        None, description="Available / Progressing / UpdateInProgress.")
    hpa_pod_selector: str | None = Field(None, description="Label selector of the leader pods (scale).")


class LeaderWorkerSet(ApiModel):
    """A ``leaderworkerset.x-k8s.io/v1`` LeaderWorkerSet."""

    api_version: Literal["leaderworkerset.x-k8s.io/v1"] = Field(LWS_API_VERSION, description="API version.")
    kind: Literal["LeaderWorkerSet"] = Field(LWS_KIND, description="Kind.")
    metadata: ObjectMeta = Field(default_factory=ObjectMeta, description="Object metadata.")
    spec: LeaderWorkerSetSpec = Field(description="Desired state.")
    status: LeaderWorkerSetStatus | None = Field(None, description="Observed state.")
