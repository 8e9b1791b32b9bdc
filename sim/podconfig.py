"""The Secrets and ConfigMaps a pod needs before its containers can start, checked as the kubelet does.

* Volumes (``secret``, ``configMap``, ``projected`` sources) are mounted before anything else: a
  missing object or a missing ``items`` key keeps the pod in ``ContainerCreating`` with a
  ``FailedMount`` event (``MountVolume.SetUp failed for volume "v" : secret "x" not found``). A
  missing PersistentVolumeClaim waits the same way (a real scheduler keeps such a pod Pending).
* Environment (``envFrom`` first, then ``env[].valueFrom``), per container when it is about to
  start, after its image pull: a missing object or key leaves the container waiting with reason
  ``CreateContainerConfigError`` and the kubelet's message (``secret "x" not found``,
  ``couldn't find key K in Secret ns/x``).

``optional: true`` skips a missing object or key in both places. The kubelet retries; here the pod is
retried when a Secret or ConfigMap of its namespace changes.
"""

from __future__ import annotations

from typing import Any

from lwsflow.sim.store import Store

_KINDS = {"secret": ("secrets", "Secret"), "configmap": ("configmaps", "ConfigMap")}


def _keys(obj: dict) -> set[str]:
    # a Secret's stringData is folded into data by the API server; read both for safety
    return {*(obj.get("data") or {}), *(obj.get("binaryData") or {}), *(obj.get("stringData") or {})}


def _get(store: Store, kind: str, ns: str, name: str) -> dict | None:
    return store.get_raw(_KINDS[kind][0], ns, name or "")


def volume_error(pod: dict, store: Store) -> tuple[str, str] | None:
    """(volume name, message) of the first volume that cannot be set up, or None."""
    ns = pod["metadata"].get("namespace", "default")
    for vol in (pod.get("spec") or {}).get("volumes") or ():
        sources: list[tuple[str, Any]] = []
        if vol.get("secret") is not None:
            sources.append(("secret", {**vol["secret"], "name": vol["secret"].get("secretName")}))
        if vol.get("configMap") is not None:
            sources.append(("configmap", vol["configMap"]))
        for src in ((vol.get("projected") or {}).get("sources") or ()):
            if src.get("secret") is not None:
                sources.append(("secret", src["secret"]))
            if src.get("configMap") is not None:
                sources.append(("configmap", src["configMap"]))
        for kind, ref in sources:
            msg = _volume_source_error(store, kind, ns, ref or {})
            if msg:
                return vol.get("name", ""), msg
        claim = (vol.get("persistentVolumeClaim") or {}).get("claimName")
        if claim is not None and store.get_raw("persistentvolumeclaims", ns, claim) is None:
            # a real scheduler leaves such a pod unschedulable with this message; here it waits to mount
            return vol.get("name", ""), f'persistentvolumeclaim "{claim}" not found'
    return None


def _volume_source_error(store: Store, kind: str, ns: str, ref: dict) -> str | None:
    optional = bool(ref.get("optional"))
    obj = _get(store, kind, ns, ref.get("name", ""))
    if obj is None:
        return None if optional else f'{kind} "{ref.get("name", "")}" not found'
    have = _keys(obj)
    for item in ref.get("items") or ():
        if item.get("key") not in have and not optional:
            what = "secret key" if kind == "secret" else "config key"
            prefix = "" if kind == "secret" else "configmap "
            return f"{prefix}references non-existent {what}: {item.get('key')}"
    return None


def container_config_errors(pod: dict, store: Store) -> dict[str, str]:
    """container name -> the CreateContainerConfigError message, for containers that cannot start."""
    ns = pod["metadata"].get("namespace", "default")
    spec = pod.get("spec") or {}
    out: dict[str, str] = {}
    for c in [*(spec.get("initContainers") or ()), *(spec.get("containers") or ())]:
        msg = _env_error(store, ns, c)
        if msg:
            out[c.get("name", "")] = msg
    return out


def _env_error(store: Store, ns: str, container: dict) -> str | None:
    for src in container.get("envFrom") or ():
        for kind, field in (("configmap", "configMapRef"), ("secret", "secretRef")):
            ref = src.get(field)
            if ref is None or ref.get("optional"):
                continue
            if _get(store, kind, ns, ref.get("name", "")) is None:
                return f'{kind} "{ref.get("name", "")}" not found'
    for env in container.get("env") or ():
        value_from = env.get("valueFrom") or {}
        for kind, field in (("configmap", "configMapKeyRef"), ("secret", "secretKeyRef")):
            ref = value_from.get(field)
            if ref is None or ref.get("optional"):
                continue
            obj = _get(store, kind, ns, ref.get("name", ""))
            if obj is None:
                return f'{kind} "{ref.get("name", "")}" not found'
            if ref.get("key") not in _keys(obj):
                return f"couldn't find key {ref.get('key')} in {_KINDS[kind][1]} {ns}/{ref.get('name', '')}"
    return None
