"""Small readers over wire-format pods and templates shared by the simulator's controllers."""

from __future__ import annotations

import functools
import re

from lwsflow.controller.api import labels as L

_CPU = re.compile(r"^([0-9.]+)(m?)$")
_MEM_UNITS = {
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "K": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "k": 10**3,
}
# longest suffix first, so "Gi" is tried before "G" (sorted once, not per quantity parsed)
_MEM_SUFFIXES = sorted(_MEM_UNITS.items(), key=lambda kv: -len(kv[0]))


def cpu_millis(q: object) -> int:
    m = _CPU.match(str(q).strip())
    if not m:
        return 0
    return int(float(m.group(1)) * (1 if m.group(2) else 1000))


def mem_bytes(q: object) -> int:
    s = str(q).strip()
    for unit, mult in _MEM_SUFFIXES:
        if s.endswith(unit):
            try:
                return int(float(s[: -len(unit)]) * mult)
            except ValueError:
                return 0
    try:
        return int(float(s))
    except ValueError:
        return 0


def requests(pod_spec: dict) -> tuple[int, int, int]:
    """(GPUs, CPU millis, memory bytes) a pod spec asks for; limits stand in for missing requests."""
    gpu = cpu = mem = 0
    for c in pod_spec.get("containers") or []:
        res = c.get("resources") or {}
        req = {**(res.get("limits") or {}), **(res.get("requests") or {})}
        gpu += int(str(req.get(L.GPU_RESOURCE, 0)) or 0)
        cpu += cpu_millis(req.get("cpu", 0))
        mem += mem_bytes(req.get("memory", 0))
    return gpu, cpu, mem


def is_ready(pod: dict | None) -> bool:
    if not pod:
        return False
    st = pod.get("status") or {}
    if st.get("phase") != "Running":
        return False
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in st.get("conditions") or ())


def is_terminating(pod: dict) -> bool:
    return bool(pod.get("metadata", {}).get("deletionTimestamp"))


def restart_count(pod: dict) -> int:
    st = pod.get("status") or {}
    return sum(
        int(c.get("restartCount", 0))
        for c in (st.get("containerStatuses") or []) + (st.get("initContainerStatuses") or [])
    )


def owner_uid(obj: dict) -> str | None:
    for ref in obj.get("metadata", {}).get("ownerReferences") or ():
        if ref.get("controller"):
            return ref.get("uid")
    refs = obj.get("metadata", {}).get("ownerReferences") or ()
    return refs[0].get("uid") if refs else None


def owner_ref(obj: dict, *, block: bool = True) -> dict:
    return {
        "apiVersion": obj["apiVersion"],
        "kind": obj["kind"],
        "name": obj["metadata"]["name"],
        "uid": obj["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": block,
    }


def condition(obj: dict, ctype: str) -> dict | None:
    for c in (obj.get("status") or {}).get("conditions") or ():
        if c.get("type") == ctype:
            return c
    return None


def label(obj: dict, key: str, default: str = "") -> str:
    return (obj.get("metadata", {}).get("labels") or {}).get(key, default)


def annotation(obj: dict, key: str, default: str = "") -> str:
    return (obj.get("metadata", {}).get("annotations") or {}).get(key, default)


_SAFE = "bcdfghjklmnpqrstvwxz2456789"  # k8s rand.SafeEncodeString alphabet (no vowels, no 0/1/3)


def fnv32a(data: bytes) -> int:
    h = 0x811C9DC5
    for b in data:
        h = ((h ^ b) * 0x01000193) & 0xFFFFFFFF
    return h


def safe_hash(obj: object) -> str:
    """FNV-32a of the canonical JSON, safe-encoded like Kubernetes' ComputeHash."""
    import json

    return _safe_hash_text(json.dumps(obj, sort_keys=True, separators=(",", ":")))


@functools.lru_cache(maxsize=4096)
def _safe_hash_text(text: str) -> str:
    return "".join(_SAFE[ord(d) % len(_SAFE)] for d in str(fnv32a(text.encode())))
