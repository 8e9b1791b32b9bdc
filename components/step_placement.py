"""Where pipeline steps that must sit in the GPU node pool run: a node selector and tolerations.

A compile-time setting (``lwsflow pipeline compile --node-selector KEY=VALUE --toleration
KEY[=VALUE]:EFFECT``), applied through kfp-kubernetes and hera to the steps that need it: today only
the smoke test, which requests no GPU but measures the endpoints from inside the pool, so its latency
figures see the pool's own network path. The default is the example catalog's H100 pool
(``examples/catalog.yaml``, pool ``h100x8``); ``--any-node`` compiles without any placement.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from lwsflow.controller.errors import InvalidInput

Effect = Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]
EFFECTS: tuple[Effect, ...] = ("NoSchedule", "PreferNoSchedule", "NoExecute")
# A label key: an optional DNS-subdomain prefix and a name (the Kubernetes rule, lengths checked apart).
_KEY = re.compile(r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?\Z")
_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?\Z")


@dataclass(frozen=True)
class Toleration:
    """A pod toleration; no ``value`` means operator ``Exists`` (any value of the taint)."""

    key: str
    effect: Effect
    value: str = ""

    @property
    def operator(self) -> Literal["Equal", "Exists"]:
        return "Equal" if self.value else "Exists"


@dataclass(frozen=True)
class StepPlacement:
    """The node selector and tolerations of the steps that run in the GPU pool."""

    node_selector: dict[str, str] = field(default_factory=dict)
    tolerations: tuple[Toleration, ...] = ()

    @property
    def anywhere(self) -> bool:
        return not self.node_selector and not self.tolerations


# The example catalog's h100x8 pool: its nodeSelector and tolerations (a test keeps them in step).
DEFAULT_PLACEMENT = StepPlacement(
    node_selector={"cloud.google.com/gke-accelerator": "nvidia-h100-80gb"},
    tolerations=(Toleration(key="nvidia.com/gpu", effect="NoSchedule"),),
)
ANY_NODE = StepPlacement()


def _check_key(key: str, flag: str, text: str) -> None:
    name = key.rpartition("/")[2]
    if not _KEY.match(key) or len(name) > 63 or len(key) - len(name) > 254:
        raise InvalidInput(f"{text!r}: {key!r} is not a valid label key", field=flag)


def _check_value(value: str, flag: str, text: str, what: str) -> None:
    if not _VALUE.match(value) or len(value) > 63:
        raise InvalidInput(f"{text!r}: {value!r} is not a valid {what} value", field=flag)


def parse_node_selector(items: list[str]) -> dict[str, str]:
    """``KEY=VALUE`` items into a selector; a key given twice is refused, not silently overwritten."""
    out: dict[str, str] = {}
    for text in items:
        key, sep, value = text.partition("=")
        if not sep:
            raise InvalidInput(f"{text!r}: expected KEY=VALUE", field="--node-selector")
        _check_key(key, "--node-selector", text)
        _check_value(value, "--node-selector", text, "label")
        if key in out:
            raise InvalidInput(f"{text!r}: {key!r} given twice", field="--node-selector")
        out[key] = value
    return out


def parse_toleration(text: str) -> Toleration:
    """``KEY[=VALUE]:EFFECT``, as ``kubectl taint`` writes a taint (no value: operator Exists)."""
    spec, sep, effect = text.rpartition(":")
    if not sep or not spec:
        raise InvalidInput(f"{text!r}: expected KEY[=VALUE]:EFFECT", field="--toleration")
    if effect not in EFFECTS:
        raise InvalidInput(f"{text!r}: effect must be one of {', '.join(EFFECTS)}", field="--toleration")
    key, _, value = spec.partition("=")
    _check_key(key, "--toleration", text)
    _check_value(value, "--toleration", text, "taint")
    return Toleration(key=key, effect=effect, value=value)  # effect checked above


def placement_from_flags(node_selector: list[str], tolerations: list[str], any_node: bool) -> StepPlacement:
    """The CLI's flags: none given -> the default; any given -> exactly those (no merge with the
    default, so a team's own pool never inherits the example's selector)."""
    if any_node:
        if node_selector or tolerations:
            raise InvalidInput("--any-node takes no --node-selector or --toleration", field="--any-node")
        return ANY_NODE
    if not node_selector and not tolerations:
        return DEFAULT_PLACEMENT
    tols = dict.fromkeys(parse_toleration(t) for t in tolerations)  # drop repeats, keep the order
    return StepPlacement(node_selector=parse_node_selector(node_selector), tolerations=tuple(tols))
