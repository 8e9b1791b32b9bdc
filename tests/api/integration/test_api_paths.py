"""The upstream cache: pinned by scripts/upstream's go.sum, under $LWSFLOW_CACHE, never beside the
repository."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from lwsflow.controller.api import paths


def test_cache_location(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(paths.ENV_CACHE, str(tmp_path))
    assert paths.cache_dir() == tmp_path
    monkeypatch.delenv(paths.ENV_CACHE)
    assert paths.cache_dir() == Path.home() / ".cache" / "lwsflow"
    assert (paths.repo_root() / "controller" / "api" / "paths.py").is_file()


def test_versions_come_from_go_mod_and_are_pinned_by_go_sum() -> None:
    v = paths.versions()
    assert v["sigs.k8s.io/lws"] == "v0.9.0"
    refcluster = (paths.repo_root() / "scripts" / "refcluster" / "cluster" / "go.mod").read_text()
    assert "sigs.k8s.io/lws v0.9.0" in refcluster  # the examples are those of the controller it runs
    sums = (paths.pins_dir() / "go.sum").read_text()
    for mod in paths.MODULES.values():
        assert f"{mod.path} {v[mod.path]} h1:" in sums


def test_cached_material_is_outside_the_repository() -> None:
    for name in paths.MODULES:
        d = paths.module_dir(name)
        assert (d / ".complete").is_file() and paths.repo_root() not in d.parents
    assert paths.lws_crd_dir().is_dir() and paths.argo_schema().is_file()
    assert paths.gateway_crd("gateway.networking.k8s.io_httproutes.yaml").is_file()
    assert paths.gateway_crd("inference.networking.k8s.io_inferencepools.yaml").is_file()
    names = [paths.example_name(p) for p in paths.lws_examples()]
    assert "config__samples__leaderworkerset_v1_leaderworkerset.yaml" in names
    assert "docs__examples__sample__lws.yaml" in names


def test_a_tampered_pin_is_refused(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # a go.sum that does not match what the proxy serves: nothing lands in the cache
    if paths.go_binary() is None:
        pytest.fail("no Go toolchain: run scripts/setup (it installs Go)")
    pins = tmp_path / "pins"
    shutil.copytree(paths.pins_dir(), pins)
    text = (pins / "go.sum").read_text()
    (pins / "go.sum").write_text(text.replace("sigs.k8s.io/gateway-api v1.6.1 h1:m",
                                              "sigs.k8s.io/gateway-api v1.6.1 h1:M"))
    monkeypatch.setattr(paths, "pins_dir", lambda: pins)
    monkeypatch.setenv(paths.ENV_CACHE, str(tmp_path / "cache"))
    with pytest.raises(paths.UpstreamMissing, match=r"checksum mismatch|not the go\.sum pin"):
        paths.fetch("gateway-api")
    assert not (tmp_path / "cache" / "upstream" / "sigs.k8s.io" / "gateway-api@v1.6.1").exists()


def test_without_go_the_error_says_what_is_missing(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(paths.ENV_CACHE, str(tmp_path))
    monkeypatch.setattr(paths, "go_binary", lambda: None)
    missing = r"sigs\.k8s\.io/lws@v0\.9\.0 is not in .* no Go toolchain"
    with pytest.raises(paths.UpstreamMissing, match=missing):
        paths.lws_crd_dir()
