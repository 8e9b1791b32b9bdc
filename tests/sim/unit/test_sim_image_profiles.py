"""Image behaviour by digest (issue 13.9): what a release does comes from configuration keyed by the
image's digest, or is learned once from an image source (the image's own label), never from its name."""

from __future__ import annotations

import pytest

from lwsflow.controller.errors import InvalidInput
from lwsflow.sim.cluster import Cluster
from lwsflow.sim.config import ClusterConfig, ImageProfile
from lwsflow.sim.lws_controller import LWS
from tests.sim.sim_helpers import NS, counters, make_lws, small_config

BAD = "sha256:" + "b" * 64
GOOD = "sha256:" + "a" * 64


def _ready(c: Cluster, pod: str) -> str:
    p = c.store.get("pods", NS, pod)
    return {x["type"]: x["status"] for x in p["status"]["conditions"]}["Ready"]


def test_configured_digest_never_becomes_ready_whatever_its_name() -> None:
    cfg = small_config()
    cfg.images[BAD] = ImageProfile(ready=False)
    c = Cluster(cfg)
    c.store.create(LWS, make_lws("bad", replicas=1, size=1, image=f"registry.example/engine@{BAD}"))
    c.store.create(LWS, make_lws("good", replicas=1, size=1, image=f"registry.example/engine@{GOOD}"))
    c.advance(3600)
    assert _ready(c, "bad-0") == "False" and c.store.get("pods", NS, "bad-0")["status"]["phase"] == "Running"
    assert _ready(c, "good-0") == "True"
    assert counters(c, "bad")[1] == 0


def test_profiles_are_learned_once_per_digest_from_image_sources() -> None:
    c = Cluster(small_config())
    asked: list[str] = []

    def source(image: str) -> ImageProfile | None:
        asked.append(image)
        return ImageProfile(ready=False) if image.endswith(BAD) else None

    c.image_sources.append(source)
    c.store.create(LWS, make_lws("bad", replicas=2, size=1, image=f"r.example/x@{BAD}"))
    c.store.create(LWS, make_lws("good", replicas=1, size=1, image=f"r.example/x@{GOOD}"))
    c.store.create(LWS, make_lws("tag", replicas=1, size=1, image="r.example/x:v1"))
    c.advance(3600)
    assert c.config.images == {BAD: ImageProfile(ready=False)}
    assert sorted(asked) == sorted([f"r.example/x@{BAD}", f"r.example/x@{GOOD}"])  # once each; tags never
    assert _ready(c, "bad-0") == _ready(c, "bad-1") == "False"
    assert _ready(c, "good-0") == _ready(c, "tag-0") == "True"


def test_config_file_shape_and_label_parsing() -> None:
    cfg = ClusterConfig.from_dict({"pools": [{"name": "cpu", "count": 1}], "images": {BAD: {"ready": False}}})
    assert cfg.image_never_ready(f"any/name@{BAD}") and not cfg.image_never_ready(f"any/name@{GOOD}")
    with pytest.raises(InvalidInput, match="images"):
        ClusterConfig.from_dict({"pools": [{"name": "cpu", "count": 1}], "images": {"v1": {"ready": False}}})
    with pytest.raises(InvalidInput, match="readyy"):
        ClusterConfig.from_dict({"pools": [{"name": "cpu", "count": 1}], "images": {BAD: {"readyy": False}}})
    assert ImageProfile.from_label('{"ready": false}') == ImageProfile(ready=False)
    with pytest.raises(InvalidInput, match=r"io.lwsflow.sim.profile"):
        ImageProfile.from_label("ready=false")
