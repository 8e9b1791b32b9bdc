"""The rendered tree: real kustomize builds, validation, digests, determinism, atomicity, drift."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from lwsflow.cli import main
from lwsflow.components.catalog import Catalog
from lwsflow.components.gitops import pin_entry
from lwsflow.components.kustomize import build_overlays, kustomize_build
from lwsflow.components.overlays import (
    ImageRef,
    container_images,
    on_disk,
    read_kustomization,
    render_to,
    safe_path,
    set_pins,
    write_tree,
)
from lwsflow.controller.api.paths import repo_root
from lwsflow.controller.errors import InvalidInput
from lwsflow.controller.yamlio import dump_yaml
from tests.gitops.gitops_helpers import CATALOG, DIGEST_A, DIGEST_B, DIGEST_C, catalog_with, stand_in_render

ROOT = repo_root()
STAGING = {"name": "staging", "namespace": "llm-staging"}  # one namespace per environment
PROD = {"name": "prod", "namespace": "llm-prod"}


def _snapshot(d: Path) -> dict[str, bytes]:
    return {p.relative_to(d).as_posix(): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


def _built(tree: Path, env: str, kind: str, name: str) -> dict[str, Any]:
    objs = kustomize_build(tree / env)
    return next(o for o in objs if o["kind"] == kind and o["metadata"]["name"] == name)


def test_every_env_builds_validates_and_carries_digests(tree: Path) -> None:
    results = build_overlays(tree)
    assert sorted(r.path for r in results) == sorted(
        f"{e}/{m}" for e in ("dev", "staging", "prod") for m in ("small", "pd")
    )
    for r in results:
        assert r.images and all(ImageRef.parse(i).digest == DIGEST_A for i in r.images)
        assert all(o["metadata"]["labels"]["lwsflow.io/environment"] == r.env for o in r.objects)


def test_prod_overrides_land_through_replicas_and_json6902(tree: Path) -> None:
    lws = _built(tree, "prod", "LeaderWorkerSet", "small")
    assert lws["spec"]["replicas"] == 4
    assert lws["metadata"]["namespace"] == "llm-prod"
    ruc = lws["spec"]["rolloutStrategy"]["rollingUpdateConfiguration"]
    assert (ruc["maxSurge"], ruc["maxUnavailable"]) == (1, 0)
    assert lws["metadata"]["annotations"]["lwsflow.io/rollout-stages"] == "1,100%"
    # the JSON 6902 patch kept the container lists intact (a strategic merge would replace them)
    leader = lws["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"]["containers"][0]
    assert leader["args"] == ["--port", "8000"] and leader["env"] == [{"name": "A", "value": "1"}]
    assert leader["image"] == f"vllm/vllm-openai@{DIGEST_A}"
    # labels only on object metadata: the Service selector and the pod templates are untouched
    svc = _built(tree, "prod", "Service", "small")
    assert svc["spec"]["selector"] == {
        "leaderworkerset.sigs.k8s.io/name": "small",
        "leaderworkerset.sigs.k8s.io/worker-index": "0",
    }
    assert svc["metadata"]["labels"]["app.kubernetes.io/part-of"] == "lwsflow"
    ds = _built(tree, "prod", "DisaggregatedSet", "pd")
    assert [r["spec"]["replicas"] for r in ds["spec"]["roles"]] == [1, 3]
    dev = _built(tree, "dev", "DisaggregatedSet", "pd")
    assert [r["spec"]["replicas"] for r in dev["spec"]["roles"]] == [1, 2]
    assert _built(tree, "dev", "LeaderWorkerSet", "small")["spec"]["replicas"] == 2


def test_render_is_deterministic_and_idempotent(tmp_path: Path, catalog: Catalog, tree: Path) -> None:
    other = tmp_path / "again"
    render_to(catalog, other, render=stand_in_render)
    assert _snapshot(other) == _snapshot(tree)
    assert render_to(catalog, tree, render=stand_in_render) == []
    assert render_to(catalog, tree, check=True, render=stand_in_render) == []


def test_failed_render_leaves_the_folder_untouched(tmp_path: Path, tree: Path) -> None:
    before = _snapshot(tree)
    calls: list[str] = []

    def failing(catalog: Catalog, model: str, env: str | None = None) -> list[dict[str, Any]]:
        calls.append(model)
        if model == "pd":
            raise InvalidInput("needs 99 GPUs per node, pool has 8", field="models[pd]")
        return stand_in_render(catalog, model, env)

    changed = catalog_with(models=[{**CATALOG["models"][0], "replicas": 7}, CATALOG["models"][1]])
    with pytest.raises(InvalidInput, match="99 GPUs"):
        render_to(changed, tree, render=failing)
    assert calls and _snapshot(tree) == before


def _pin(tree: Path, env: str, model: str, name: str, digest: str, new_name: str | None = None) -> None:
    """Write a pin the way set-image/promote do (origin recorded on the overlay)."""
    path = tree / env / model / "kustomization.yaml"
    doc = set_pins(
        read_kustomization(path) or {}, [pin_entry(name, digest, new_name)], "promote from staging"
    )
    path.write_text(dump_yaml(doc))


def test_prod_never_runs_a_tag_only_image(tree: Path) -> None:
    models = [{**m, "image": m["image"].split("@")[0]} for m in CATALOG["models"]]
    tag_only = catalog_with(models=models)
    _pin(tree, "prod", "small", "vllm/vllm-openai", DIGEST_B)
    # prod/small keeps its promoted pin; prod/pd would fall back to a bare tag: held out of prod
    render_to(tag_only, tree, render=stand_in_render)
    prod = (tree / "prod" / "kustomization.yaml").read_text()
    assert "\n- small\n" in prod
    assert "# - pd (not released in prod: no digest pinned for lmsysorg/sglang:v0.5.0" in prod
    images = {i for o in kustomize_build(tree / "prod") for i in container_images(o)}
    assert images == {f"vllm/vllm-openai@{DIGEST_B}"}
    # a fresh tree: nothing is released in prod yet, and nothing tag-only is built there
    render_to(tag_only, tree.parent / "fresh", render=stand_in_render)
    assert kustomize_build(tree.parent / "fresh" / "prod") == []
    # dev and staging accept the tag
    dev_only = catalog_with(models=models, environments=["dev", STAGING])
    render_to(dev_only, tree.parent / "dev-only", render=stand_in_render)
    lws = _built(tree.parent / "dev-only", "dev", "LeaderWorkerSet", "small")
    assert set(container_images(lws)) == {"vllm/vllm-openai:v0.11.0"}


def test_rerender_keeps_promoted_pins_and_follows_catalog_digests(tree: Path, catalog: Catalog) -> None:
    _pin(tree, "prod", "small", "vllm/vllm-openai", DIGEST_B, "reg.local/vllm")
    assert render_to(catalog, tree, render=stand_in_render) == []
    assert set(container_images(_built(tree, "prod", "LeaderWorkerSet", "small"))) == {
        f"reg.local/vllm@{DIGEST_B}"
    }
    # a digest bump in the catalog reaches every overlay nobody pinned, and only those
    bumped = catalog_with(
        models=[{**m, "image": m["image"].replace(DIGEST_A, DIGEST_C)} for m in CATALOG["models"]]
    )
    render_to(bumped, tree, render=stand_in_render)
    assert set(container_images(_built(tree, "prod", "LeaderWorkerSet", "small"))) == {
        f"reg.local/vllm@{DIGEST_B}"
    }
    assert set(container_images(_built(tree, "dev", "LeaderWorkerSet", "small"))) == {
        f"vllm/vllm-openai@{DIGEST_C}"
    }
    assert set(container_images(_built(tree, "prod", "DisaggregatedSet", "pd"))) == {
        f"lmsysorg/sglang@{DIGEST_C}"
    }


def test_symlinked_output_and_escaping_paths_are_refused(tmp_path: Path, catalog: Catalog) -> None:
    real = tmp_path / "real"
    real.mkdir()
    link = tmp_path / "link"
    link.symlink_to(real)
    with pytest.raises(InvalidInput, match="symlink"):
        render_to(catalog, link, render=stand_in_render)
    assert list(real.iterdir()) == []
    out = tmp_path / "out"
    with pytest.raises(InvalidInput, match="escapes"):
        write_tree(out, {"base/ok.yaml": b"a: 1\n", "../evil.yaml": b"x\n"}, ["base"])
    assert not (tmp_path / "evil.yaml").exists() and not (out / "base" / "ok.yaml").exists()
    (real / "base").mkdir()
    (out / "base").parent.mkdir(parents=True, exist_ok=True)
    (out / "base").symlink_to(real / "base")
    with pytest.raises(InvalidInput, match="symlink"):
        safe_path(out, "base/small/kustomization.yaml")
    with pytest.raises(InvalidInput, match="symlink"):
        render_to(catalog, out, render=stand_in_render)
    assert list((real / "base").iterdir()) == []


def test_check_lists_changed_missing_and_extra_files(tree: Path, catalog: Catalog) -> None:
    (tree / "dev" / "small" / "kustomization.yaml").write_text("tampered: true\n")
    (tree / "staging" / "pd" / "kustomizeconfig.yaml").unlink()
    (tree / "base" / "small" / "stray.yaml").write_text("a: 1\n")
    (tree / "rbac").mkdir()
    (tree / "rbac" / "role.yaml").write_text("kept: true\n")  # not the renderer's: never reported or touched
    assert render_to(catalog, tree, check=True, render=stand_in_render) == [
        "base/small/stray.yaml",
        "dev/small/kustomization.yaml",
        "staging/pd/kustomizeconfig.yaml",
    ]
    render_to(catalog, tree, render=stand_in_render)
    assert render_to(catalog, tree, check=True, render=stand_in_render) == []
    assert (tree / "rbac" / "role.yaml").read_text() == "kept: true\n"
    assert "base/small/stray.yaml" not in on_disk(tree, ["base"])


def test_removed_model_is_pruned(tree: Path) -> None:
    render_to(
        catalog_with(models=[CATALOG["models"][0]], environments=["dev", STAGING, PROD]),
        tree,
        render=stand_in_render,
    )
    assert not (tree / "base" / "pd").exists() and not (tree / "prod" / "pd").exists()
    assert (tree / "prod" / "kustomization.yaml").read_text().endswith("- small\n")


def test_build_overlays_names_the_broken_overlay(tree: Path) -> None:
    k = tree / "staging" / "small" / "kustomization.yaml"
    k.write_text(k.read_text().replace("count: 2", "count: -3"))
    with pytest.raises(InvalidInput, match=r"staging/small.*LeaderWorkerSet/small.*spec.replicas"):
        build_overlays(tree, "staging")
    k.write_text(k.read_text().replace("../../base/small", "../../base/missing"))
    with pytest.raises(InvalidInput, match=r"staging/small.*kustomize build failed"):
        build_overlays(tree, "staging")
    p = tree / "prod" / "small" / "kustomization.yaml"
    p.write_text(p.read_text().replace(f"  digest: {DIGEST_A}", "  newTag: latest"))
    with pytest.raises(InvalidInput, match=r"prod/small.*not pinned by digest"):
        build_overlays(tree, "prod")


def test_cli_render_check_and_build(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "overlays"
    cat = ROOT / "examples" / "catalog.yaml"
    assert main(["render", str(cat), "--out", str(out)]) == 0
    assert main(["render", str(cat), "--out", str(out), "--check"]) == 0
    capsys.readouterr()
    assert main(["build-overlays", str(out), "--env", "prod", "--json"]) == 0
    built = json.loads(capsys.readouterr().out)
    assert built and all(b["overlay"].startswith("prod/") and b["objects"] for b in built)
    assert all("@sha256:" in i for b in built for i in b["images"])
    assert all(f"{b['overlay']}/kustomization.yaml" in b["files"] for b in built)
    victim = next(out.glob("prod/*/kustomization.yaml"))
    victim.write_text(victim.read_text() + "# edited\n")
    capsys.readouterr()
    assert main(["render", str(cat), "--out", str(out), "--check"]) == 1
    assert str(victim.relative_to(out)) in capsys.readouterr().out
    assert main(["build-overlays", str(out), "--env", "nope"]) == 2
    assert "unknown environment 'nope'" in capsys.readouterr().err
    link = tmp_path / "link"
    link.symlink_to(out)
    assert main(["render", str(cat), "--out", str(link)]) == 2


def test_committed_tree_matches_the_example_catalog(capsys: pytest.CaptureFixture[str]) -> None:
    """CI's drift check: the committed overlays/ is exactly what examples/catalog.yaml renders."""
    rc = main(["render", str(ROOT / "examples" / "catalog.yaml"), "--out", str(ROOT / "overlays"), "--check"])
    assert rc == 0, capsys.readouterr().out
    assert os.path.isfile(ROOT / "overlays" / "prod" / "kustomization.yaml")


