"""A value of the wrong JSON type in a custom resource (``replicas: "three"``), answered as a real
cluster answers it. kube-apiserver stores custom resources untyped, so the type error surfaces where
something first decodes the object into types:

* a server-side apply builds a typed object from the patch first (structured-merge-diff) and fails
  with 500 ``failed to create typed patch object (NS/NAME; GROUP/VERSION, Kind=KIND): .spec.replicas:
  expected numeric (int or float), got string`` (every kind with a schema);
* any other write of a LeaderWorkerSet reaches upstream's mutating webhook, which decodes it into
  its Go types and denies it: 400 ``admission webhook "mleaderworkerset.kb.io" denied the request:
  json: cannot unmarshal string into Go struct field LeaderWorkerSetSpec.spec.replicas of type
  int32`` (the first error in the order of the JSON the API server sends: keys sorted);
* other kinds (a DisaggregatedSet has a validating webhook only) get the schema's 422.

Where the Go field's type is not known here (deep in a pod template), the write falls through to
the schema's 422, as before (docs/embedded-cluster.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lwsflow.controller.errors import ApiError
from lwsflow.sim import kinds

LWS_WEBHOOK = "mleaderworkerset.kb.io"

# Go struct type (package v1, upstream's API or core/v1) of the objects along a LeaderWorkerSet,
# by schema path (list items as [*]): what the decoder names in "Go struct field TYPE.path"
_TEMPLATE = {"": "PodTemplateSpec", ".metadata": "ObjectMeta", ".spec": "PodSpec",
             ".spec.containers[*]": "Container", ".spec.initContainers[*]": "Container",
             ".spec.containers[*].resources": "ResourceRequirements",
             ".spec.containers[*].ports[*]": "ContainerPort", ".spec.containers[*].env[*]": "EnvVar",
             ".spec.tolerations[*]": "Toleration"}
_STRUCTS = {
    "": "LeaderWorkerSet", "metadata": "ObjectMeta", "spec": "LeaderWorkerSetSpec",
    "spec.leaderWorkerTemplate": "LeaderWorkerTemplate",
    "spec.leaderWorkerTemplate.subGroupPolicy": "SubGroupPolicy",
    "spec.leaderWorkerTemplate.volumeClaimTemplates[*]": "PersistentVolumeClaim",
    "spec.leaderWorkerTemplate.persistentVolumeClaimRetentionPolicy":
        "StatefulSetPersistentVolumeClaimRetentionPolicy",
    "spec.rolloutStrategy": "RolloutStrategy",
    "spec.rolloutStrategy.rollingUpdateConfiguration": "RollingUpdateConfiguration",
    "spec.networkConfig": "NetworkConfig",
    **{f"spec.leaderWorkerTemplate.{t}{k}": v for t in ("leaderTemplate", "workerTemplate")
       for k, v in _TEMPLATE.items()},
}
# string fields of a named Go type (an enum)
_NAMED = {"spec.startupPolicy": "StartupPolicyType",
          "spec.leaderWorkerTemplate.restartPolicy": "RestartPolicyType",
          "spec.rolloutStrategy.type": "RolloutStrategyType",
          "spec.networkConfig.subdomainPolicy": "SubdomainPolicy",
          "spec.leaderWorkerTemplate.subGroupPolicy.subGroupPolicyType": "SubGroupPolicyType"}


@dataclass(frozen=True)
class Mismatch:
    path: tuple[str | int, ...]  # keys and list indexes from the root
    schema_path: str  # dotted, list items as [*]
    value: Any
    schema: dict[str, Any]
    typed_path: str  # structured-merge-diff's: .spec.containers[name="x"].image


class _Status(ApiError):
    """An error Status without a reason, as the API server writes a webhook's denial or an error
    it did not classify (reason omitted)."""

    def __init__(self, status: int, message: str) -> None:
        self.status = status
        self.reason = ""
        super().__init__(message)

    def to_status(self) -> dict[str, Any]:
        body = super().to_status()
        del body["reason"]
        return body


def mismatches(obj: Any, schema: dict[str, Any]) -> list[Mismatch]:
    """Values whose JSON type the schema does not allow, in the order of sorted keys (nulls and
    int-or-string / preserve-unknown-fields nodes are not type errors of a decoder)."""
    out: list[Mismatch] = []

    def walk(value: Any, node: dict[str, Any], path: tuple[str | int, ...], spath: str, tpath: str) -> None:
        if value is None or node.get("x-kubernetes-int-or-string") or "anyOf" in node:
            return
        want = node.get("type")
        if want and not _is(value, want):
            out.append(Mismatch(path, spath, value, node, tpath))
            return
        if isinstance(value, dict):
            props = node.get("properties") or {}
            extra = node.get("additionalProperties")
            for key in sorted(value):
                sub = props.get(key) or (extra if isinstance(extra, dict) else None)
                if sub is not None:
                    walk(value[key], sub, (*path, key), f"{spath}.{key}" if spath else key, f"{tpath}.{key}")
        elif isinstance(value, list) and isinstance(node.get("items"), dict):
            keys = node.get("x-kubernetes-list-map-keys") or []
            for i, item in enumerate(value):
                sel = ",".join(f'{k}="{item.get(k)}"' for k in keys if isinstance(item, dict)) if keys else ""
                walk(item, node["items"], (*path, i), f"{spath}[*]", f"{tpath}[{sel or i}]")

    walk(obj, schema, (), "", "")
    return out


def _is(value: Any, want: str) -> bool:
    if want == "integer":
        return (isinstance(value, int) and not isinstance(value, bool)) or (
            isinstance(value, float) and value.is_integer())
    if want == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if want == "string":
        return isinstance(value, str)
    if want == "boolean":
        return isinstance(value, bool)
    if want == "array":
        return isinstance(value, list)
    if want == "object":
        return isinstance(value, dict)
    return True


def typed_patch_error(rtype: kinds.ResourceType, applied: dict[str, Any],
                      schema: dict[str, Any]) -> ApiError | None:
    """The 500 of a server-side apply whose patch does not fit the schema's types (no reason: the
    API server did not classify the error). The object is named as the patch names it."""
    found = [m for m in mismatches(applied, schema) if m.path[:1] != ("status",)]
    if not found:
        return None
    lines = [f"{m.typed_path}: {_smd_message(m)}" for m in found]
    text = lines[0] if len(lines) == 1 else "errors:\n  " + "\n  ".join(lines)
    meta: dict[str, Any] = applied["metadata"] if isinstance(applied.get("metadata"), dict) else {}
    group_version = rtype.api_version if rtype.group else f"/{rtype.api_version}"
    return _Status(500, f"failed to create typed patch object ({meta.get('namespace') or ''}/"
                        f"{meta.get('name') or ''}; {group_version}, Kind={rtype.kind}): {text}")


def webhook_decode_error(rtype: kinds.ResourceType, obj: dict[str, Any],
                         schema: dict[str, Any]) -> ApiError | None:
    """The 400 of upstream's LeaderWorkerSet mutating webhook failing to decode the object (None for
    other kinds, or where the Go type of the field is not known here)."""
    if rtype.key != kinds.LWS.key:
        return None
    found = [m for m in mismatches(obj, schema) if m.path[:1] != ("status",)]
    if not found:
        return None
    m = found[0]
    fields = [p for p in m.path if isinstance(p, str)]
    parent = m.schema_path.rsplit(".", 1)[0] if "." in m.schema_path else ""
    struct, go_type = _STRUCTS.get(parent), _go_type(m)
    if struct is None or go_type is None:
        return None
    got = _json_kind(m.value)
    return _Status(400, f'admission webhook "{LWS_WEBHOOK}" denied the request: json: cannot unmarshal '
                        f"{got} into Go struct field {struct}.{'.'.join(fields)} of type {go_type}")


def _go_type(m: Mismatch) -> str | None:
    want = m.schema.get("type")
    if want == "integer":
        return str(m.schema.get("format") or "int64")
    if want == "number":
        return "float64"
    if want == "boolean":
        return "bool"
    if want == "string":
        named = _NAMED.get(m.schema_path)
        return f"v1.{named}" if named else "string"
    if want == "object":
        named = _STRUCTS.get(m.schema_path)
        return f"v1.{named}" if named else None
    if want == "array":
        named = _STRUCTS.get(f"{m.schema_path}[*]")
        return f"[]v1.{named}" if named else None
    return None


def _json_kind(value: Any) -> str:
    """encoding/json's word for the JSON value it could not store (UnmarshalTypeError.Value)."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, float) and not value.is_integer():
        return f"number {value!r}"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _smd_message(m: Mismatch) -> str:
    """structured-merge-diff's words for a value its schema type does not take (typed/helpers.go)."""
    want, v = m.schema.get("type"), m.value
    go = _go_repr(v)
    if want in ("integer", "number"):
        return f"expected numeric (int or float), got {_go_type_name(v)}"
    if want == "string":
        return f"expected string, got &value.valueUnstructured{{Value:{go}}}"
    if want == "boolean":
        return f"expected boolean, got &{{{go}}}"
    if want == "object":
        return f"expected map, got &{{{go}}}"
    return f"expected list, got &{{{go}}}"


def _go_type_name(v: Any) -> str:
    """Go's %T of a decoded JSON value."""
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, int):
        return "int64"
    if isinstance(v, float):
        return "float64"
    if isinstance(v, str):
        return "string"
    return "[]interface {}" if isinstance(v, list) else "map[string]interface {}"


def _go_repr(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return v
    return str(v)
