"""Kubernetes resource quantities (``16``, ``"2"``, ``"500m"``, ``"1Ki"``) as exact numbers: Kueue's
quota arithmetic (rollout/quota.py) and comparing templates that went through Go structs, which write
``8`` back as ``"8"`` (api/status.py)."""

from __future__ import annotations

import re
from fractions import Fraction

_QUANTITY = re.compile(r"^([+-]?[0-9.]+)([a-zA-Z]*)$")
_SUFFIX: dict[str, Fraction] = {k: Fraction(v) for k, v in (
    ("", 1), ("k", 10**3), ("M", 10**6), ("G", 10**9), ("T", 10**12), ("Ki", 2**10), ("Mi", 2**20),
    ("Gi", 2**30), ("Ti", 2**40), ("m", Fraction(1, 1000)))}


def quantity(v: object) -> Fraction:
    """A quantity as an exact number; ValueError naming it when it is not one."""
    m = _QUANTITY.match(str(v if v is not None else 0).strip())
    if not m or m.group(2) not in _SUFFIX:
        raise ValueError(f"{v!r} is not a quantity")
    return Fraction(m.group(1)) * _SUFFIX[m.group(2)]


def quantity_text(x: Fraction) -> str:
    """``16``, ``0.5``: how lwsflow's messages print a quantity."""
    return str(x.numerator) if x.denominator == 1 else f"{float(x):g}"
