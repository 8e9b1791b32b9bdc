"""Engine launch commands: vLLM and SGLang, single-pod, multi-node (LWS) and prefill/decode roles.

Multi-node wiring follows the upstream LWS examples: the pod webhook injects ``LWS_LEADER_ADDRESS``,
``LWS_GROUP_SIZE`` and ``LWS_WORKER_INDEX`` into every container, and Kubernetes expands ``$(VAR)``
references in ``command``/``args`` before the process starts, so one template serves every group.

* vLLM (``docs/examples/vllm/GPU/lws.yaml`` upstream): the leader starts the Ray head with the
  image's ``multi-node-serving.sh``, waits until ``$(LWS_GROUP_SIZE)`` nodes joined, then runs
  ``vllm serve`` with ``--tensor-parallel-size`` and ``--pipeline-parallel-size`` on the Ray backend;
  workers join the leader's Ray cluster at ``$(LWS_LEADER_ADDRESS)``. Only the leader serves HTTP.
* SGLang: every pod runs the same ``sglang.launch_server`` with ``--dist-init-addr
  $(LWS_LEADER_ADDRESS):20000 --nnodes $(LWS_GROUP_SIZE) --node-rank $(LWS_WORKER_INDEX)``; rank 0
  (the leader) serves HTTP.
* Prefill/decode (shared/docs/smoke-reference.md section 4): vLLM roles carry
  ``--kv-transfer-config`` with the NixlConnector as ``kv_producer`` / ``kv_consumer`` and the NIXL
  side channel on the pod IP (downward API) port 5600; SGLang roles carry ``--disaggregation-mode``
  and the prefill bootstrap server on port 8998.
* ``dtype: fp8`` from a 16-bit checkpoint (the catalog's ``checkpointDtype``, default 16-bit): both
  engines get ``--quantization fp8`` (vLLM's online dynamic FP8, SGLang's online quantization), so
  the weights load at the 1 byte per parameter the sizing assumed. A pre-quantized fp8 checkpoint
  gets no flag: the engines read its quantization config (SGLang's docs: do not add both).
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, field
from typing import Any

from lwsflow.components.catalog import ModelSpec
from lwsflow.components.sizing import RoleSizing
from lwsflow.controller.api import labels as L

VLLM_MULTINODE_SCRIPT = "/vllm-workspace/examples/online_serving/multi-node-serving.sh"
NIXL_SIDE_CHANNEL_PORT = 5600
SGLANG_BOOTSTRAP_PORT = 8998
SGLANG_DIST_PORT = 20000
HEALTH_PATH = {"vllm": "/health", "sglang": "/health"}
LEADER = f"$({L.ENV_LEADER_ADDRESS})"
GROUP_SIZE = f"$({L.ENV_GROUP_SIZE})"
WORKER_INDEX = f"$({L.ENV_WORKER_INDEX})"
_VLLM_DTYPE = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}


@dataclass(frozen=True)
class Launch:
    """What one engine container runs: command, args, extra env and the ports it listens on."""

    command: list[str]
    args: list[str]
    env: list[dict[str, Any]] = field(default_factory=list)
    ports: list[dict[str, Any]] = field(default_factory=list)
    serves_http: bool = True


def _port(name: str, number: int) -> dict[str, Any]:
    return {"name": name, "containerPort": number, "protocol": "TCP"}


def _vllm_args(spec: ModelSpec, rs: RoleSizing, port: int) -> list[str]:
    args = [spec.model, "--served-model-name", spec.model, "--port", str(port),
            "--tensor-parallel-size", str(rs.tp), "--pipeline-parallel-size", str(rs.pp),
            "--max-model-len", str(rs.max_model_len),
            "--gpu-memory-utilization", f"{spec.gpuMemoryUtilization:g}"]
    if spec.dtype in _VLLM_DTYPE:  # fp8/int8/int4 come from the checkpoint's quantization config
        args += ["--dtype", _VLLM_DTYPE[spec.dtype]]
    if spec.online_quantization:  # a 16-bit checkpoint sized as fp8: vLLM's online dynamic fp8
        args += ["--quantization", spec.online_quantization]
    if rs.role in ("prefill", "decode"):
        kv_role = "kv_producer" if rs.role == "prefill" else "kv_consumer"
        cfg = {"kv_connector": "NixlConnector", "kv_role": kv_role}
        args += ["--kv-transfer-config", json.dumps(cfg, separators=(",", ":"))]
    return args + list(spec.extraArgs)


def _vllm(spec: ModelSpec, rs: RoleSizing, leader: bool, port: int) -> Launch:
    env: list[dict[str, Any]] = []
    ports = [_port("http", port)] if leader else []
    if rs.role in ("prefill", "decode"):
        # NIXL handshakes on a side channel that must advertise an address peers can reach.
        env = [{"name": "VLLM_NIXL_SIDE_CHANNEL_HOST",
                "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "status.podIP"}}},
               {"name": "VLLM_NIXL_SIDE_CHANNEL_PORT", "value": str(NIXL_SIDE_CHANNEL_PORT)}]
        ports.append(_port("nixl", NIXL_SIDE_CHANNEL_PORT))
    if rs.size == 1:
        return Launch(command=["vllm", "serve"], args=_vllm_args(spec, rs, port), env=env, ports=ports)
    if not leader:
        script = f"bash {VLLM_MULTINODE_SCRIPT} worker --ray_address={LEADER}"
        return Launch(command=["/bin/sh", "-c"], args=[script], env=env, ports=ports, serves_http=False)
    serve = " ".join(shlex.quote(a) for a in [*_vllm_args(spec, rs, port), "--distributed-executor-backend",
                                               "ray"])
    script = (f"bash {VLLM_MULTINODE_SCRIPT} leader --ray_cluster_size={GROUP_SIZE} && "
              f"exec vllm serve {serve}")
    return Launch(command=["/bin/sh", "-c"], args=[script], env=env, ports=ports)


def _sglang(spec: ModelSpec, rs: RoleSizing, leader: bool, port: int) -> Launch:
    args = ["--model-path", spec.model, "--served-model-name", spec.model, "--host", "0.0.0.0",
            "--port", str(port), "--tp-size", str(rs.tp), "--context-length", str(rs.max_model_len),
            "--mem-fraction-static", f"{spec.gpuMemoryUtilization:g}"]
    if spec.online_quantization:  # SGLang's online quantization of a 16-bit checkpoint
        args += ["--quantization", spec.online_quantization]
    ports = [_port("http", port)] if leader else []
    if rs.pp > 1:  # pipeline stages within one pod too, when the catalog asks for them
        args += ["--pp-size", str(rs.pp)]
    if rs.size > 1:
        args += ["--dist-init-addr", f"{LEADER}:{SGLANG_DIST_PORT}",
                 "--nnodes", GROUP_SIZE, "--node-rank", WORKER_INDEX]
        if leader:
            ports.append(_port("dist", SGLANG_DIST_PORT))
    if rs.role in ("prefill", "decode"):
        args += ["--disaggregation-mode", rs.role]
        if rs.role == "prefill":
            args += ["--disaggregation-bootstrap-port", str(SGLANG_BOOTSTRAP_PORT)]
            if leader:
                ports.append(_port("bootstrap", SGLANG_BOOTSTRAP_PORT))
    return Launch(command=["python3", "-m", "sglang.launch_server"], args=args + list(spec.extraArgs),
                  ports=ports, serves_http=leader)


def launch(spec: ModelSpec, rs: RoleSizing, leader: bool, port: int | None = None) -> Launch:
    """The launch of the leader (``leader=True``, worker index 0) or a worker pod of one role;
    ``port``: where the engine serves HTTP (default the model's port; another one behind a sidecar)."""
    if spec.engine == "vllm":
        return _vllm(spec, rs, leader, port or spec.port)
    return _sglang(spec, rs, leader, port or spec.port)
