"""The upstream LWS/DS example manifests (the pinned sigs.k8s.io/lws v0.9.0 module's ``config/samples``
and ``docs/examples``, from the upstream cache), for parametrizing the API tests.

These need v0.9.0 only. The v0.10 documentation's examples (a DisaggregatedSet with ``slices``, the
HPA on a DisaggregatedSetRoleScaler) are in no module the Go proxy serves, so they are not used; the
v0.10-only fields are covered by the suite's own manifests (tests/api/unit/test_api_validation.py's
``slices``, ``scaling`` and ``placementPolicy`` cases)."""

from __future__ import annotations

import copy
from functools import cache
from typing import Any

from lwsflow.controller.api.objects import is_ds, is_lws
from lwsflow.controller.api.paths import example_name, lws_examples
from lwsflow.controller.yamlio import load_yaml_documents


@cache
def _load() -> tuple[tuple[str, dict[str, Any]], ...]:
    out = []
    for path in lws_examples():
        out.extend((example_name(path), d) for d in load_yaml_documents(path) if is_lws(d) or is_ds(d))
    return tuple(out)


def upstream_objects() -> list[tuple[str, dict[str, Any]]]:
    """(example name, manifest) for every LWS / DS document of the LWS module's examples."""
    return [(name, copy.deepcopy(d)) for name, d in _load()]


def example(name: str) -> dict[str, Any]:
    """A deep copy of the first LWS/DS document of an upstream example file."""
    return copy.deepcopy(next(d for n, d in upstream_objects() if n == name))


LWS_SAMPLE = "docs__examples__sample__lws.yaml"
# v0.9.0's three-role sample (the v0.10 docs page's first example is the same DS under another name)
DS_SAMPLE = "config__samples__disaggregatedset_v1_3role.yaml"


