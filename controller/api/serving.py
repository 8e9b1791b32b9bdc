"""Where a leader pod's engine serves HTTP: one rule for the embedded cluster's stand-in engine and
for ``lwsflow smoke`` (so both agree with the manifest, as a real engine and a real client would).

The engine's own command line decides (``--port N`` / ``--port=N`` in the first container's command
and args, shell scripts included: vLLM's multi-node leader runs ``sh -c "... vllm serve ... --port
N"``); else the container port named ``http``, else the container's first port; else lwsflow's
``lwsflow.io/serving-port`` annotation; else the engine's default (SGLang 30000, vLLM 8000).
Probes and Services name ports by number or by container port name: :func:`resolve_port`.
"""

from __future__ import annotations

import shlex

from lwsflow.controller.api import labels
from lwsflow.controller.api.wire import Obj

VLLM_DEFAULT_PORT = 8000
SGLANG_DEFAULT_PORT = 30000


def _words(container: Obj) -> list[str]:
    out: list[str] = []
    for item in [*(container.get("command") or []), *(container.get("args") or [])]:
        text = str(item)
        try:
            out += shlex.split(text) if any(c.isspace() for c in text) else [text]
        except ValueError:  # an unbalanced quote: not a script we can read
            out.append(text)
    return out


def _port_flag(words: list[str], flag: str = "--port") -> int | None:
    for i, w in enumerate(words):
        value = words[i + 1] if w == flag and i + 1 < len(words) else (
            w.partition("=")[2] if w.startswith(flag + "=") else None)
        if value is not None and value.isdigit() and 0 < int(value) < 65536:
            return int(value)
    return None


def serving_port(pod_spec: Obj, annotations: dict[str, str] | None = None) -> int:
    """The HTTP port of the engine in ``pod_spec``'s first container (see module doc for the order)."""
    containers = pod_spec.get("containers") or [{}]
    first = containers[0] or {}
    words = _words(first)
    flag = _port_flag(words)
    if flag is not None:
        return flag
    ports = [p for p in first.get("ports") or [] if isinstance(p.get("containerPort"), int)]
    named = [p for p in ports if p.get("name") == "http"]
    if named or ports:
        return int((named or ports)[0]["containerPort"])
    ann = (annotations or {}).get(labels.SERVING_PORT)
    if ann and str(ann).isdigit():
        return int(ann)
    return SGLANG_DEFAULT_PORT if any("sglang" in w for w in words) else VLLM_DEFAULT_PORT


def resolve_port(pod_spec: Obj, port: int | str | None) -> int | None:
    """A probe's or a Service targetPort's port as a number: a name is looked up in the containers'
    ports (as the kubelet and kube-proxy do); None when the name matches no container port."""
    if isinstance(port, int):
        return port
    if isinstance(port, str) and port.isdigit():
        return int(port)
    for c in pod_spec.get("containers") or []:
        for p in c.get("ports") or []:
            if p.get("name") == port and isinstance(p.get("containerPort"), int):
                return int(p["containerPort"])
    return None


ROUTING_SIDECAR_DEFAULTS = (8000, 8200)  # llm-d-routing-sidecar's --port and --vllm-port defaults


def routing_sidecar_ports(pod_spec: Obj) -> tuple[int, int] | None:
    """(listen port, engine port) of llm-d's routing sidecar in ``pod_spec``, or None without one.

    The sidecar is the container (native sidecar or not) named ``routing-proxy``, or whose image is
    ``llm-d-routing-sidecar``, or which takes ``--vllm-port``; its ``--port`` and ``--vllm-port`` flags
    (defaults 8000 and 8200) say where it listens and where the engine it fronts serves.
    """
    for c in [*(pod_spec.get("initContainers") or []), *(pod_spec.get("containers") or [])]:
        words = _words(c)
        engine = _port_flag(words, "--vllm-port")
        if engine is None and c.get("name") != "routing-proxy" and "llm-d-routing-sidecar" not in str(
                c.get("image", "")):
            continue
        listen = _port_flag(words) or ROUTING_SIDECAR_DEFAULTS[0]
        return listen, engine or ROUTING_SIDECAR_DEFAULTS[1]
    return None
