"""The embedded cluster's configuration: node pools and lifecycle timings (pydantic v2, user-written).

Defaults are realistic for GPU serving: a vLLM-sized image takes about a minute to pull and a 140 GB
model about five minutes to load, so rehearsals show the real shape of a rollout. Every timing can be
overridden per pool (storage and pull bandwidth) and per model (weight size, fixed load time).
"""

from __future__ import annotations

from fnmatch import fnmatch
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator

from lwsflow.controller.api import labels as L
from lwsflow.controller.errors import InvalidInput

GPU_TOPOLOGY_KEY = "cloud.google.com/gce-topology-block"
GKE_ACCELERATOR = "cloud.google.com/gke-accelerator"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Taint(_Model):
    """A node taint of the pool (pods need a matching toleration)."""

    key: str
    value: str = ""
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] = "NoSchedule"


class PoolConfig(_Model):
    """A node pool: ``count`` identical nodes, spread round-robin over ``topology_domains``."""

    name: str = Field(pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
    count: int = Field(ge=0, le=100_000)
    gpus_per_node: int = Field(default=0, ge=0)
    gpu_product: str = ""
    cpu: int = Field(default=96, ge=1)
    memory_gi: int = Field(default=1024, ge=1)
    labels: dict[str, str] = Field(default_factory=dict)
    taints: list[Taint] = Field(default_factory=list)
    topology_key: str | None = None
    topology_domains: int = Field(default=1, ge=1)
    storage_gbps: float | None = Field(default=None, gt=0)  # overrides timings.storage_gbps
    pull_gbps: float | None = Field(default=None, gt=0)  # overrides timings.pull_gbps


class ModelTiming(_Model):
    """Per model (the pod's ``lwsflow.io/model`` label): total weight size, or a fixed load time."""

    weight_gb: float | None = Field(default=None, ge=0)
    load_s: float | None = Field(default=None, ge=0)


class Timings(_Model):
    """Lifecycle timings: image pull, container start, model load, restart back-off."""

    pull_gbps: float = Field(default=0.2, gt=0)  # registry -> node, GB/s
    image_gb: float = Field(default=12.0, ge=0)  # size of an image that matches no pattern below
    cpu_image_gb: float = Field(default=0.2, ge=0)  # images of pods that request no GPU
    image_sizes_gb: dict[str, float] = Field(default_factory=dict)  # fnmatch pattern -> GB
    container_start_s: float = Field(default=5.0, ge=0)
    # SIGTERM to exit on deletion, at most the pod's grace period (the pod is Terminating meanwhile)
    container_stop_s: float = Field(default=2.0, ge=0)
    storage_gbps: float = Field(default=0.5, gt=0)  # model store -> node, GB/s
    weight_gb: float = Field(default=140.0, ge=0)  # default model size for GPU pods (split over group)
    models: dict[str, ModelTiming] = Field(default_factory=dict)
    restart_backoff_s: float = Field(default=10.0, ge=0)  # kubelet delay before restarting a crash
    crash_after_s: float = Field(default=60.0, ge=0)  # a crashing release dies this long after start


DIGEST_KEY = r"^sha256:[0-9a-f]{64}$"  # pydantic (Rust) regex: $ is the very end
IMAGE_PROFILE_LABEL = "io.lwsflow.sim.profile"  # an image label holding an ImageProfile as JSON


class ImageProfile(_Model):
    """How the cluster runs one image, keyed by its digest (``images:`` below): the build says what
    a release does, not its name. Defaults are a healthy image. The serving fields shape the stand-in
    engine of its leader pods (``serve_engines``): a release that is Ready but slower or flakier, which
    readiness cannot see and analysis must catch."""

    ready: bool = True  # False: the pods run but never become Ready (an engine hung while loading)
    crashes: bool = False  # True: the container dies while loading, forever (a crash loop)
    pull_fails: bool = False  # True: ErrImagePull forever
    ttft_s: float | None = Field(default=None, ge=0)  # median time to first token (None: engine default)
    ttft_p95_s: float | None = Field(default=None, ge=0)  # p95 TTFT: log-normal spread around the median
    itl_s: float | None = Field(default=None, ge=0)  # median inter-token latency
    itl_p95_s: float | None = Field(default=None, ge=0)
    error_ratio: float = Field(default=0.0, ge=0, le=1)  # share of generation requests answering 500
    kv_failure_ratio: float = Field(default=0.0, ge=0, le=1)  # decode: share of failed KV pulls (NIXL)
    slowdown_per_min: float = Field(default=0.0, ge=0)  # latency grows this share per minute of uptime
    # KV-cache layout version: prefill and decode engines of different layouts fail the P/D hand-off at
    # the NIXL handshake, as vLLM's compatibility hash does (the same for every image by default)
    kv_layout: str | None = Field(default=None, min_length=1, max_length=64)

    def engine_options(self) -> dict[str, float | str]:
        """The stand-in engine options this profile sets (only those given)."""
        fields = ("ttft_s", "ttft_p95_s", "itl_s", "itl_p95_s", "error_ratio", "kv_failure_ratio",
                  "slowdown_per_min", "kv_layout")
        return {f: v for f in fields if (v := getattr(self, f)) is not None and f in self.model_fields_set}

    @classmethod
    def from_label(cls, text: str, source: str = "") -> ImageProfile:
        """The profile an image carries in its ``io.lwsflow.sim.profile`` label (JSON)."""
        import json

        try:
            data = json.loads(text)
        except ValueError:
            raise InvalidInput(f"{IMAGE_PROFILE_LABEL} is not JSON", field=IMAGE_PROFILE_LABEL,
                               source=source) from None
        from pydantic import ValidationError

        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(p) for p in err["loc"])
            raise InvalidInput(err["msg"], field=f"{IMAGE_PROFILE_LABEL}.{where}", source=source) from None


