"""The upstream LWS/DS example manifests from ../shared, for parametrizing the API tests."""

from __future__ import annotations

import copy
from functools import cache
from typing import Any

from lwsflow.controller.api.objects import is_ds, is_lws
from lwsflow.controller.api.paths import lws_reference_dir
from lwsflow.controller.yamlio import load_yaml_documents


@cache
def _load() -> tuple[tuple[str, dict[str, Any]], ...]:
    out = []
    for path in sorted((lws_reference_dir() / "examples").glob("*.yaml")):
        out.extend((path.name, d) for d in load_yaml_documents(path) if is_lws(d) or is_ds(d))
    return tuple(out)


def upstream_objects() -> list[tuple[str, dict[str, Any]]]:
    """(file name, manifest) for every LWS / DS document in shared/reference/lws/examples."""
    return [(name, copy.deepcopy(d)) for name, d in _load()]


def example(name: str) -> dict[str, Any]:
    """A deep copy of the first LWS/DS document of an upstream example file."""
    return copy.deepcopy(next(d for n, d in upstream_objects() if n == name))


LWS_SAMPLE = "docs__examples__sample__lws.yaml"
DS_SAMPLE = "site__content__en__docs__examples__disaggregatedset.md__yamlblock1.yaml"


