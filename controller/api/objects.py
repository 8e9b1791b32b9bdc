"""``parse``: a manifest dict to its typed LeaderWorkerSet / DisaggregatedSet model."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from lwsflow.controller.api.common import field_path
from lwsflow.controller.api.ds import DisaggregatedSet
from lwsflow.controller.api.labels import DS_API_VERSION, DS_KIND, LWS_API_VERSION, LWS_KIND
from lwsflow.controller.api.lws import LeaderWorkerSet
from lwsflow.controller.errors import InvalidInput

ApiObject = LeaderWorkerSet | DisaggregatedSet


def is_lws(obj: dict[str, Any]) -> bool:
    return obj.get("apiVersion") == LWS_API_VERSION and obj.get("kind") == LWS_KIND


def is_ds(obj: dict[str, Any]) -> bool:
    return obj.get("apiVersion") == DS_API_VERSION and obj.get("kind") == DS_KIND


def container_images(obj: dict[str, Any], init_containers: bool = True) -> list[str]:
    """Every container and init-container image in an object's pod templates, in document order;
    ``init_containers=False``: the serving containers' only (not a native sidecar's, such as llm-d's
    routing sidecar)."""
    out: list[str] = []
    keys = ("containers", "initContainers") if init_containers else ("containers",)

    def walk(node: Any, key: str = "") -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                walk(v, k)
        elif isinstance(node, list):
            for v in node:
                if key in keys and isinstance(v, dict) and "image" in v:
                    out.append(str(v["image"]))
                else:
                    walk(v, key)

    walk(obj.get("spec", {}))
    return out


def parse(obj: dict[str, Any]) -> ApiObject:
    """The typed model of an LWS or DS manifest; InvalidInput naming the field otherwise.

    Parsing checks types only; ``lwsflow.controller.api.validation.validate_object`` is the full check.
    """
    if is_lws(obj):
        model: type[ApiObject] = LeaderWorkerSet
    elif is_ds(obj):
        model = DisaggregatedSet
    else:
        raise InvalidInput(f"not a LeaderWorkerSet or DisaggregatedSet: apiVersion "
                           f"{obj.get('apiVersion')!r}, kind {obj.get('kind')!r}", field="kind")
    try:
        return model.model_validate(obj)
    except ValidationError as exc:
        err = exc.errors()[0]
        raise InvalidInput(err["msg"], field=field_path(err["loc"])) from None
