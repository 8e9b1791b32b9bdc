"""Typed LWS/DS API (pydantic), CRD-schema and webhook validation, status predicates.

Modules: ``lws`` / ``ds`` / ``common`` (models), ``objects.parse``, ``crd`` (packaged CRD schemas),
``defaults``, ``validation`` (``validate_object``, ``validate_update``, ``unknown_fields``),
``status`` (rollout predicates), ``paths.shared_dir``. The heavy parts load on first use, so
importing ``controller.api.labels`` stays cheap.
"""

from __future__ import annotations

import importlib
from typing import Any

from controller.api.paths import shared_dir

_LAZY = {
    "parse": "controller.api.objects",
    "LeaderWorkerSet": "controller.api.lws",
    "DisaggregatedSet": "controller.api.ds",
    "default_object": "controller.api.defaults",
    "validate_object": "controller.api.validation",
    "validate_update": "controller.api.validation",
    "unknown_fields": "controller.api.validation",
}

__all__ = ["shared_dir", *_LAZY]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
