"""The resource kinds the embedded cluster stores and serves (one table, read by store and API server)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class ResourceType:
    group: str  # "" for the core group
    version: str
    kind: str
    plural: str
    namespaced: bool = True
    short_names: tuple[str, ...] = ()
    has_status: bool = True  # status is a subresource: main writes ignore it, status writes ignore the rest
    has_scale: bool = False
    scale_spec_path: str = "spec.replicas"
    scale_status_path: str = "status.replicas"
    scale_selector_path: str = ""
    verbs: tuple[str, ...] = ("create", "delete", "get", "list", "patch", "update", "watch")
    categories: tuple[str, ...] = field(default=())

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def key(self) -> str:
        """Store key: ``plural`` for core kinds, ``plural.group`` otherwise (as kubectl spells them)."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"


LWS = ResourceType("leaderworkerset.x-k8s.io", "v1", "LeaderWorkerSet", "leaderworkersets",
                   short_names=("lws",), has_scale=True,
                   scale_selector_path="status.hpaPodSelector", categories=("all",))
DS = ResourceType("disaggregatedset.x-k8s.io", "v1", "DisaggregatedSet", "disaggregatedsets",
                  short_names=("ds",), categories=("all",))
DS_ROLE_SCALER = ResourceType("disaggregatedset.x-k8s.io", "v1", "DisaggregatedSetRoleScaler",
                              "disaggregatedsetrolescalers", has_scale=True,
                              scale_selector_path="status.selector")
POD = ResourceType("", "v1", "Pod", "pods", short_names=("po",), categories=("all",))
SERVICE = ResourceType("", "v1", "Service", "services", short_names=("svc",), categories=("all",))
NODE = ResourceType("", "v1", "Node", "nodes", namespaced=False, short_names=("no",))
NAMESPACE = ResourceType("", "v1", "Namespace", "namespaces", namespaced=False, short_names=("ns",))
EVENT = ResourceType("", "v1", "Event", "events", short_names=("ev",), has_status=False)
CONFIGMAP = ResourceType("", "v1", "ConfigMap", "configmaps", short_names=("cm",), has_status=False)
SECRET = ResourceType("", "v1", "Secret", "secrets", has_status=False)
ENDPOINTS = ResourceType("", "v1", "Endpoints", "endpoints", short_names=("ep",), has_status=False)
SERVICE_ACCOUNT = ResourceType("", "v1", "ServiceAccount", "serviceaccounts", short_names=("sa",),
                               has_status=False)
STATEFULSET = ResourceType("apps", "v1", "StatefulSet", "statefulsets", short_names=("sts",),
                           has_scale=True, categories=("all",))
CONTROLLER_REVISION = ResourceType("apps", "v1", "ControllerRevision", "controllerrevisions",
                                   has_status=False)
HPA = ResourceType("autoscaling", "v2", "HorizontalPodAutoscaler", "horizontalpodautoscalers",
                   short_names=("hpa",), categories=("all",))
LEASE = ResourceType("coordination.k8s.io", "v1", "Lease", "leases", has_status=False)
# incluster: lwsflow's own CRD (schema and printer columns from controller/api/crds/rolloutpolicies)
ROLLOUT_POLICY = ResourceType("lwsflow.io", "v1alpha1", "RolloutPolicy", "rolloutpolicies",
                              short_names=("rp",), categories=("lwsflow",))

ALL: tuple[ResourceType, ...] = (
    LWS, DS, DS_ROLE_SCALER, POD, SERVICE, NODE, NAMESPACE, EVENT, CONFIGMAP, SECRET, ENDPOINTS,
    SERVICE_ACCOUNT, STATEFULSET, CONTROLLER_REVISION, HPA, LEASE, ROLLOUT_POLICY,
)
BY_KIND: dict[tuple[str, str], ResourceType] = {(t.api_version, t.kind): t for t in ALL}
BY_KEY: dict[str, ResourceType] = {t.key: t for t in ALL}


def for_object(obj: dict) -> ResourceType:
    """The ResourceType of a manifest, from its apiVersion and kind (KeyError when unknown)."""
    return BY_KIND[(obj.get("apiVersion", ""), obj.get("kind", ""))]
