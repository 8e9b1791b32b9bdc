"""Typed LWS/DS API (pydantic), CRD-schema and webhook validation, status predicates.

Modules: ``lws`` / ``ds`` / ``common`` (models), ``objects.parse``, ``crd`` (packaged CRD schemas),
``defaults``, ``validation`` (``validate_object``, ``validate_update``, ``unknown_fields``),
``status`` (rollout predicates), ``paths`` (the cached upstream reference material, for tests and
tools). The heavy parts load on first use, so
importing ``lwsflow.controller.api.labels`` stays cheap.
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "parse": "lwsflow.controller.api.objects",
    "LeaderWorkerSet": "lwsflow.controller.api.lws",
    "DisaggregatedSet": "lwsflow.controller.api.ds",
    "default_object": "lwsflow.controller.api.defaults",
    "validate_object": "lwsflow.controller.api.validation",
    "validate_update": "lwsflow.controller.api.validation",
    "unknown_fields": "lwsflow.controller.api.validation",
}

__all__ = [*_LAZY]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
