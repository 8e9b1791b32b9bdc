"""Issue 31.6: a pool the models overcommit together, and environments sharing a namespace, are refused
by `plan` and `render` (one line, exit 2, nothing written) unless the catalog opts in explicitly
(``allowOvercommit: true`` on the pool, ``allowSharedNamespace: true`` on the catalog)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from lwsflow.cli import main
from lwsflow.components.catalog import parse_catalog
from lwsflow.controller.errors import InvalidInput
from tests.render.render_helpers import BIG_405B, ENVS, H100_POOL, LLAMA_8B, SMALL_8B, catalog_doc, user_doc


def _write(tmp_path: Path, doc: dict[str, Any]) -> Path:
    path = tmp_path / "catalog.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def _namespace(out: Path, env: str, model: str) -> str:
    return str(yaml.safe_load((out / env / model / "kustomization.yaml").read_text())["namespace"])


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


# the figures: 4 groups of the 405B x 2 nodes + the 8B's node = 9 of 8 nodes
OVERCOMMITTED = user_doc({**BIG_405B, "replicas": 4})
OVERCOMMIT_LINE = ("nodePools[h100-pool].nodes: pool h100-pool has 8 nodes but its models need 9 together "
                   "(big-405b 8, llama-8b 1); short by 1 node: lower replicas, add nodes, or set "
                   "allowOvercommit: true on the pool")


@pytest.mark.parametrize("argv", [["plan"], ["plan", "--json"], ["plan", "--env", "dev"]])
def test_plan_refuses_an_overcommitted_pool(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                            argv: list[str]) -> None:
    path = _write(tmp_path, OVERCOMMITTED)
    assert main([argv[0], str(path), *argv[1:]]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    env = " in environment dev" if "--env" in argv else ""
    assert captured.err == f"error: {path}: {OVERCOMMIT_LINE.replace(' together', ' together' + env)}\n"


def test_render_refuses_it_and_leaves_the_tree_as_it_was(tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path, user_doc())
    out = tmp_path / "out"
    assert main(["render", str(path), "--out", str(out)]) == 0  # 3 groups: 2 x 2 + 1 nodes fit
    before = _tree(out)
    path.write_text(yaml.safe_dump(OVERCOMMITTED))
    capsys.readouterr()
    assert main(["render", str(path), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {path}: nodePools[h100-pool].nodes: ") and err.count("\n") == 1
    assert "big-405b 8, llama-8b 1" in err
    assert _tree(out) == before
    assert main(["render", str(path), "--out", str(tmp_path / "fresh")]) == 2
    assert not (tmp_path / "fresh").exists()


def test_an_environment_override_that_overcommits_is_refused_naming_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    envs = [ENVS[0], {**ENVS[1], "overrides": {"big-405b": {"replicas": 4}}}]
    path = _write(tmp_path, user_doc(environments=envs))
    assert main(["plan", str(path)]) == 0  # the base values fit
    capsys.readouterr()
    assert main(["plan", str(path), "--env", "prod"]) == 2
    assert "models need 9 together in environment prod (big-405b 8, llama-8b 1)" in capsys.readouterr().err
    assert main(["render", str(path), "--out", str(tmp_path / "out")]) == 2
    assert "in environment prod" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_allow_overcommit_on_the_pool_opts_in(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = user_doc({**BIG_405B, "replicas": 4}, pools=[{**H100_POOL, "allowOvercommit": True}])
    path = _write(tmp_path, doc)
    assert main(["plan", str(path)]) == 0
    assert "need 9 of 8 nodes (OVERCOMMITTED, allowed by allowOvercommit)" in capsys.readouterr().out
    assert main(["plan", str(path), "--json"]) == 0
    pool = json.loads(capsys.readouterr().out)["pools"][0]
    assert (pool["nodes_used"], pool["fits"], pool["allow_overcommit"]) == (9, False, True)
    assert pool["models"] == {"big-405b": 8, "llama-8b": 1}
    assert main(["render", str(path), "--out", str(tmp_path / "out")]) == 0
    assert (tmp_path / "out" / "prod" / "big-405b" / "kustomization.yaml").is_file()


@pytest.mark.parametrize(("value", "fragment"), [(1, "Input should be a valid boolean"),
                                                 ("maybe", "Input should be a valid boolean")])
def test_allow_overcommit_takes_a_boolean_only(value: Any, fragment: str) -> None:
    with pytest.raises(InvalidInput) as info:
        parse_catalog(user_doc(pools=[{**H100_POOL, "allowOvercommit": value}]))
    assert info.value.field == "nodePools[h100-pool].allowOvercommit" and fragment in info.value.message


# -- environments and namespaces ------------------------------------------------------------------------

@pytest.mark.parametrize(("environments", "message"), [
    (["dev", "prod"], "dev and prod both render into namespace 'llm'"),
    ([{"name": "dev", "namespace": "team"}, {"name": "prod", "namespace": "team"}],
     "dev and prod both render into namespace 'team'"),
    (["dev", "staging", {"name": "prod", "namespace": "llm"}],
     "dev, staging and prod all render into namespace 'llm'"),
], ids=["plain-names", "same-namespace", "three"])
def test_environments_sharing_a_namespace_are_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], environments: list[Any], message: str) -> None:
    path = _write(tmp_path, catalog_doc(LLAMA_8B, environments=environments))
    for argv in (["plan", str(path)], ["render", str(path), "--out", str(tmp_path / "out")]):
        assert main(argv) == 2
        captured = capsys.readouterr()
        assert captured.out == ""
        assert captured.err == (
            f"error: {path}: environments: {message}, where their objects (the same names) would overwrite "
            "each other: give each its own namespace, or set allowSharedNamespace: true if they run on "
            "separate clusters\n")
    assert not (tmp_path / "out").exists()


def test_allow_shared_namespace_opts_in(tmp_path: Path) -> None:
    path = _write(tmp_path, catalog_doc(LLAMA_8B, environments=["dev", "prod"], allowSharedNamespace=True))
    assert main(["render", str(path), "--out", str(tmp_path / "out")]) == 0
    assert [_namespace(tmp_path / "out", env, "llama-8b") for env in ("dev", "prod")] == ["llm", "llm"]


def test_one_environment_in_the_catalog_namespace_and_others_in_their_own() -> None:
    envs = ["dev", {"name": "prod", "namespace": "llm-prod"}]
    cat = parse_catalog(catalog_doc(LLAMA_8B, environments=envs))
    assert [(e.name, e.namespace) for e in cat.environments] == [("dev", None), ("prod", "llm-prod")]


def test_default_environments_each_get_a_namespace(tmp_path: Path) -> None:
    """Without `environments`, dev, staging and prod are <namespace>-<env>, not all the catalog's."""
    cat = parse_catalog(catalog_doc(LLAMA_8B))
    assert [(e.name, e.namespace) for e in cat.environments] == [
        ("dev", "llm-dev"), ("staging", "llm-staging"), ("prod", "llm-prod")]
    path = _write(tmp_path, catalog_doc(SMALL_8B | {"nodePool": "h100-pool"}, pools=[H100_POOL]))
    assert main(["render", str(path), "--out", str(tmp_path / "out")]) == 0
    assert _namespace(tmp_path / "out", "staging", "llama-8b") == "llm-staging"
