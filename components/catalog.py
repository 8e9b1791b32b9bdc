"""The model catalog a platform team writes once: node pools, models, environments.

One pydantic model per concept; every user-written key is validated here, at the edge, and
``load_catalog`` turns any problem into ``InvalidInput`` naming the field (exit code 2 in the CLI).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import ErrorDetails

from lwsflow.controller.api.duration import duration_seconds
from lwsflow.controller.errors import InvalidInput
from lwsflow.controller.yamlio import load_yaml_documents

# Patterns end in \Z, not $: Python's $ also matches before a trailing newline ("llama\n").
DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?\Z")
PERCENT = re.compile(r"^(\d{1,3})%\Z")
# Kubernetes name and label syntax (apimachinery validation): what the API server would refuse later,
# once a StatefulSet or Pod is created from the LWS, is refused here, naming the catalog field.
DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\Z")
_QUALIFIED = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?\Z")
CONFIG_KEY = re.compile(r"^[-._a-zA-Z0-9]+\Z")
QUANTITY = re.compile(r"^(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?[0-9]+))?\Z")

Dtype = Literal["bf16", "fp16", "fp32", "fp8", "int8", "int4"]
BYTES_PER_PARAM: dict[str, float] = {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 1, "int8": 1, "int4": 0.5}
DEFAULT_ENVIRONMENTS = ("dev", "staging", "prod")
# llm-d's routing sidecar release whose shapes the renderer follows (docs/llm-d.md, "Rendering")
ROUTING_SIDECAR_IMAGE = "ghcr.io/llm-d/llm-d-routing-sidecar:v0.4.0"


def _dns_label(v: str, max_len: int = 63) -> str:
    if not DNS1035.match(v) or len(v) > max_len:
        raise ValueError(f"{v!r} is not a DNS-1035 label (lowercase letters, digits and '-', "
                         f"starting with a letter, at most {max_len} characters)")
    return v


def _subdomain(v: str) -> str:
    if not DNS1123_SUBDOMAIN.match(v) or len(v) > 253:
        raise ValueError(f"{v!r} is not a DNS-1123 subdomain (lowercase letters, digits, '-' and '.')")
    return v


def _label_key(v: str) -> str:
    """A qualified name, ``[prefix/]name``: the syntax of label, taint and topology keys."""
    prefix, slash, name = v.rpartition("/")
    bad_prefix = bool(slash) and (not DNS1123_SUBDOMAIN.match(prefix) or len(prefix) > 253)
    if bad_prefix or not _QUALIFIED.match(name) or len(name) > 63:
        raise ValueError(f"{v!r} is not a valid label key ([prefix/]name, name at most 63 characters of "
                         f"letters, digits, '-', '_' and '.')")
    return v


def _label_value(v: str) -> str:
    if v and (not _QUALIFIED.match(v) or len(v) > 63):
        raise ValueError(f"{v!r} is not a valid label value (at most 63 letters, digits, '-', '_' and '.')")
    return v


def _queue(v: str | None) -> str | None:
    """A Kueue LocalQueue name: an object name that is also a label value (it travels as one)."""
    if v is None:
        return v
    if len(v) > 63:
        raise ValueError(f"{v!r} is longer than 63 characters (a LocalQueue name is a label value)")
    return _subdomain(v)


def _int_or_percent(v: int | str) -> int | str:
    if isinstance(v, bool):
        raise ValueError("must be an integer or a percent string like '25%'")
    if isinstance(v, int):
        if v < 0:
            raise ValueError("must be >= 0")
        return v
    m = PERCENT.match(v)
    if not m or int(m.group(1)) > 100:
        raise ValueError(f"{v!r} must be an integer or a percent between 0% and 100%")
    return v


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)

    @field_validator("*", mode="before")
    @classmethod
    def _no_booleans(cls, v: Any, info: ValidationInfo) -> Any:
        # Only the opt-in switches (allowOvercommit, allowSharedNamespace) are booleans, but YAML reads
        # yes/no/on/off as one and pydantic would quietly take it as 1 or 0 (`replicas: yes` -> 1):
        # refuse it where it was written.
        target = cls.model_fields.get(info.field_name or "")
        if isinstance(v, bool) and (target is None or target.annotation is not bool):
            raise ValueError(f"{str(v).lower()} is a boolean here (YAML reads yes/no/on/off as booleans)")
        return v


class Toleration(_Strict):
    key: str | None = None
    operator: Literal["Exists", "Equal"] = "Equal"
    value: str | None = None
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = None
    tolerationSeconds: int | None = None

    _v_key = field_validator("key")(lambda cls, v: _label_key(v) if v else v)  # empty + Exists: all


class NodePool(_Strict):
    """A pool of identical GPU nodes."""

    name: str
    gpu: str = Field(description="GPU product label value, e.g. nvidia-h100-80gb")
    gpuMemoryGiB: float = Field(gt=0, le=1024)
    gpusPerNode: int = Field(ge=1, le=64)
    nodes: int = Field(ge=1, le=100_000)
    nodeSelector: dict[str, str] = Field(default_factory=dict)
    tolerations: list[Toleration] = Field(default_factory=list)
    topologyKey: str | None = Field(default=None, description="one group per topology domain when set")
    cpuPerNode: int = Field(default=192, ge=1)
    memoryGiBPerNode: int = Field(default=1800, ge=1)
    gpuResource: str = Field(default="nvidia.com/gpu", description="extended resource name of the GPU")
    allowOvercommit: bool = Field(default=False, strict=True, description="plan and render even when the "
                                  "models together need more nodes than the pool has")

    _v_name = field_validator("name")(lambda cls, v: _dns_label(v))
    _v_gpu = field_validator("gpu")(lambda cls, v: _label_value(v))  # a nodeSelector value
    _v_topology = field_validator("topologyKey")(lambda cls, v: v if v is None else _label_key(v))
    _v_resource = field_validator("gpuResource")(lambda cls, v: _label_key(v))

    @field_validator("nodeSelector")
    @classmethod
    def _selector(cls, v: dict[str, str]) -> dict[str, str]:
        for key, value in v.items():
            _label_key(key)
            _label_value(value)
        return v


class Architecture(_Strict):
    layers: int = Field(ge=1, le=10_000)
    attentionHeads: int = Field(ge=1, le=100_000)
    kvHeads: int = Field(ge=1, le=100_000)
    headDim: int = Field(ge=1, le=100_000)

    @model_validator(mode="after")
    def _kv_divides(self) -> Architecture:
        if self.attentionHeads % self.kvHeads:
            raise ValueError("kvHeads must divide attentionHeads")
        return self


Stage = int | str


def _default_stages() -> list[Stage]:
    return [1, "50%", "100%"]


class RolloutSettings(_Strict):
    """Staged-rollout plan: groups updated after each stage (count or percent of replicas)."""

    stages: list[Stage] = Field(default_factory=_default_stages, min_length=1, max_length=100)
    maxUnavailable: int | str = 1
    maxSurge: int | str = 0
    bake: str = Field(default="0s", description="wait after each stage's gate passes, e.g. 5m")
    deadline: str = Field(default="30m", description="progress deadline per stage")

    @field_validator("stages")
    @classmethod
    def _stages(cls, v: list[Stage]) -> list[Stage]:
        for s in v:
            if isinstance(s, bool) or (isinstance(s, int) and s < 1):
                raise ValueError(f"stage {s!r} must be a positive group count or a percent")
            if isinstance(s, str):
                m = PERCENT.match(s)
                if not m or not 0 < int(m.group(1)) <= 100:
                    raise ValueError(f"stage {s!r} must be a positive group count or a percent in 1%..100%")
        return v

    _v_budget = field_validator("maxUnavailable", "maxSurge")(lambda cls, v: _int_or_percent(v))

    @field_validator("bake", "deadline", mode="before")
    @classmethod
    def _duration(cls, v: object, info: ValidationInfo) -> object:
        """The one grammar (controller/api/duration.py), as the CLI and the RolloutPolicy CRD read it: a
        YAML whole number is seconds; the text is kept as written (it becomes an annotation)."""
        if isinstance(v, float):  # the CRD's int-or-string field could not carry it
            raise ValueError(f"{v!r}: write a fraction of a second as text (\"{v}\") or in ms (500ms)")
        seconds = duration_seconds(v)
        if info.field_name == "deadline" and seconds <= 0:
            raise ValueError(f"must be above 0 (got {v!r})")
        return str(v) if isinstance(v, int) and not isinstance(v, bool) else v


class RoleSpec(_Strict):
    """One role of a disaggregated model (prefill or decode), sized on its own."""

    replicas: int = Field(ge=0, le=1_000_000)
    nodePool: str | None = Field(default=None, description="defaults to the model's nodePool")
    maxModelLen: int | None = Field(default=None, ge=1)
    tensorParallelSize: int | None = Field(default=None, ge=1, le=1024, description="default: the model's")
    pipelineParallelSize: int | None = Field(default=None, ge=1, le=1024, description="default: the model's")


class SecretRef(_Strict):
    """A key in a Kubernetes Secret; rendered as ``secretKeyRef``, never as a literal."""

    name: str
    key: str

    _v_name = field_validator("name")(lambda cls, v: _subdomain(v))

    @field_validator("key")
    @classmethod
    def _key(cls, v: str) -> str:
        if not CONFIG_KEY.match(v) or len(v) > 253:
            raise ValueError(f"{v!r} is not a Secret key (letters, digits, '-', '_' and '.')")
        return v


class GangScheduling(_Strict):
    provider: Literal["volcano"] = "volcano"
    queue: str | None = None


class Autoscaling(_Strict):
    """HorizontalPodAutoscaler on the LWS scale subresource (it scales groups and sees leaders only)."""

    minReplicas: int = Field(ge=1)
    maxReplicas: int = Field(ge=1)
    targetCPUUtilizationPercentage: int = Field(default=80, ge=1, le=100)

    @model_validator(mode="after")
    def _bounds(self) -> Autoscaling:
        if self.maxReplicas < self.minReplicas:
            raise ValueError("maxReplicas must be >= minReplicas")
        return self


class ModelCache(_Strict):
    """A per-pod model cache volume from volumeClaimTemplates."""

    size: str = "1Ti"
    storageClassName: str | None = None

    @field_validator("size")
    @classmethod
    def _quantity(cls, v: str) -> str:
        if not QUANTITY.match(v):
            raise ValueError(f"{v!r} is not a storage quantity like 500Gi or 1Ti")
        return v

    _v_class = field_validator("storageClassName")(lambda cls, v: v if v is None else _subdomain(v))


ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*\Z")
# A literal value under a name like these would land in git and in `kubectl get -o yaml`:
# such names must come from a Secret (secretKeyRef), never from the catalog.
SECRET_LIKE = re.compile(r"TOKEN|KEY|PASSWORD|PASSWD|SECRET|CREDENTIAL", re.IGNORECASE)
_NOT_SECRET = re.compile(r"TOKENIZER", re.IGNORECASE)  # TOKENIZERS_PARALLELISM and friends


def looks_secret(name: str) -> bool:
    """Whether an env var name suggests a secret value (``HF_TOKEN``, ``OPENAI_API_KEY``, ...)."""
    return bool(SECRET_LIKE.search(_NOT_SECRET.sub("", name)))


# Engine flags whose value is a credential: in extraArgs it would land in git and on the command line.
SECRET_FLAGS = frozenset({"--api-key", "--hf-token", "--token", "--password", "--admin-api-key"})
# Engine flags the renderer writes from the sizing (vLLM's and SGLang's spellings) -> the catalog key.
PARALLEL_FLAGS = {"--tensor-parallel-size": "tensorParallelSize", "-tp": "tensorParallelSize",
                  "--tp-size": "tensorParallelSize", "--tp": "tensorParallelSize",
                  "--pipeline-parallel-size": "pipelineParallelSize", "-pp": "pipelineParallelSize",
                  "--pp-size": "pipelineParallelSize", "--pp": "pipelineParallelSize"}
RESERVED_ENV_PREFIX = "LWS_"  # injected by the LWS pod webhook, which drops user entries of the same name


class EnvVar(_Strict):
    """An extra container env entry: a plain non-secret ``value`` or a ``secretKeyRef``."""

    name: str
    value: str | None = None
    secretKeyRef: SecretRef | None = None

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not ENV_NAME.match(v):
            raise ValueError(f"{v!r} is not a valid environment variable name")
        if v.upper().startswith(RESERVED_ENV_PREFIX):
            raise ValueError(f"{v!r} is set by LeaderWorkerSet itself (names starting with "
                             f"{RESERVED_ENV_PREFIX} are reserved)")
        return v

    @model_validator(mode="after")
    def _one(self) -> EnvVar:
        if (self.value is None) == (self.secretKeyRef is None):
            raise ValueError("set exactly one of value or secretKeyRef")
        if self.value is not None and looks_secret(self.name):
            raise ValueError(f"{self.name!r} looks like a secret: use secretKeyRef, not a literal value")
        return self


class LlmdRouting(_Strict):
    """The llm-d request path for a P/D model (docs/llm-d.md): render an InferencePool selecting its
    leader pods and an HTTPRoute from a Gateway to that pool; the endpoint picker (EPP) Deployment and
    Service come from the user's llm-d installation."""

    gateway: str = Field(description="the Gateway the HTTPRoute attaches to (parentRefs[0].name)")
    endpointPicker: str | None = Field(
        default=None, description="the EPP Service of the llm-d install (default: <model>-epp)")
    endpointPickerPort: int = Field(default=9002, ge=1, le=65535, description="the EPP's ext-proc port")
    routingSidecar: Literal["decode", "none"] = Field(
        default="decode", description="decode: llm-d's routing sidecar on the decode leader pods, listening "
        "on the model's port (the pool's targetPort) while the engine moves to enginePort; none: no sidecar")
    sidecarImage: str = Field(default=ROUTING_SIDECAR_IMAGE, min_length=1,
                              description="the routing sidecar's image")
    enginePort: int = Field(default=8200, ge=1, le=65535,
                            description="where a decode engine listens behind the sidecar")

    _v_gateway = field_validator("gateway")(lambda cls, v: _subdomain(v))
    _v_epp = field_validator("endpointPicker")(lambda cls, v: v if v is None else _subdomain(v))


