"""The one duration grammar of lwsflow: CLI flags, RolloutPolicy fields, analysis specs, token lifetimes.

A duration is Go-style: one or more ``<number><unit>`` terms, summed - ``90s``, ``5m``, ``1h30m``,
``500ms``, ``1.5h`` - with the units ``ms``, ``s``, ``m``, ``h`` and ``d`` (24 h; Go stops at ``h``,
Prometheus has ``d``). Numbers are decimal, without sign or exponent; no spaces inside. Fields that
also take plain seconds (``bare_seconds``: the CLI's ``--bake``/``--deadline``, analysis intervals)
accept a bare number there too (``12``, ``0.5``, or a YAML number). Whitespace is refused,
around the text too (as Go's ``time.ParseDuration``: ``"5m\n"`` is a typo, not five minutes).
``PATTERN`` is the same grammar for a schema (the RolloutPolicy CRD).
"""

from __future__ import annotations

import math
import re

from lwsflow.controller.errors import InvalidInput

PATTERN = r"^([0-9]+(\.[0-9]+)?(ms|s|m|h|d))+$"
_NUMBER = r"[0-9]+(?:\.[0-9]+)?"
_WHOLE = re.compile(rf"(?:{_NUMBER}(?:ms|s|m|h|d))+")  # used with fullmatch: "$" would pass "5m\n"
_TERM = re.compile(rf"({_NUMBER})(ms|s|m|h|d)")
_BARE = re.compile(_NUMBER)
UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def duration_seconds(value: object, *, bare_seconds: bool = False) -> float:
    """Seconds of a duration; ValueError (for pydantic, which names the field) when it is not one."""
    if bare_seconds and isinstance(value, int | float) and not isinstance(value, bool) \
            and math.isfinite(value) and value >= 0:
        return float(value)
    text = value if isinstance(value, str) else None
    if text is not None:
        if _WHOLE.fullmatch(text):
            return sum(float(n) * UNIT_S[u] for n, u in _TERM.findall(text))
        if bare_seconds and _BARE.fullmatch(text):
            return float(text)
    plain = " or plain seconds" if bare_seconds else ""
    raise ValueError(f"{value!r} is not a duration like 90s, 5m, 1h30m or 500ms{plain}")


def parse_duration(value: object, field: str, *, bare_seconds: bool = False) -> float:
    """``duration_seconds`` for a CLI flag or a hand-read field: InvalidInput naming ``field``."""
    try:
        return duration_seconds(value, bare_seconds=bare_seconds)
    except ValueError as exc:
        raise InvalidInput(str(exc), field=field) from None
