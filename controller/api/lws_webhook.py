"""LWS admission-webhook rules the CRD schema cannot express (lws-semantics.md section a).

Functions take an already defaulted object (as the validating webhook sees it) and return
``FieldError`` s with the exact field path. Values of the wrong type are left to the schema check:
each rule here looks only at values of the type it expects.
"""

from __future__ import annotations

import re
from typing import Any

from lwsflow.controller.api.common import as_dict, as_int
from lwsflow.controller.api.intstr import parse_percent, resolve
from lwsflow.controller.api.labels import SUBGROUP_EXCLUSIVE_TOPOLOGY
from lwsflow.controller.errors import FieldError

MAX_INT32 = 2**31 - 1
_DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?\Z")
RUC_PATH = "rolloutStrategy.rollingUpdateConfiguration"  # under a spec


def dns1035_errors(name: Any, path: str) -> list[FieldError]:
    """``validation.IsDNS1035Label``: lower-case alphanumerics and '-', starts with a letter, <= 63."""
    if not isinstance(name, str) or not name:
        return [FieldError(path, "Required value")]
    out = []
    if len(name) > 63:
        out.append(FieldError(path, f'Invalid value: "{name}": must be no more than 63 characters'))
    if not _DNS1035.match(name):
        out.append(FieldError(path, f'Invalid value: "{name}": a DNS-1035 label must consist of lower case '
                                    "alphanumeric characters or '-', start with an alphabetic character, "
                                    "and end with an alphanumeric character"))
    return out


def int_or_percent_errors(value: Any, path: str) -> list[FieldError]:
    """Non-negative int, or a percent string ``N%`` with N <= 100 (apps validation helpers)."""
    if value is None:
        return []
    if isinstance(value, str):
        pct = parse_percent(value)
        if pct is None:
            return [FieldError(path, f'Invalid value: "{value}": a valid percent string must be a numeric '
                                     "string followed by an ending '%' (e.g. '25%')")]
        if pct > 100:
            return [FieldError(path, f'Invalid value: "{value}": must not be greater than 100%')]
        return []
    n = as_int(value)
    if n is not None and n < 0:
        return [FieldError(path, f"Invalid value: {n}: must be greater than or equal to 0")]
    return []


def resolve_budget(ruc: dict[str, Any], key: str, replicas: int, *, round_up: bool,
                   default: int) -> int | None:
    """A rollingUpdateConfiguration budget resolved to groups; None when the value is invalid."""
    value = ruc.get(key)
    if value is not None and int_or_percent_errors(value, ""):
        return None
    if value is not None and not isinstance(value, int | str):
        return None
    try:
        return resolve(value, replicas, round_up=round_up, default=default)
    except ValueError:
        return None


def ruc_of(spec: dict[str, Any]) -> dict[str, Any]:
    """The spec's ``rolloutStrategy.rollingUpdateConfiguration`` ({} when absent or malformed)."""
    return as_dict(as_dict(spec.get("rolloutStrategy")).get("rollingUpdateConfiguration"))


def budget_stalls(ruc: dict[str, Any], replicas: int) -> bool:
    """maxSurge and maxUnavailable both resolve to 0 groups: the rolling update could never move."""
    surge = resolve_budget(ruc, "maxSurge", replicas, round_up=True, default=0)
    unavailable = resolve_budget(ruc, "maxUnavailable", replicas, round_up=False, default=1)
    return surge == 0 and unavailable == 0


def spec_errors(spec: dict[str, Any], path: str, *, in_ds: bool = False) -> list[FieldError]:
    """Rules on one LeaderWorkerSetSpec (an LWS ``spec`` or a DS ``roles[i].spec``)."""
    out: list[FieldError] = []
    lwt = as_dict(spec.get("leaderWorkerTemplate"))
    lwt_path = f"{path}.leaderWorkerTemplate"
    replicas, size = as_int(spec.get("replicas")), as_int(lwt.get("size"))
    # the 0..1,000,000 range of replicas is in the CRD schema; checking it twice would print twice
    if size is not None and size < 1:
        out.append(FieldError(f"{lwt_path}.size",
                              f"Invalid value: {size}: must be greater than or equal to 1"))
    if replicas is not None and size is not None and replicas * size > MAX_INT32:
        out.append(FieldError(f"{path}.replicas", f"Invalid value: {replicas}: the product of replicas and "
                                                  f"size ({replicas * size}) must not exceed {MAX_INT32}"))

    ruc = ruc_of(spec)
    ruc_path = f"{path}.{RUC_PATH}"
    partition = as_int(ruc.get("partition"))
    if partition is not None and partition < 0:
        out.append(FieldError(f"{ruc_path}.partition",
                              f"Invalid value: {partition}: must be greater than or equal to 0"))
    for key in ("maxUnavailable", "maxSurge"):
        out.extend(int_or_percent_errors(ruc.get(key), f"{ruc_path}.{key}"))
    # the DS webhook has its own, per-role form of this rule
    if ruc and not in_ds and replicas and budget_stalls(ruc, replicas):
        out.append(FieldError(f"{ruc_path}.maxUnavailable",
                              "Invalid value: 0: must not be 0 when maxSurge is 0"))

    out.extend(_subgroup_errors(lwt, lwt_path, size))
    out.extend(_v1_extension_errors(spec, lwt, path))
    return out