class ModelSpec(_Strict):
    name: str
    model: str = Field(description="served model id, e.g. meta-llama/Llama-3.1-405B-Instruct")
    parametersB: float = Field(gt=0, le=100_000)
    dtype: Dtype = "bf16"
    checkpointDtype: Dtype | None = Field(
        default=None, description="dtype the checkpoint's weights are stored in (default: 16-bit, "
        "except int8/int4 which only exist pre-quantized); fp8 = a pre-quantized FP8 checkpoint")
    architecture: Architecture
    maxModelLen: int = Field(default=8192, ge=1, le=10_000_000)
    tensorParallelSize: int | None = Field(
        default=None, ge=1, le=1024, description="tensor-parallel ranks (default: chosen by the sizing)")
    pipelineParallelSize: int | None = Field(
        default=None, ge=1, le=1024, description="pipeline stages per group; a group larger than one node "
        "spans tensorParallelSize x pipelineParallelSize / gpusPerNode nodes (default: chosen by the sizing)")
    engine: Literal["vllm", "sglang"] = "vllm"
    image: str
    nodePool: str
    replicas: int | None = Field(default=None, ge=0, le=1_000_000)
    prefill: RoleSpec | None = None
    decode: RoleSpec | None = None
    pdMode: Literal["disaggregatedset", "lws-pair"] = "disaggregatedset"
    rollout: RolloutSettings = Field(default_factory=RolloutSettings)
    port: int = Field(default=8000, ge=1, le=65535)
    gpuMemoryUtilization: float = Field(default=0.9, gt=0, le=1)
    startupPolicy: Literal["LeaderCreated", "LeaderReady"] = "LeaderCreated"
    restartPolicy: Literal["RecreateGroupOnPodRestart", "RecreateGroupAfterStart", "None"] = (
        "RecreateGroupOnPodRestart")
    subdomainPolicy: Literal["Shared", "UniquePerReplica"] = "Shared"
    gangScheduling: GangScheduling | None = None
    autoscaling: Autoscaling | None = None
    modelCache: ModelCache | None = None
    hfTokenSecret: SecretRef | None = Field(default=None, description="HF_TOKEN via secretKeyRef")
    env: list[EnvVar] = Field(default_factory=list)
    extraArgs: list[str] = Field(default_factory=list)
    llmd: LlmdRouting | None = Field(default=None, description="P/D models: also render llm-d's "
                                     "InferencePool and HTTPRoute (off by default)")
    queue: str | None = Field(default=None, description="Kueue LocalQueue: rendered as the "
                              "kueue.x-k8s.io/queue-name label on the LWS (or on each DS role), with "
                              "maxSurge as an integer (docs/catalog.md, \"Kueue\")")

    _v_name = field_validator("name")(lambda cls, v: _dns_label(v, 40))
    _v_queue = field_validator("queue")(lambda cls, v: _queue(v))

    @field_validator("checkpointDtype")
    @classmethod
    def _servable_checkpoint(cls, v: str | None, info: ValidationInfo) -> str | None:
        dtype = info.data.get("dtype")
        if v is None or dtype is None or v == dtype:
            return v
        if v in ("fp8", "int8", "int4"):  # the engines load a quantized checkpoint as what it is
            raise ValueError(f"a pre-quantized {v} checkpoint is served as {v}: set dtype: {v}")
        if dtype in ("int8", "int4"):
            raise ValueError(f"dtype {dtype} needs a pre-quantized {dtype} checkpoint (the engines "
                             f"quantize to fp8 on the fly, not to {dtype})")
        return v  # 16/32-bit weights: cast (--dtype) or quantized to fp8 at load time

    @property
    def checkpoint_dtype(self) -> str:
        """What the weights are stored as: the catalog's checkpointDtype, else 16-bit for a 16/32-bit
        or fp8 dtype (fp8 then means quantized on the fly) and the dtype itself for int8/int4."""
        if self.checkpointDtype:
            return self.checkpointDtype
        return self.dtype if self.dtype in ("int8", "int4") else "bf16"

    @property
    def online_quantization(self) -> str | None:
        """The engine's load-time quantization (``--quantization fp8``) when the checkpoint is 16-bit
        but the catalog sized fp8 weights; None when the weights load as stored."""
        return "fp8" if self.dtype == "fp8" and self.checkpoint_dtype != "fp8" else None

    def checkpoint_warnings(self) -> list[str]:
        """A model id that looks like the other kind of checkpoint than the catalog says (a warning:
        ids are names, not facts; the engine reads the checkpoint's own config)."""
        looks_fp8 = "fp8" in self.model.lower()
        if looks_fp8 and self.checkpoint_dtype != "fp8":
            what = ("it would be quantized again on the fly" if self.dtype == "fp8"
                    else f"the engine would load fp8 weights, sized here as {self.dtype}")
            return [f"model {self.model!r} looks like a pre-quantized fp8 checkpoint but the catalog "
                    f"says its checkpoint is {self.checkpoint_dtype} ({what}); set checkpointDtype: fp8 "
                    "and dtype: fp8 if it is"]
        if self.checkpoint_dtype == "fp8" and not looks_fp8:
            return [f"model {self.model!r} does not look like an fp8 checkpoint but checkpointDtype is fp8 "
                    "(no --quantization fp8 is rendered, so 16-bit weights would load at twice the size "
                    "sized here)"]
        return []

    @field_validator("extraArgs")
    @classmethod
    def _no_secret_flags(cls, v: list[str]) -> list[str]:
        # engine flags that take a credential would put it in git and in the pod's command line
        for arg in v:
            flag = arg.split("=", 1)[0]
            if flag in SECRET_FLAGS:
                raise ValueError(f"{flag} takes a secret: pass it through env with a "
                                 f"secretKeyRef instead of extraArgs")
            if flag in PARALLEL_FLAGS:
                # the renderer sets the parallelism (and the group's pods and GPUs) from the sizing: a
                # second value here would win on the engine's command line and disagree with the pods
                raise ValueError(f"{flag} is rendered from the sizing: set {PARALLEL_FLAGS[flag]} instead")
        return v

    @model_validator(mode="after")
    def _shape(self) -> ModelSpec:
        disagg = self.prefill is not None or self.decode is not None
        if disagg and (self.prefill is None or self.decode is None):
            raise ValueError("a disaggregated model needs both prefill and decode")
        if disagg and self.replicas is not None:
            raise ValueError("set either replicas (aggregated) or prefill/decode (disaggregated), not both")
        if not disagg and self.replicas is None:
            raise ValueError("set replicas (aggregated) or prefill and decode (disaggregated)")
        if self.llmd is not None and not disagg:
            raise ValueError("llmd: the llm-d InferencePool/HTTPRoute are rendered for P/D models only")
        sidecar = self.llmd is not None and self.llmd.routingSidecar == "decode"
        if sidecar and self.llmd is not None and self.llmd.enginePort == self.port:
            raise ValueError(f"llmd.enginePort: {self.port} is the sidecar's port (the model's port); "
                             "the decode engine needs another")
        if disagg and self.autoscaling is not None:
            # An HPA scales one scale subresource; P/D roles need coordinated, per-role scaling.
            raise ValueError("autoscaling is supported for aggregated models only")
        a, n = self.autoscaling, self.replicas
        if a is not None and n is not None and not a.minReplicas <= n <= a.maxReplicas:
            # the HPA would move replicas at once and the GitOps sync would move them back
            raise ValueError(f"replicas {self.replicas} lies outside autoscaling "
                             f"{a.minReplicas}..{a.maxReplicas}")
        names = [e.name for e in self.env] + (["HF_TOKEN"] if self.hfTokenSecret else [])
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"env: {dup[0]!r} is set more than once (hfTokenSecret sets HF_TOKEN)")
        return self

    @property
    def disaggregated(self) -> bool:
        return self.prefill is not None


