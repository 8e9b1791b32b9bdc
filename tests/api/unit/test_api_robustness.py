"""Malformed objects (wrong types anywhere) give field errors, never exceptions.

The embedded API server validates whatever a client sends, and `lwsflow validate` must not print a
traceback, so every entry point is exercised with junk at every spec/metadata path of the samples.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest

from lwsflow.controller.api import status
from lwsflow.controller.api.validation import unknown_fields, validate_object, validate_update
from tests.api.api_examples import DS_SAMPLE, LWS_SAMPLE, example

JUNK: list[Any] = [None, "x", -1, 2.5, True, [], {}, [1], 2**40]


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    if prefix and prefix[-1] in ("containers", "resources"):
        return  # the pod template schema is jsonschema's job; one level into it is enough here
    yield prefix
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _paths(v, (*prefix, i))


def _with(doc: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    out = copy.deepcopy(doc)
    node: Any = out
    for k in path[:-1]:
        node = node[k]
    node[path[-1]] = value
    return out


@pytest.mark.parametrize("name", [LWS_SAMPLE, DS_SAMPLE])
def test_junk_anywhere_never_raises(name: str) -> None:
    doc = example(name)
    doc["status"] = {"replicas": 1, "readyReplicas": 1,
                     "conditions": [{"type": "Available", "status": "True"}],
                     "roleStatuses": [{"name": "prefill", "replicas": 1}]}
    checked = 0
    for path in _paths(doc):
        if not path or path[0] not in ("metadata", "spec", "status"):
            continue
        for junk in JUNK:
            obj = _with(doc, path, junk)
            errors = validate_object(obj)
            assert all(e.path for e in errors)
            unknown_fields(obj)
            validate_update(doc, obj)
            validate_update(obj, doc)
            status.lws_fully_rolled(obj)
            status.lws_stage_complete(obj, 1)
            status.explain_lws(obj)
            status.ds_roles_ready(obj)
            status.explain_ds(obj)
            checked += 1
    assert checked > 100