def _subgroup_errors(lwt: dict[str, Any], lwt_path: str, size: int | None) -> list[FieldError]:
    """validateUpdateSubGroupPolicy (leaderworkerset_webhook.go): every rule that fails is reported,
    under upstream's field path, which spells the Go field (``SubGroupPolicy.subGroupSize``)."""
    sgp = lwt.get("subGroupPolicy")
    if not isinstance(sgp, dict):
        return []
    sg_path = f"{lwt_path}.SubGroupPolicy.subGroupSize"
    sg = as_int(sgp.get("subGroupSize"))
    if "subGroupSize" not in sgp or sgp["subGroupSize"] is None:
        return [FieldError(sg_path, "Required value")]
    if sg is None:
        return []  # wrong type: the schema check reports it
    if sg < 1:  # upstream goes on to divide by it; nothing else is checked here
        return [FieldError(sg_path, f"Invalid value: {sg}: subGroupSize must be equal or greater than 1")]
    if size is None or size < 1:
        return []
    out = []
    if size % sg and (size - 1) % sg:
        out.append(FieldError(sg_path, f"Invalid value: {sg}: size or size - 1 must be divisible by "
                                       "subGroupSize"))
    if size < sg:
        out.append(FieldError(sg_path, f"Invalid value: {sg}: subGroupSize cannot be larger than size"))
    if sgp.get("subGroupPolicyType") == "LeaderExcluded" and (size - 1) % sg:
        out.append(FieldError(sg_path, f"Invalid value: {sg}: size-1 must be divisible by subGroupSize "
                                       "when using LeaderExcluded"))
    return out


def _v1_extension_errors(spec: dict[str, Any], lwt: dict[str, Any], path: str) -> list[FieldError]:
    """Type checks for the LWS v1.0 fields the pinned CRD lacks (accepted, never required)."""
    out: list[FieldError] = []
    gi = spec.get("groupIdentity")
    if gi is not None and gi not in ("Ordinal", "Hash"):
        out.append(FieldError(f"{path}.groupIdentity",
                              f'Unsupported value: "{gi}": supported values: "Ordinal", "Hash"'))
    mgr = lwt.get("maxGroupRestarts")
    if mgr is not None and (as_int(mgr) is None or mgr < 0):
        out.append(FieldError(f"{path}.leaderWorkerTemplate.maxGroupRestarts",
                              f"Invalid value: {mgr!r}: must be an integer >= 0"))
    rb = lwt.get("restartBackoff")
    if rb is not None and not isinstance(rb, str | dict):
        out.append(FieldError(f"{path}.leaderWorkerTemplate.restartBackoff",
                              f"Invalid value: {rb!r}: must be a duration string or an object"))
    return out


def lws_errors(obj: dict[str, Any]) -> list[FieldError]:
    """LWS validating webhook (leaderworkerset_webhook.go generalValidate) on a defaulted LWS."""
    meta = as_dict(obj.get("metadata"))
    out: list[FieldError] = []
    if meta.get("name") or not meta.get("generateName"):
        # the name also names the headless Service, so it must be a DNS-1035 label
        out.extend(dns1035_errors(meta.get("name"), "metadata.name"))
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return out
    out.extend(spec_errors(spec, "spec"))
    annotations = as_dict(meta.get("annotations"))
    lwt = as_dict(spec.get("leaderWorkerTemplate"))
    if SUBGROUP_EXCLUSIVE_TOPOLOGY in annotations and not isinstance(lwt.get("subGroupPolicy"), dict):
        out.append(FieldError(f"metadata.annotations[{SUBGROUP_EXCLUSIVE_TOPOLOGY}]",
                              "Invalid value: subgroup-exclusive-topology requires "
                              "spec.leaderWorkerTemplate.subGroupPolicy"))
    return out