class ModelOverride(_Strict):
    """Per-environment changes to one model: replicas (or role replicas) and rollout settings.

    Only the keys written here change; everything else comes from the model (``for_environment``).
    """

    replicas: int | None = Field(default=None, ge=0, le=1_000_000)
    prefill: RoleSpec | None = None
    decode: RoleSpec | None = None
    rollout: RolloutSettings | None = None
    queue: str | None = Field(default=None, description="the model's LocalQueue in this environment")

    _v_queue = field_validator("queue")(lambda cls, v: _queue(v))


class Environment(_Strict):
    name: str
    namespace: str | None = Field(default=None, description="defaults to the catalog namespace")
    queue: str | None = Field(default=None, description="Kueue LocalQueue of every model here that "
                              "names none in its override (it wins over the model's own queue)")
    overrides: dict[str, ModelOverride] = Field(default_factory=dict)

    _v_name = field_validator("name")(lambda cls, v: _dns_label(v))
    _v_ns = field_validator("namespace")(lambda cls, v: v if v is None else _dns_label(v))
    _v_queue = field_validator("queue")(lambda cls, v: _queue(v))


class Catalog(_Strict):
    namespace: str = "default"
    nodePools: list[NodePool] = Field(min_length=1)
    models: list[ModelSpec] = Field(min_length=1)
    environments: list[Environment] = Field(
        default_factory=lambda: [Environment(name=n) for n in DEFAULT_ENVIRONMENTS], min_length=1)
    allowSharedNamespace: bool = Field(default=False, strict=True, description="let environments share a "
                                       "namespace (they run on separate clusters)")

    _v_ns = field_validator("namespace")(lambda cls, v: _dns_label(v))

    @model_validator(mode="before")
    @classmethod
    def _default_environments(cls, data: Any) -> Any:
        # Without `environments`, dev, staging and prod each get a namespace of their own
        # (<namespace>-<env>): in one namespace their objects, of the same names, would overwrite each other.
        if isinstance(data, dict) and "environments" not in data:
            ns = data.get("namespace", "default")
            if isinstance(ns, str):
                envs = [{"name": n, "namespace": f"{ns}-{n}"} for n in DEFAULT_ENVIRONMENTS]
                data = {**data, "environments": envs}
        return data

    @field_validator("environments", mode="before")
    @classmethod
    def _env_names(cls, v: Any) -> Any:
        if isinstance(v, list):
            return [{"name": e} if isinstance(e, str) else e for e in v]
        return v

    @model_validator(mode="after")
    def _refs(self) -> Catalog:
        pools = {p.name for p in self.nodePools}
        for kind, names in (("nodePools", [p.name for p in self.nodePools]),
                            ("models", [m.name for m in self.models]),
                            ("environments", [e.name for e in self.environments])):
            dup = sorted({n for n in names if names.count(n) > 1})
            if dup:
                raise ValueError(f"{kind}: duplicate name {dup[0]!r}")
        by_namespace: dict[str, list[str]] = {}
        for e in self.environments:
            by_namespace.setdefault(e.namespace or self.namespace, []).append(e.name)
        for ns, names in by_namespace.items():
            if len(names) > 1 and not self.allowSharedNamespace:
                listed = ", ".join(names[:-1]) + f" and {names[-1]}"
                quantifier = "both" if len(names) == 2 else "all"
                raise ValueError(f"environments: {listed} {quantifier} render into namespace {ns!r}, "
                                 "where their objects (the same names) would overwrite each other: give each "
                                 "its own namespace, or set allowSharedNamespace: true if they run on "
                                 "separate clusters")
        models = {m.name for m in self.models}
        for m in self.models:
            for role, spec in (("", m), ("prefill", m.prefill), ("decode", m.decode)):
                pool = getattr(spec, "nodePool", None) if spec is not None else None
                if pool is not None and pool not in pools:
                    where = f"models[{m.name}]" + (f".{role}" if role else "")
                    raise ValueError(f"{where}.nodePool: unknown node pool {pool!r} "
                                     f"(known: {', '.join(sorted(pools))})")
        by_name = {m.name: m for m in self.models}
        for e in self.environments:
            for name, ov in e.overrides.items():
                if name not in models:
                    raise ValueError(f"environments[{e.name}].overrides: unknown model {name!r}")
                # checked here too (not only when rendering the environment) so a bad override fails
                # at load time
                where = f"environments[{e.name}].overrides.{name}"
                if by_name[name].disaggregated and ov.replicas is not None:
                    raise ValueError(f"{where}.replicas: a disaggregated model takes prefill/decode, "
                                     f"not replicas")
                if not by_name[name].disaggregated and (ov.prefill or ov.decode):
                    raise ValueError(f"{where}: an aggregated model takes replicas, not prefill/decode")
                for role in ("prefill", "decode"):
                    pool = getattr(getattr(ov, role), "nodePool", None)
                    if pool is not None and pool not in pools:
                        raise ValueError(f"{where}.{role}.nodePool: unknown node pool {pool!r}")
        return self

    def pool(self, name: str) -> NodePool:
        return next(p for p in self.nodePools if p.name == name)

    def model(self, name: str) -> ModelSpec:
        for m in self.models:
            if m.name == name:
                return m
        raise InvalidInput(f"unknown model {name!r} (known: {', '.join(m.name for m in self.models)})",
                           field="model")

    def environment(self, name: str) -> Environment:
        for e in self.environments:
            if e.name == name:
                return e
        raise InvalidInput(f"unknown environment {name!r} "
                           f"(known: {', '.join(e.name for e in self.environments)})", field="env")

    def for_environment(self, model: str, env: str) -> ModelSpec:
        """The model as it runs in ``env``: the environment's overrides applied. The LocalQueue is the
        override's, else the environment's, else the model's (a queue is a cluster's, not a model's)."""
        spec = self.model(model)
        environment = self.environment(env)
        if environment.queue is not None:
            spec = spec.model_copy(update={"queue": environment.queue})
        ov = environment.overrides.get(model)
        if ov is None:
            return spec
        update = {k: getattr(ov, k) for k in ov.model_fields_set if getattr(ov, k) is not None}
        where = f"environments[{env}].overrides.{model}"
        if spec.disaggregated and "replicas" in update:
            raise InvalidInput("a disaggregated model takes prefill/decode, not replicas", field=where)
        if not spec.disaggregated and ({"prefill", "decode"} & update.keys()):
            raise InvalidInput("an aggregated model takes replicas, not prefill/decode", field=where)
        for key in ("prefill", "decode", "rollout"):
            if key in update:
                # An override changes only the keys it sets: a role keeps its nodePool and maxModelLen
                # (so it is sized alike everywhere), a rollout its budgets when only stages change.
                base, ovr = getattr(spec, key), update[key]
                update[key] = base.model_copy(update={k: getattr(ovr, k) for k in ovr.model_fields_set})
        return spec.model_copy(update=update)


