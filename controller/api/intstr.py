"""Kubernetes ``IntOrString`` resolution: the one place ``maxSurge``/``maxUnavailable`` become groups.

Upstream ``intstr.GetScaledValueFromIntOrPercent``: an int is returned as given; a string must end
in ``%`` (``"3"`` is an error: "string is not a percentage"), and its number (``strconv.Atoi``, so a
sign is allowed) scales ``total`` rounding up or down. The LWS controller resolves ``maxSurge``
rounding up and caps it at ``spec.replicas``, ``maxUnavailable`` rounding down, with the CRD
defaults 0 and 1 (lws-semantics §a, §d). The controller (gate, capacity, webhooks), the API models
and the embedded cluster (``lwsflow.sim``) all resolve through here.
"""

from __future__ import annotations

import re

IntOrString = int | str
"""Kubernetes ``IntOrString`` (``x-kubernetes-int-or-string``): an integer or e.g. ``"25%"``."""

DEFAULT_MAX_SURGE = 0
DEFAULT_MAX_UNAVAILABLE = 1

_VALID_PERCENT = re.compile(r"^(\d+)%\Z")  # validation.IsValidPercent: what the webhooks accept
_ATOI_PERCENT = re.compile(r"^([+-]?\d+)%\Z")  # what resolution reads (strconv.Atoi allows a sign)


def parse_percent(value: str) -> int | None:
    """``"25%"`` -> 25; None when ``value`` is not a valid (non-negative) percent string."""
    m = _VALID_PERCENT.match(value)
    return int(m.group(1)) if m else None


def scaled_value(value: IntOrString, total: int, *, round_up: bool) -> int:
    """``GetScaledValueFromIntOrPercent(value, total, round_up)``; ValueError where upstream errs.

    Integer arithmetic: for the sizes that occur it equals upstream's ``math.Ceil/Floor`` of
    ``float64(v) * float64(total) / 100`` exactly (a float with an epsilon does not).
    """
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ValueError(f"invalid int-or-percent {value!r}: neither int nor percentage")
    if isinstance(value, int):
        return value
    if not value.endswith("%"):
        raise ValueError(f"invalid value {value!r}: a string must be a percent like '25%'")
    m = _ATOI_PERCENT.match(value)
    if m is None:
        raise ValueError(f"invalid value {value!r}: must be an integer or a percent like '25%'")
    pct = int(m.group(1))
    return -(-pct * total // 100) if round_up else pct * total // 100


def resolve(value: IntOrString | None, total: int, *, round_up: bool, default: int) -> int:
    """:func:`scaled_value`, with ``default`` for an unset (None) value."""
    return default if value is None else scaled_value(value, total, round_up=round_up)


def max_surge(value: IntOrString | None, replicas: int) -> int:
    """The LWS controller's surge groups: percent rounds up, default 0, capped at ``replicas`` (§d)."""
    return min(resolve(value, replicas, round_up=True, default=DEFAULT_MAX_SURGE), replicas)


def max_unavailable(value: IntOrString | None, replicas: int) -> int:
    """The LWS controller's unavailable budget: percent rounds down, default 1 (§d)."""
    return resolve(value, replicas, round_up=False, default=DEFAULT_MAX_UNAVAILABLE)
