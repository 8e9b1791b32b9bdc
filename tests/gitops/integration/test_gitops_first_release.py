"""A new catalog's first release (issue 13.1): tag-only images and ``environments: [dev, prod]``.

Render always writes the tree; prod's aggregate (what Argo CD syncs) holds back a model with no
digest yet, with a comment saying why, until ``set-image``/``promote`` pins it; ``kubectl kustomize
overlays/prod`` never emits a tag-only image; re-rendering after the promotion keeps the pin.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lwsflow.cli import main
from lwsflow.components.catalog import Catalog
from lwsflow.components.gitops import promote, set_image
from lwsflow.components.kustomize import build_model_overlay, build_overlays, kustomize_build
from lwsflow.components.overlays import render_to
from lwsflow.controller.api.objects import container_images
from lwsflow.controller.errors import InvalidInput
from lwsflow.controller.yamlio import dump_yaml
from tests.gitops.gitops_helpers import CATALOG, DIGEST_B, catalog_with, git, identity, stand_in_render

TAG_SMALL = "vllm/vllm-openai:v0.11.0"
TAG_PD = "lmsysorg/sglang:v0.5.0"


def _new_catalog() -> Catalog:
    """The fixture catalog as a new user writes it: images by tag only, environments dev and prod."""
    models = [{**m, "image": m["image"].split("@")[0]} for m in CATALOG["models"]]
    return catalog_with(models=models, environments=["dev", {"name": "prod", "namespace": "llm-prod"}])


def _images(tree: Path, env: str) -> list[str]:
    return sorted({i for o in kustomize_build(tree / env) for i in container_images(o)})


@pytest.fixture
def new_repo(tmp_path: Path) -> tuple[Path, Catalog]:
    repo = tmp_path / "gitops"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    identity(repo)
    cat = _new_catalog()
    render_to(cat, repo / "overlays", render=stand_in_render)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "render")
    return repo, cat


def test_first_render_writes_the_tree_and_holds_unpinned_models_out_of_prod(tmp_path: Path) -> None:
    tree = tmp_path / "overlays"
    changed = render_to(_new_catalog(), tree, render=stand_in_render)
    assert "prod/small/kustomization.yaml" in changed and "dev/kustomization.yaml" in changed
    # dev runs the tags; prod lists nothing yet and says why, per model, in a comment
    assert _images(tree, "dev") == [TAG_PD, TAG_SMALL]
    prod = (tree / "prod" / "kustomization.yaml").read_text()
    assert "resources: []" in prod
    assert f"# - small (not released in prod: no digest pinned for {TAG_SMALL};" in prod
    assert f"# - pd (not released in prod: no digest pinned for {TAG_PD};" in prod
    assert kustomize_build(tree / "prod") == []  # what Argo CD would sync: nothing tag-only
    builds = {b.path: b for b in build_overlays(tree, "prod")}
    assert {p: b.held for p, b in builds.items()} == {
        "prod/pd": f"no digest pinned for {TAG_PD}",
        "prod/small": f"no digest pinned for {TAG_SMALL}",
    }
    # the model overlay exists (set-image/promote pin it there), but building it for prod is refused
    with pytest.raises(InvalidInput, match=r"prod/small.*not pinned by digest"):
        build_model_overlay(tree, "prod", "small")
    assert render_to(_new_catalog(), tree, check=True, render=stand_in_render) == []


def test_render_and_build_overlays_cli_report_not_released(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tree = tmp_path / "overlays"
    render_to(_new_catalog(), tree, render=stand_in_render)
    capsys.readouterr()
    catalog = tmp_path / "catalog.yaml"
    catalog.write_text(dump_yaml(_new_catalog().model_dump(mode="json", exclude_defaults=True)))
    assert main(["render", str(catalog), "--out", str(tmp_path / "real")]) == 0
    assert capsys.readouterr().out.splitlines()[1:] == [
        "prod: not released yet, no digest pinned: small, pd "
        "(`lwsflow set-image` or `lwsflow promote` releases them)"
    ]
    assert main(["build-overlays", str(tree), "--env", "prod"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        f"not released prod/pd: no digest pinned for {TAG_PD}",
        f"not released prod/small: no digest pinned for {TAG_SMALL}",
    ]
    assert main(["build-overlays", str(tree), "--env", "prod", "--json"]) == 0
    built = json.loads(capsys.readouterr().out)
    assert [(b["overlay"], b["released"], b["objects"]) for b in built] == [
        ("prod/pd", False, []),
        ("prod/small", False, []),
    ]


def test_promotion_releases_the_model_and_rerender_keeps_the_pin(new_repo: tuple[Path, Catalog]) -> None:
    repo, cat = new_repo
    tree = repo / "overlays"
    set_image("small", "dev", DIGEST_B, repo=repo, image="registry.example.com/lwsflow/small")
    change = promote("small", "dev", "prod", repo=repo)
    # one commit: the pin and the aggregate that now lists the model
    files = git(repo, "show", "--format=", "--name-only", "HEAD").split()
    assert change.commit
    assert files == ["overlays/prod/kustomization.yaml", "overlays/prod/small/kustomization.yaml"]
    assert _images(tree, "prod") == [f"registry.example.com/lwsflow/small@{DIGEST_B}"]
    prod = (tree / "prod" / "kustomization.yaml").read_text()
    assert "\n- small\n" in prod and "# - pd (not released in prod" in prod
    # render keeps the pin and the listing: the committed tree is exactly what render writes
    assert render_to(cat, tree, check=True, render=stand_in_render) == []
    assert render_to(cat, tree, render=stand_in_render) == []
    assert git(repo, "status", "--porcelain") == ""
    builds = {b.path: b for b in build_overlays(tree, "prod")}
    assert builds["prod/small"].held == "" and builds["prod/pd"].held.startswith("no digest pinned")


def test_set_image_straight_into_prod_lists_it_too(new_repo: tuple[Path, Catalog]) -> None:
    repo, cat = new_repo
    set_image("pd", "prod", DIGEST_B, repo=repo)
    tree = repo / "overlays"
    assert _images(tree, "prod") == [f"lmsysorg/sglang@{DIGEST_B}"]
    assert render_to(cat, tree, check=True, render=stand_in_render) == []


def test_kubectl_kustomize_of_the_real_example_tree_never_emits_a_tag_in_prod(tmp_path: Path) -> None:
    """The real renderer, the real CLI: a new catalog with tag-only images renders (exit 0)."""
    from lwsflow.controller.api.paths import repo_root
    from lwsflow.controller.yamlio import dump_yaml, load_yaml_documents

    doc = load_yaml_documents(repo_root() / "examples" / "catalog.yaml")[0]
    for m in doc["models"]:
        m["image"] = m["image"].split("@")[0]
    doc["environments"] = [{"name": "dev", "namespace": "llm-dev"}, {"name": "prod", "namespace": "llm-prod"}]
    (tmp_path / "catalog.yaml").write_text(dump_yaml(doc))
    out = tmp_path / "overlays"
    assert main(["render", str(tmp_path / "catalog.yaml"), "--out", str(out)]) == 0
    assert _images(out, "prod") == []
    assert all(":" in i.rsplit("/", 1)[-1] for i in _images(out, "dev"))
