"""The compiled schema check (controller/api/schema_fast.py) never says "valid" where jsonschema finds an
error, and does say it for the valid objects lwsflow renders and the upstream examples."""

from __future__ import annotations

import copy
import random
from typing import Any

from lwsflow.components.catalog import load_catalog
from lwsflow.components.manifests import render_model
from lwsflow.controller.api.crd import crd_for_object
from lwsflow.controller.api.defaults import default_object
from lwsflow.controller.api.paths import repo_root
from lwsflow.controller.api.schema_check import fast_check, schema_errors, validator
from tests.api.api_examples import upstream_objects


def _objects() -> list[dict[str, Any]]:
    catalog = load_catalog(repo_root() / "examples" / "catalog.yaml")
    rendered = [o for m in catalog.models for env in (None, *(e.name for e in catalog.environments))
                for o in render_model(catalog, m.name, env)]
    return [default_object(o) for o in [d for _, d in upstream_objects()] + rendered
            if crd_for_object(o) is not None]


def _paths(node: Any, here: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [here]
    if isinstance(node, dict):
        out += [p for k, v in node.items() for p in _paths(v, (*here, k))]
    elif isinstance(node, list):
        out += [p for i, v in enumerate(node) for p in _paths(v, (*here, i))]
    return out


_VALUES: list[Any] = [None, True, False, 0, -1, 1, 2**31, -(2**31) - 1, 2**63, 1.5, 2.0, "", "x", "1",
                      "a" * 300, "UPPER_case", "25%", "-1", "RollingUpdate", "LeaderCreated", "None",
                      [], [1], ["x"], [{}], {}, {"x": 1}, {"name": "a"}, {"unknown": {"y": 2}}]


def _mutate(obj: dict[str, Any], rnd: random.Random) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    for _ in range(rnd.randint(1, 3)):
        path = rnd.choice(_paths(out)[1:])
        parent: Any = out
        for p in path[:-1]:
            parent = parent[p]
        r = rnd.random()
        if r < 0.2 and isinstance(parent, dict):
            del parent[path[-1]]
        elif r < 0.3 and isinstance(parent, dict):
            parent[f"extra{rnd.randint(0, 9)}"] = rnd.choice(_VALUES)
        else:
            parent[path[-1]] = copy.deepcopy(rnd.choice(_VALUES))
    return out


def test_valid_objects_pass_the_fast_check() -> None:
    """Otherwise the fast path would never be taken (the point is speed, bench/overlays_bench.py)."""
    objs = _objects()
    assert len(objs) > 20
    for obj in objs:
        plural = crd_for_object(obj).plural  # type: ignore[union-attr]
        assert list(validator(plural).iter_errors(obj)) == []
        assert fast_check(plural)(obj), obj["metadata"]["name"]


def test_fast_check_never_passes_an_invalid_object() -> None:
    """Seeded mutations (wrong types, bounds, enums, patterns, unknown and missing fields): wherever
    jsonschema reports an error the fast check says False, so the errors reported stay jsonschema's."""
    rnd = random.Random(20261201)
    objs = _objects()
    caught = 0
    for i in range(1000):
        base = objs[i % len(objs)]
        plural = crd_for_object(base).plural  # type: ignore[union-attr]
        obj = _mutate(base, rnd)
        if list(validator(plural).iter_errors(obj)):
            caught += 1
            assert not fast_check(plural)(obj), obj
            assert schema_errors(obj, plural)  # and the errors still come from jsonschema
    assert caught > 200