def image_digest(image: str) -> str:
    """The ``sha256:...`` an image reference is pinned to ("" for a tag)."""
    return image.rpartition("@")[2] if "@" in image else ""


class ClusterConfig(_Model):
    """Pools, timings, scheduling policy and release-failure patterns of one simulated cluster."""

    pools: list[PoolConfig]
    timings: Timings = Field(default_factory=Timings)
    # Node choice for pod groups: "spread"/"binpack" or any policy name of sim/policies.py
    # ("default", "gang", "binpack-fragmentation", "least-slack-time"). Groups are always placed whole
    # here (LWS gangs); queue order and preemption of batch jobs live in the scenario evaluator.
    scoring: Literal["spread", "binpack", "default", "gang", "binpack-fragmentation", "least-slack-time"] = (
        "binpack")
    never_ready_images: list[str] = Field(default_factory=list)  # fnmatch: Running, never Ready
    crashing_images: list[str] = Field(default_factory=list)  # fnmatch: crash while loading, forever
    failing_images: list[str] = Field(default_factory=list)  # fnmatch: ErrImagePull forever
    # What a release does, by image digest: {sha256:...: {ready: false}}. Also learned at run time
    # from the image's own label (Cluster.image_sources), so no image name needs to mean anything.
    images: dict[Annotated[str, StringConstraints(pattern=DIGEST_KEY)], ImageProfile] = Field(
        default_factory=dict)
    serve_engines: bool = False  # plug the stand-in engine into pod hooks (engine area)
    # kube-controller-manager's MaxUnavailableStatefulSet feature gate: beta but off by default in
    # Kubernetes 1.35 and 1.36 (pkg/features/kube_features.go), so a StatefulSet replaces one pod at
    # a time, waiting for it to be Ready, whatever its maxUnavailable. True models a cluster that
    # turned it on: up to maxUnavailable pods replaced at once.
    max_unavailable_statefulset: bool = False
    # False: the DS controller writes no DisaggregatedSet status, as upstream's released v0.9.0 and
    # v0.10.0 (the status is main-only, lws-semantics §f "Status"); scalers keep theirs
    ds_writes_status: bool = True
    # Pods get addresses in 127.<pod_network>.0.0/16 (all of 127/8 is loopback), so stand-in engines
    # really listen on pod IPs. None picks a random network per cluster: two clusters in parallel test
    # processes then never hand out the same address.
    pod_network: int | None = Field(default=None, ge=1, le=254)

    @model_validator(mode="after")
    def _unique_pools(self) -> ClusterConfig:
        names = [p.name for p in self.pools]
        if len(set(names)) != len(names):
            raise ValueError("pool names must be unique")
        return self

    @classmethod
    def default(cls) -> ClusterConfig:
        """A CPU pool, 16 nodes x 8 H100-80GB in 4 topology blocks and 8 nodes x 4 L40S.

        The GPU pools are the example catalog's (``examples/catalog.yaml``): the same labels, GPU
        product values and taints, so ``lwsflow render examples/catalog.yaml`` output schedules here
        as it is (a test keeps the two in step).
        """
        gpu_taint = [Taint(key=L.GPU_RESOURCE, value="present")]  # what GKE puts on GPU nodes
        return cls(
            pools=[
                PoolConfig(name="cpu", count=4, cpu=32, memory_gi=128),
                PoolConfig(
                    name="h100x8",
                    count=16,
                    gpus_per_node=8,
                    gpu_product="nvidia-h100-80gb",
                    cpu=208,
                    memory_gi=1800,
                    labels={GKE_ACCELERATOR: "nvidia-h100-80gb"},
                    topology_key=GPU_TOPOLOGY_KEY,
                    topology_domains=4,
                    taints=gpu_taint,
                ),
                PoolConfig(
                    name="l40sx4",
                    count=8,
                    gpus_per_node=4,
                    gpu_product="nvidia-l40s",
                    cpu=96,
                    memory_gi=384,
                    labels={GKE_ACCELERATOR: "nvidia-l40s"},
                    taints=gpu_taint,
                ),
            ]
        )

    @classmethod
    def from_dict(cls, data: object, source: str = "") -> ClusterConfig:
        from pydantic import ValidationError

        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            err = exc.errors()[0]
            field = ".".join(str(p) for p in err["loc"])
            raise InvalidInput(err["msg"], field=field, source=source) from None

    @classmethod
    def from_file(cls, path: str | Path) -> ClusterConfig:
        from lwsflow.controller.yamlio import load_yaml_documents

        docs = load_yaml_documents(Path(path))
        if len(docs) != 1:
            raise InvalidInput("expected one YAML document", source=str(path))
        return cls.from_dict(docs[0], source=str(path))

    # -- timing helpers --------------------------------------------------------------------------------
    def image_gb(self, image: str, gpu: bool) -> float:
        for pattern, size in self.timings.image_sizes_gb.items():
            if fnmatch(image, pattern):
                return size
        return self.timings.image_gb if gpu else self.timings.cpu_image_gb

    def image_profile(self, image: str) -> ImageProfile:
        """The profile of ``image`` by its digest (a healthy image when none is configured)."""
        return self.images.get(image_digest(image)) or ImageProfile()

    def image_crashes(self, image: str) -> bool:
        return self.image_profile(image).crashes or any(fnmatch(image, p) for p in self.crashing_images)

    def image_never_ready(self, image: str) -> bool:
        return not self.image_profile(image).ready or any(fnmatch(image, p) for p in self.never_ready_images)

    def image_fails(self, image: str) -> bool:
        return self.image_profile(image).pull_fails or any(fnmatch(image, p) for p in self.failing_images)
