"""The data side of defaulting: a default is (field, value, kind of field), applied to a dict.

Go's defaulters test a field in one of two ways, and the difference shows: a value field (``int32``,
``string``) is defaulted when it is zero (``timeoutSeconds: 0`` becomes 1), a pointer field only
when it is absent (``terminationGracePeriodSeconds: 0`` stays 0). ``ZERO`` and ``NIL`` say which.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Iterator
from typing import Any

ZERO, NIL = "zero", "nil"
Default = tuple[str, Any, str]  # (field, value, ZERO | NIL)


def fill(obj: object, defaults: Iterable[Default]) -> None:
    """Apply ``defaults`` to ``obj`` in place (nothing when ``obj`` is not a dict)."""
    if not isinstance(obj, dict):
        return
    for field, value, how in defaults:
        current = obj.get(field)
        if current is None or (how == ZERO and current in (0, "")):
            obj[field] = copy.deepcopy(value)


def dicts(obj: object, *path: str) -> Iterator[dict[str, Any]]:
    """The dicts at ``path`` under ``obj``: a list along the way fans out (``containers``), anything
    that is not shaped as expected yields nothing (validation names it)."""
    if not path:
        if isinstance(obj, dict):
            yield obj
        elif isinstance(obj, list):
            yield from (x for x in obj if isinstance(x, dict))
        return
    if isinstance(obj, list):
        for x in obj:
            yield from dicts(x, *path)
    elif isinstance(obj, dict):
        yield from dicts(obj.get(path[0]), *path[1:])