def test_every_built_lws_is_frozen_at_its_environments_replicas() -> None:
    """Issue 4: Argo CD ignores partition differences, so the overlay must carry the freeze itself.

    Each environment's built LeaderWorkerSet has ``partition == replicas`` (its own replicas, patched
    by the overlay), so a synced template updates no group until the rollout controller moves it;
    DisaggregatedSet roles carry no partition (the DS forbids one).
    """
    seen = 0
    builds = build_overlays(ROOT / "overlays")
    for r in builds:
        for o in r.objects:
            if o["kind"] == "LeaderWorkerSet":
                ruc = o["spec"]["rolloutStrategy"]["rollingUpdateConfiguration"]
                assert ruc["partition"] == o["spec"]["replicas"], (r.path, o["metadata"]["name"])
                seen += 1
            elif o["kind"] == "DisaggregatedSet":
                assert all("partition" not in (role["spec"].get("rolloutStrategy") or {}).get(
                    "rollingUpdateConfiguration", {}) for role in o["spec"]["roles"])
    # dev differs from the base's replicas for some models: the patch, not the base, set those
    replicas = {(r.env, o["metadata"]["name"]): o["spec"]["replicas"]
                for r in builds for o in r.objects if o["kind"] == "LeaderWorkerSet"}
    assert seen >= 9 and len(set(replicas.values())) > 1
