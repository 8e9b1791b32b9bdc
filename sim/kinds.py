"""The resource kinds the embedded cluster stores and serves (one table, read by store and API server)."""

from __future__ import annotations

from dataclasses import dataclass, field

from lwsflow.controller.api.crd import crd_info


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


def _from_crd(plural: str) -> ResourceType:
    """A custom resource exactly as its packaged upstream CRD names it (kind, short names, categories,
    scope, subresources): discovery must not invent names (``ds`` is DaemonSet's on a real cluster)."""
    c = crd_info(plural)
    scale = c.subresources.get("scale")
    return ResourceType(
        c.group, c.version, c.kind, c.plural, namespaced=c.namespaced, short_names=c.short_names,
        has_status="status" in c.subresources, has_scale=scale is not None,
        scale_spec_path=(scale or {}).get("specReplicasPath", ".spec.replicas").lstrip("."),
        scale_status_path=(scale or {}).get("statusReplicasPath", ".status.replicas").lstrip("."),
        scale_selector_path=(scale or {}).get("labelSelectorPath", "").lstrip("."),
        categories=c.categories,
    )


LWS = _from_crd("leaderworkersets")
DS = _from_crd("disaggregatedsets")
DS_ROLE_SCALER = _from_crd("disaggregatedsetrolescalers")
# llm-d's request path: Gateway API Inference Extension pools and Gateway API routes (sim/router reads them)
INFERENCE_POOL = _from_crd("inferencepools")
HTTP_ROUTE = _from_crd("httproutes")
POD = ResourceType("", "v1", "Pod", "pods", short_names=("po",), categories=("all",))
SERVICE = ResourceType("", "v1", "Service", "services", short_names=("svc",), categories=("all",))
NODE = ResourceType("", "v1", "Node", "nodes", namespaced=False, short_names=("no",))
NAMESPACE = ResourceType("", "v1", "Namespace", "namespaces", namespaced=False, short_names=("ns",))
EVENT = ResourceType("", "v1", "Event", "events", short_names=("ev",), has_status=False)
CONFIGMAP = ResourceType("", "v1", "ConfigMap", "configmaps", short_names=("cm",), has_status=False)
SECRET = ResourceType("", "v1", "Secret", "secrets", has_status=False)
ENDPOINTS = ResourceType("", "v1", "Endpoints", "endpoints", short_names=("ep",), has_status=False)
PVC = ResourceType("", "v1", "PersistentVolumeClaim", "persistentvolumeclaims", short_names=("pvc",))
SERVICE_ACCOUNT = ResourceType("", "v1", "ServiceAccount", "serviceaccounts", short_names=("sa",),
                               has_status=False)
STATEFULSET = ResourceType("apps", "v1", "StatefulSet", "statefulsets", short_names=("sts",),
                           has_scale=True, categories=("all",))
CONTROLLER_REVISION = ResourceType("apps", "v1", "ControllerRevision", "controllerrevisions",
                                   has_status=False)
HPA = ResourceType("autoscaling", "v2", "HorizontalPodAutoscaler", "horizontalpodautoscalers",
                   short_names=("hpa",), categories=("all",))
LEASE = ResourceType("coordination.k8s.io", "v1", "Lease", "leases", has_status=False)
_RBAC = "rbac.authorization.k8s.io"
ROLE = ResourceType(_RBAC, "v1", "Role", "roles", has_status=False)
CLUSTER_ROLE = ResourceType(_RBAC, "v1", "ClusterRole", "clusterroles", namespaced=False, has_status=False)
ROLE_BINDING = ResourceType(_RBAC, "v1", "RoleBinding", "rolebindings", has_status=False)
CLUSTER_ROLE_BINDING = ResourceType(_RBAC, "v1", "ClusterRoleBinding", "clusterrolebindings",
                                    namespaced=False, has_status=False)
