"""Generated bad input through the real CLI: every invalid catalog and manifest is refused with exit 2
and one line naming the broken field, without a traceback and without touching the output folder;
every valid generated catalog renders, validates and renders again byte for byte.

Counts here (derandomized, so the same examples every run): 200 invalid catalogs, each through one of
`plan`, `plan --json`, `render`, `render --check` or `render` into a new folder, and 120 invalid
LWS/DS manifests through `validate`. ``reliability/bad_input_campaign.py`` runs the same strategies
through every command at campaign counts (thousands) and prints the figures.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from reliability.cli_harness import (
    CATALOG_COMMANDS,
    assert_refused,
    catalog_command,
    run_cli,
    snapshot,
    snapshot_changes,
    tree_bytes,
    validate_problems,
    write_yaml,
)
from reliability.strategies import CAMPAIGN, Broken, invalid_catalogs, invalid_manifests, valid_catalogs

# celpy.Environment raises the recursion limit to 2500 when the first CEL rule is compiled; raising it
# here, before any hypothesis example runs, keeps hypothesis from warning that it changed under it
sys.setrecursionlimit(max(sys.getrecursionlimit(), 2500))


@settings(CAMPAIGN, max_examples=200)
@given(case=invalid_catalogs(), command=st.sampled_from(CATALOG_COMMANDS))
def test_invalid_catalog_refused(case: Broken, command: str, rendered_tree: Path, scratch: Path) -> None:
    catalog = write_yaml(scratch / "catalog.yaml", case.doc)
    fresh = scratch / "never-created"
    before = snapshot(rendered_tree)

    res = run_cli(catalog_command(command, catalog, rendered_tree, fresh))

    assert_refused(res, case.field)
    assert snapshot_changes(before, snapshot(rendered_tree)) == []
    assert not fresh.exists()


@settings(CAMPAIGN, max_examples=120)
@given(case=invalid_manifests())
def test_invalid_manifest_refused_by_validate(case: Broken, scratch: Path) -> None:
    folder = scratch / "manifests"
    manifest = write_yaml(folder / "workload.yaml", case.doc)
    before = snapshot(folder)

    res = run_cli(["validate", "-q", manifest])

    problems = validate_problems(res, manifest, case.field)
    assert not problems, f"{case.what}: {'; '.join(problems)}\n{res.out}{res.err}"
    assert snapshot_changes(before, snapshot(folder)) == []


@settings(CAMPAIGN, max_examples=12)
@given(doc=valid_catalogs())
def test_valid_catalog_renders_deterministically(doc: dict, scratch: Path) -> None:
    work = scratch / "valid"
    shutil.rmtree(work, ignore_errors=True)
    catalog = write_yaml(work / "catalog.yaml", doc)

    plan = run_cli(["plan", catalog, "--json"])
    first = run_cli(["render", catalog, "--out", work / "a"])
    second = run_cli(["render", catalog, "--out", work / "b"])

    assert (plan.code, first.code, second.code) == (0, 0, 0), plan.err + first.err + second.err
    assert tree_bytes(work / "a") == tree_bytes(work / "b")
    # rendering again over its own output changes nothing, not even a modification time
    before = snapshot(work / "a")
    again = run_cli(["render", catalog, "--out", work / "a"])
    assert again.code == 0 and "unchanged" in again.out
    assert snapshot_changes(before, snapshot(work / "a")) == []
    assert run_cli(["render", catalog, "--out", work / "a", "--check"]).code == 0
    # whatever render accepts, the API-server validation accepts too
    check = run_cli(["validate", "-q", work / "a"])
    assert check.code == 0, check.err


@settings(CAMPAIGN, max_examples=2)
@given(doc=valid_catalogs())
def test_valid_catalog_overlays_build(doc: dict, scratch: Path) -> None:
    """Rendered overlays go through real `kubectl kustomize` (a few examples: one process per env)."""
    work = scratch / "built"
    shutil.rmtree(work, ignore_errors=True)
    catalog = write_yaml(work / "catalog.yaml", doc)
    assert run_cli(["render", catalog, "--out", work / "overlays"]).code == 0

    res = run_cli(["build-overlays", work / "overlays"])

    assert res.code == 0, res.err
