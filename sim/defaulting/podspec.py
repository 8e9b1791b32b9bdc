"""kube-apiserver's defaults of a pod spec, wherever one is embedded (a Pod, a StatefulSet's
template): SetDefaults_PodSpec, _Container, _Probe, _HTTPGetAction, the volume sources and the
declarative ``+default`` markers of k8s.io/api core/v1 (ports' protocol, gRPC probes' service), as
the generated defaulters walk them (pkg/apis/core/v1/defaults.go, zz_generated.defaults.go).

What only a Pod gets (requests copied from limits, ``enableServiceLinks``) is in ``pod.py``.
"""

from __future__ import annotations

import re
from typing import Any

from lwsflow.sim.defaulting.table import NIL, ZERO, Default, dicts, fill

POD_SPEC: tuple[Default, ...] = (
    ("dnsPolicy", "ClusterFirst", ZERO),
    ("restartPolicy", "Always", ZERO),
    ("securityContext", {}, NIL),
    ("terminationGracePeriodSeconds", 30, NIL),
    ("schedulerName", "default-scheduler", ZERO),
)
CONTAINER: tuple[Default, ...] = (
    ("terminationMessagePath", "/dev/termination-log", ZERO),
    ("terminationMessagePolicy", "File", ZERO),
    ("resources", {}, NIL),  # a struct, not a pointer: on the wire even when empty
)
PROBE: tuple[Default, ...] = (
    ("timeoutSeconds", 1, ZERO),
    ("periodSeconds", 10, ZERO),
    ("successThreshold", 1, ZERO),
    ("failureThreshold", 3, ZERO),
)
HTTP_GET: tuple[Default, ...] = (("path", "/", ZERO), ("scheme", "HTTP", ZERO))
GRPC: tuple[Default, ...] = (("service", "", NIL),)
PROTOCOL: tuple[Default, ...] = (("protocol", "TCP", ZERO),)
FIELD_REF: tuple[Default, ...] = (("apiVersion", "v1", ZERO),)
# volume sources with a file mode: 0644 (420) for all of them
MODE: tuple[Default, ...] = (("defaultMode", 420, NIL),)
TOKEN: tuple[Default, ...] = (("expirationSeconds", 3600, NIL),)
HOST_PATH: tuple[Default, ...] = (("type", "", NIL),)
_PROBES = ("livenessProbe", "readinessProbe", "startupProbe")
_HOOKS = ("postStart", "preStop")
_SOURCES = ("awsElasticBlockStore", "azureDisk", "azureFile", "cephfs", "cinder", "configMap", "csi",
            "downwardAPI", "emptyDir", "ephemeral", "fc", "flexVolume", "flocker", "gcePersistentDisk",
            "gitRepo", "glusterfs", "hostPath", "image", "iscsi", "nfs", "persistentVolumeClaim",
            "photonPersistentDisk", "portworxVolume", "projected", "quobyte", "rbd", "scaleIO", "secret",
            "storageos", "vsphereVolume")


def default_pod_spec(spec: object) -> None:
    """Default a pod spec in place (a non-dict is left for validation to name)."""
    if not isinstance(spec, dict):
        return
    fill(spec, POD_SPEC)
    # the v1 conversion keeps the deprecated ``serviceAccount`` equal to ``serviceAccountName``
    if spec.get("serviceAccountName"):
        spec["serviceAccount"] = spec["serviceAccountName"]
    elif spec.get("serviceAccount"):
        spec["serviceAccountName"] = spec["serviceAccount"]
    for c in (*dicts(spec, "initContainers"), *dicts(spec, "containers")):
        _container(c)
    for vol in dicts(spec, "volumes"):
        _volume(vol)


# the docker reference grammar (distribution/reference regexp.go) that parsers.ParseImageName
# applies: an image it cannot parse (``<image>`` in upstream's tensorrt example) has no tag, and
# SetDefaults_Container then chooses IfNotPresent, not Always
_HOST = r"(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)"
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_REFERENCE = re.compile(
    rf"(?:(?:{_HOST}(?:\.{_HOST})*|\[[0-9a-fA-F:.]+\])(?::[0-9]+)?/)?{_COMPONENT}(?:/{_COMPONENT})*"
    r"(?::[\w][\w.-]{0,127})?(?:@[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,})?")


def image_pull_policy(image: str) -> str:
    """``Always`` for a ``:latest`` or untagged image, ``IfNotPresent`` otherwise (a digest wins
    over a tag, as the image reference parser reads it; an unparsable reference has no tag)."""
    if not _REFERENCE.fullmatch(image):
        return "IfNotPresent"
    name = image.split("@", 1)[0]
    last = name.rsplit("/", 1)[-1]
    tag = last.split(":", 1)[1] if ":" in last else ""
    if "@" in image and not tag:
        return "IfNotPresent"
    return "Always" if tag in ("", "latest") else "IfNotPresent"


def _container(c: dict[str, Any]) -> None:
    if not c.get("imagePullPolicy"):
        c["imagePullPolicy"] = image_pull_policy(str(c.get("image") or ""))
    fill(c, CONTAINER)
    for port in dicts(c, "ports"):
        fill(port, PROTOCOL)
    for ref in dicts(c, "env", "valueFrom", "fieldRef"):
        fill(ref, FIELD_REF)
    for probe in (p for name in _PROBES for p in dicts(c, name)):
        fill(probe, PROBE)
        _handler(probe)
    for hook in (h for name in _HOOKS for h in dicts(c, "lifecycle", name)):
        _handler(hook)


def _handler(handler: dict[str, Any]) -> None:
    for get in dicts(handler, "httpGet"):
        fill(get, HTTP_GET)
    for grpc in dicts(handler, "grpc"):
        fill(grpc, GRPC)


def _volume(vol: dict[str, Any]) -> None:
    if not any(k in vol for k in _SOURCES):
        vol["emptyDir"] = {}  # SetDefaults_Volume: no source at all is an emptyDir
    for source in ("secret", "configMap", "downwardAPI", "projected"):
        for src in dicts(vol, source):
            fill(src, MODE)
    for ref in dicts(vol, "downwardAPI", "items", "fieldRef"):
        fill(ref, FIELD_REF)
    for ref in dicts(vol, "projected", "sources", "downwardAPI", "items", "fieldRef"):
        fill(ref, FIELD_REF)
    for token in dicts(vol, "projected", "sources", "serviceAccountToken"):
        fill(token, TOKEN)
    for host in dicts(vol, "hostPath"):
        fill(host, HOST_PATH)
