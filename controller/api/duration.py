"""The one duration grammar of lwsflow: CLI flags, the catalog, RolloutPolicy fields, analysis specs, token
lifetimes.

A duration is either Go-style - one or more ``<number><unit>`` terms, summed: ``90s``, ``5m``, ``1h30m``,
``500ms``, ``1.5h`` - with the units ``ms``, ``s``, ``m``, ``h`` and ``d`` (24 h; Go stops at ``h``,
Prometheus has ``d``), or plain seconds: ``90``, ``0.5`` (as Argo Rollouts' pause ``duration``). Numbers
are decimal, without sign or exponent; no spaces inside. In YAML a whole number of seconds may also be an
unquoted number (``bake: 90``); the RolloutPolicy CRD's fields are int-or-string, so a fraction of a second
is written as text there (``"0.5"`` or ``500ms``). Whitespace is refused, around the text too (as Go's
``time.ParseDuration``: ``"5m\\n"`` is a typo, not five minutes). ``PATTERN`` is the same grammar for a
schema: the RolloutPolicy CRD's CEL rules (``controller/policy/rules.py``) carry it.
"""

from __future__ import annotations

import math
import re

from lwsflow.controller.errors import InvalidInput

_NUMBER = r"[0-9]+(?:[.][0-9]+)?"  # [.], not a backslash: the same text in a CEL string
_UNITS = "(?:ms|s|m|h|d)"
# RE2 and Python read it alike (non-capturing groups only); with \Z rather than $ where Python matches it
PATTERN = rf"^(?:(?:{_NUMBER}{_UNITS})+|{_NUMBER})$"
# a duration of no time at all: every number in it is zero (for fields that must be positive)
ZERO_PATTERN = rf"^(?:(?:0+(?:[.]0+)?{_UNITS})+|0+(?:[.]0+)?)$"
_WHOLE = re.compile(rf"(?:{_NUMBER}{_UNITS})+")  # used with fullmatch: "$" would pass "5m\n"
_TERM = re.compile(rf"({_NUMBER})(ms|s|m|h|d)")
_BARE = re.compile(_NUMBER)
UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
EXAMPLES = "a duration like 90s, 5m, 1h30m or 500ms, or plain seconds like 90"


def duration_seconds(value: object) -> float:
    """Seconds of a duration; ValueError (for pydantic, which names the field) when it is not one."""
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and value >= 0:
        return float(value)
    if isinstance(value, str):
        if _WHOLE.fullmatch(value):
            return sum(float(n) * UNIT_S[u] for n, u in _TERM.findall(value))
        if _BARE.fullmatch(value):
            return float(value)
    raise ValueError(f"{value!r} is not {EXAMPLES}")


def parse_duration(value: object, field: str) -> float:
    """``duration_seconds`` for a CLI flag or a hand-read field: InvalidInput naming ``field``."""
    try:
        return duration_seconds(value)
    except ValueError as exc:
        raise InvalidInput(str(exc), field=field) from None