_NAMED_LISTS = ("nodePools", "models", "environments", "env")
_PLAIN_NAME = re.compile(r"^[A-Za-z0-9_.\-]{1,64}\Z")
_PATH_PREFIX = re.compile(r"^([A-Za-z][\w.\-]*(\[[^\]]+\])?[\w.\-\[\]]*): (.+)\Z", re.DOTALL)


def _loc(err: ErrorDetails, data: Any = None) -> str:
    """The error's field path; items of the named lists are spelled by name (``models[llama-8b]``)."""
    out = ""
    parent: Any = None
    node: Any = data
    for part in err["loc"]:
        if isinstance(part, int):
            item = node[part] if isinstance(node, list) and part < len(node) else None
            name = item.get("name") if isinstance(item, dict) else None
            # a name is only spelled out when it is a plain token: a hostile one (newlines, brackets)
            # would break the one-line error, so the index stands in for it
            named = parent in _NAMED_LISTS and isinstance(name, str) and _PLAIN_NAME.match(name)
            out += f"[{name}]" if named else f"[{part}]"
            node, parent = item, None
        elif part in ("int", "str", "function-after[_v_name()]") or "[" in str(part):
            continue  # union-member and validator tags, not fields
        else:
            out += ("." if out else "") + str(part)
            node = node.get(part) if isinstance(node, dict) else None
            parent = part
    return out


def parse_catalog(data: Any, source: str = "catalog") -> Catalog:
    """Validate an already-parsed catalog document."""
    if not isinstance(data, dict):
        raise InvalidInput("the catalog must be a YAML mapping", source=source)
    try:
        return Catalog.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        msg = str(err.get("msg", "invalid")).removeprefix("Value error, ")
        where = _loc(err, data)
        if not where:  # cross-reference checks put the path in front of the message
            m = _PATH_PREFIX.match(msg)
            if m:
                where, msg = m.group(1), m.group(3)
        raise InvalidInput(msg, field=where, source=source) from None


def load_catalog(path: str | Path) -> Catalog:
    """Read and validate a catalog file (YAML); every problem is an InvalidInput naming the field."""
    docs = load_yaml_documents(Path(path))
    if len(docs) != 1:
        raise InvalidInput(f"expected one YAML document, found {len(docs)}", source=str(path))
    return parse_catalog(docs[0], source=str(path))

