"""DisaggregatedSet admission-webhook rules (disaggregatedset_webhook.go L67-L252; lws-semantics.md f).

Role names (DNS labels), the 2..10 role count, uniqueness of names and ``type: RollingUpdate`` are
schema rules and reported by the schema check; this module adds what the schema cannot say.
"""

from __future__ import annotations

from typing import Any

from lwsflow.controller.api.common import as_dict, as_int
from lwsflow.controller.api.labels import EXCLUSIVE_TOPOLOGY, SUBGROUP_EXCLUSIVE_TOPOLOGY
from lwsflow.controller.api.lws_webhook import (
    RUC_PATH,
    budget_stalls,
    dns1035_errors,
    ruc_of,
    spec_errors,
)
from lwsflow.controller.errors import FieldError

# <ds>-<slice>-<rev8>-<role>-prv must be a DNS-1035 label: 3 dashes, 8 hash characters, "-prv"
_SERVICE_OVERHEAD = 3 + 8 + 4


def service_name_length(ds_name: str, role_name: str, slices: int) -> int:
    """Length of the longest generated per-role Service name (``<lws>-prv``)."""
    slice_digits = len(str(max(slices, 1) - 1))
    return len(ds_name) + len(role_name) + _SERVICE_OVERHEAD + slice_digits


def ds_errors(obj: dict[str, Any]) -> list[FieldError]:
    """DS validating webhook on a defaulted DisaggregatedSet."""
    meta = as_dict(obj.get("metadata"))
    out: list[FieldError] = []
    name = meta.get("name")
    if name or not meta.get("generateName"):
        out.extend(dns1035_errors(name, "metadata.name"))  # it prefixes child LWS and Service names
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return out
    slices = as_int(spec.get("slices")) or 1
    placement = as_dict(spec.get("placementPolicy"))
    placed = placement.get("type") not in (None, "None")
    if placed and not placement.get("topology"):
        out.append(FieldError("spec.placementPolicy.topology",
                              f"Required value: placementPolicy type {placement.get('type')} needs a "
                              "topology key"))
    roles_v = spec.get("roles")
    roles: list[Any] = roles_v if isinstance(roles_v, list) else []
    for i, role in enumerate(roles):
        if isinstance(role, dict):
            out.extend(_role_errors(role, f"spec.roles[{i}]", name, slices, placed))
    return out


def _role_errors(role: dict[str, Any], path: str, ds_name: Any, slices: int,
                 placed: bool) -> list[FieldError]:
    out: list[FieldError] = []
    role_name = role.get("name")
    if isinstance(ds_name, str) and isinstance(role_name, str):
        length = service_name_length(ds_name, role_name, slices)
        if length > 63:
            out.append(FieldError(f"{path}.name",
                                  f'Invalid value: "{role_name}": DisaggregatedSet name "{ds_name}" plus '
                                  f"role name make generated Service names of {length} characters (max 63)"))
    if as_dict(role.get("scaling")).get("mode") == "External" and slices > 1:
        out.append(FieldError(f"{path}.scaling.mode",
                              f'Invalid value: "External": External scaling cannot be combined with '
                              f"slices > 1 (slices is {slices})"))
    if placed:
        annotations = as_dict(as_dict(role.get("metadata")).get("annotations"))
        for key in (EXCLUSIVE_TOPOLOGY, SUBGROUP_EXCLUSIVE_TOPOLOGY):
            if key in annotations:
                out.append(FieldError(f"{path}.metadata.annotations[{key}]",
                                      "Forbidden: exclusive-topology annotations cannot be combined with "
                                      "spec.placementPolicy"))
    spec = role.get("spec")
    if not isinstance(spec, dict):
        return out
    spec_path = f"{path}.spec"
    out.extend(spec_errors(spec, spec_path, in_ds=True))
    ruc = ruc_of(spec)
    ruc_path = f"{spec_path}.{RUC_PATH}"
    partition = as_int(ruc.get("partition"))
    if partition:
        out.append(FieldError(f"{ruc_path}.partition",
                              f"Invalid value: {partition}: partition is not supported in a "
                              "DisaggregatedSet role (must be unset or 0)"))
    replicas = as_int(spec.get("replicas"))
    if ruc and replicas and budget_stalls(ruc, replicas):
        out.append(FieldError(f"{ruc_path}.maxUnavailable",
                              "Invalid value: 0: maxSurge and maxUnavailable must not both be 0 when "
                              "the role's replicas > 0"))
    return out
