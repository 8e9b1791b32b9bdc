"""The API resources the controller touches, as REST path builders (one table)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Resource:
    """One API resource: ``group`` is "" for the core group."""

    group: str
    version: str
    plural: str
    namespaced: bool = True

    def path(self, namespace: str | None = None, name: str | None = None, sub: str = "") -> str:
        base = f"/api/{self.version}" if not self.group else f"/apis/{self.group}/{self.version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{namespace}"
        base += f"/{self.plural}"
        if name:
            base += f"/{name}"
        if sub:
            base += f"/{sub}"
        return base


LWS = Resource("leaderworkerset.x-k8s.io", "v1", "leaderworkersets")
DS = Resource("disaggregatedset.x-k8s.io", "v1", "disaggregatedsets")
POD = Resource("", "v1", "pods")
NODE = Resource("", "v1", "nodes", namespaced=False)
EVENT = Resource("", "v1", "events")
STATEFULSET = Resource("apps", "v1", "statefulsets")
SECRET = Resource("", "v1", "secrets")
LEASE = Resource("coordination.k8s.io", "v1", "leases")
INFERENCE_POOL = Resource("inference.networking.k8s.io", "v1", "inferencepools")
HTTP_ROUTE = Resource("gateway.networking.k8s.io", "v1", "httproutes")
ROLLOUT_POLICY = Resource("lwsflow.io", "v1alpha1", "rolloutpolicies")
# Kueue (v0.17 serves and stores v1beta2): read by the quota check before a rollout (rollout/quota.py)
LOCAL_QUEUE = Resource("kueue.x-k8s.io", "v1beta2", "localqueues")
CLUSTER_QUEUE = Resource("kueue.x-k8s.io", "v1beta2", "clusterqueues", namespaced=False)

BY_KIND = {"LeaderWorkerSet": LWS, "DisaggregatedSet": DS}