# create-only: answered from RBAC, never stored (kubectl auth can-i)
SELF_SUBJECT_ACCESS_REVIEW = ResourceType("authorization.k8s.io", "v1", "SelfSubjectAccessReview",
                                          "selfsubjectaccessreviews", namespaced=False, has_status=False,
                                          verbs=("create",))
# incluster: lwsflow's own CRD (schema and printer columns from controller/api/crds/rolloutpolicies)
ROLLOUT_POLICY = ResourceType("lwsflow.io", "v1alpha1", "RolloutPolicy", "rolloutpolicies",
                              short_names=("rp",), categories=("lwsflow",))

# stored and served only (no Deployment or disruption controller): what overlays/controller ships, so
# `kubectl apply -k overlays/controller` works here as on a real cluster (docs/embedded-cluster.md)
DEPLOYMENT = ResourceType("apps", "v1", "Deployment", "deployments", short_names=("deploy",), has_scale=True,
                          scale_selector_path="", categories=("all",))
PDB = ResourceType("policy", "v1", "PodDisruptionBudget", "poddisruptionbudgets", short_names=("pdb",))
# the CustomResourceDefinition API (sim/apiserver/crds.py): a stored CRD is served as a kind of its own
CRD = ResourceType("apiextensions.k8s.io", "v1", "CustomResourceDefinition", "customresourcedefinitions",
                   namespaced=False, short_names=("crd", "crds"), has_status=False,
                   categories=("api-extensions",))

BUILTIN: tuple[ResourceType, ...] = (
    LWS, DS, DS_ROLE_SCALER, POD, SERVICE, NODE, NAMESPACE, EVENT, CONFIGMAP, SECRET, ENDPOINTS,
    SERVICE_ACCOUNT, STATEFULSET, CONTROLLER_REVISION, HPA, LEASE, PVC,
    ROLE, CLUSTER_ROLE, ROLE_BINDING, CLUSTER_ROLE_BINDING, SELF_SUBJECT_ACCESS_REVIEW,
    ROLLOUT_POLICY, INFERENCE_POOL, HTTP_ROUTE, CRD, DEPLOYMENT, PDB,
)
# The served kinds: the built-in ones plus those of the CRDs applied at run time (``register``). The
# three tables are mutated in place (every importer sees the change); the registry is process-wide.
ALL: list[ResourceType] = list(BUILTIN)
BY_KIND: dict[tuple[str, str], ResourceType] = {(t.api_version, t.kind): t for t in ALL}
BY_KEY: dict[str, ResourceType] = {t.key: t for t in ALL}
# key -> openAPIV3Schema of a kind served from an applied CRD (validation, defaulting, OpenAPI)
SCHEMAS: dict[str, dict] = {}
_generation = [0]


def generation() -> int:
    """Bumped on every change of the served kinds (what the cached discovery/OpenAPI documents key on)."""
    return _generation[0]


def register(t: ResourceType, schema: dict) -> None:
    """Serve ``t`` (from an applied CRD) with ``schema``; a built-in kind keeps its packaged schema."""
    old = BY_KEY.get(t.key)
    if old in BUILTIN:
        return
    if old is not None:
        ALL.remove(old)
        BY_KIND.pop((old.api_version, old.kind), None)
    ALL.append(t)
    BY_KIND[(t.api_version, t.kind)] = t
    BY_KEY[t.key] = t
    SCHEMAS[t.key] = schema
    _generation[0] += 1


def unregister(key: str) -> None:
    """Stop serving the kind of a deleted CRD (built-in kinds stay)."""
    t = BY_KEY.get(key)
    if t is None or t in BUILTIN:
        return
    ALL.remove(t)
    BY_KIND.pop((t.api_version, t.kind), None)
    del BY_KEY[key]
    SCHEMAS.pop(key, None)
    _generation[0] += 1


def for_object(obj: dict) -> ResourceType:
    """The ResourceType of a manifest, from its apiVersion and kind (KeyError when unknown)."""
    return BY_KIND[(obj.get("apiVersion", ""), obj.get("kind", ""))]
