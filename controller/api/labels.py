"""Label, annotation and condition names: the upstream LWS/DS ones and lwsflow's own, in one place."""

from __future__ import annotations

from typing import Final

# -- upstream LeaderWorkerSet (api/leaderworkerset/v1/leaderworkerset_types.go) ----------------------
LWS_GROUP = "leaderworkerset.x-k8s.io"
LWS_API_VERSION: Final = "leaderworkerset.x-k8s.io/v1"  # literal: the models type apiVersion with it
LWS_KIND: Final = "LeaderWorkerSet"
_P = "leaderworkerset.sigs.k8s.io"
NAME = f"{_P}/name"
WORKER_INDEX = f"{_P}/worker-index"
GROUP_INDEX = f"{_P}/group-index"
GROUP_KEY = f"{_P}/group-key"
TEMPLATE_REVISION_HASH = f"{_P}/template-revision-hash"
SUBGROUP_INDEX = f"{_P}/subgroup-index"
SUBGROUP_KEY = f"{_P}/subgroup-key"
SIZE_ANNOTATION = f"{_P}/size"
LEADER_NAME_ANNOTATION = f"{_P}/leader-name"
REPLICAS_ANNOTATION = f"{_P}/replicas"
EXCLUSIVE_TOPOLOGY = f"{_P}/exclusive-topology"
SUBGROUP_EXCLUSIVE_TOPOLOGY = f"{_P}/subgroup-exclusive-topology"
SUBDOMAIN_POLICY_ANNOTATION = f"{_P}/subdomainPolicy"
GANG_GROUP_NAME = "scheduling.k8s.io/group-name"
VOLCANO_QUEUE = "scheduling.volcano.sh/queue-name"
# Kueue: the LocalQueue a LeaderWorkerSet is admitted through (one Workload per group)
KUEUE_QUEUE = "kueue.x-k8s.io/queue-name"

ENV_LEADER_ADDRESS = "LWS_LEADER_ADDRESS"
ENV_GROUP_SIZE = "LWS_GROUP_SIZE"
ENV_WORKER_INDEX = "LWS_WORKER_INDEX"

COND_AVAILABLE = "Available"
COND_PROGRESSING = "Progressing"
COND_UPDATE_IN_PROGRESS = "UpdateInProgress"

# -- upstream DisaggregatedSet (pkg/utils/disaggregatedset/utils.go) --------------------------------
DS_GROUP = "disaggregatedset.x-k8s.io"
DS_API_VERSION: Final = "disaggregatedset.x-k8s.io/v1"
DS_KIND: Final = "DisaggregatedSet"
DS_NAME = f"{DS_GROUP}/name"
DS_ROLE = f"{DS_GROUP}/role"
DS_SLICE = f"{DS_GROUP}/slice"
DS_REVISION = f"{DS_GROUP}/revision"
DS_INITIAL_REPLICAS = f"{DS_GROUP}/initial-replicas"

# -- GPU node labels ---------------------------------------------------------------------------------
GPU_PRODUCT = "nvidia.com/gpu.product"
GPU_RESOURCE = "nvidia.com/gpu"

# -- lwsflow's own -----------------------------------------------------------------------------------
LWSFLOW = "lwsflow.io"
MODEL = f"{LWSFLOW}/model"  # catalog model name, on every rendered object and pod template
ROLE = f"{LWSFLOW}/role"  # aggregated | prefill | decode
PD_PAIR = f"{LWSFLOW}/pd-pair"  # on both LWS of a P/D pair rendered with pdMode: lws-pair
REVISION = f"{LWSFLOW}/revision"  # blue-green: the revision suffix of a green pair's objects and pods
NODE_POOL = f"{LWSFLOW}/node-pool"  # catalog node pool name (pods and simulated nodes)
ENGINE = f"{LWSFLOW}/engine"  # vllm | sglang
SERVING_PORT = f"{LWSFLOW}/serving-port"  # annotation on the pod template: the engine's HTTP port
SERVED_MODEL = f"{LWSFLOW}/served-model"  # annotation: the model id /v1/models must list
ROLLOUT_STAGES = f"{LWSFLOW}/rollout-stages"  # annotation on LWS/DS: "1,50%,100%" from the catalog
ROLLOUT_BAKE = f"{LWSFLOW}/rollout-bake"
ROLLOUT_DEADLINE = f"{LWSFLOW}/rollout-deadline"
ROLLOUT_PREFIX = f"rollout.{LWSFLOW}/"  # controller-owned state annotations live under this prefix
FIELD_MANAGER = "lwsflow-rollout"  # server-side apply field manager of the rollout controller

APP_NAME = "app.kubernetes.io/name"
APP_PART_OF = "app.kubernetes.io/part-of"
APP_MANAGED_BY = "app.kubernetes.io/managed-by"
