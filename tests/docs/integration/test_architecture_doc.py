"""docs/architecture.md's module tables, import graph and line counts are what scripts/architecture.py
generates from the code: a module added, renamed or re-described, or a new import between packages,
without a regenerated doc fails here, in `make test`."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "scripts"))

import architecture

ROOT = architecture.ROOT
FIX = f"docs/architecture.md is stale: run {architecture.COMMAND}"


def test_the_doc_is_generated_from_the_code() -> None:
    run = subprocess.run([sys.executable, str(ROOT / "scripts" / "architecture.py"), "--check"],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, f"{FIX}\n{run.stderr[-4000:]}"


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the packages' modules and the doc, which the script reads and checks in place."""
    for pkg in architecture.PACKAGES:
        shutil.copytree(ROOT / pkg, tmp_path / pkg,
                        ignore=lambda d, names: [n for n in names if n == "__pycache__"
                                                 or ((Path(d) / n).is_file() and not n.endswith(".py"))])
    (tmp_path / "docs").mkdir()
    shutil.copy(architecture.DOC, tmp_path / "docs" / "architecture.md")
    monkeypatch.setattr(architecture, "DOC", tmp_path / "docs" / "architecture.md")
    assert architecture.main([]) == 0  # brought up to date: only the change a test makes is drift
    return tmp_path


def _check(capsys: pytest.CaptureFixture[str]) -> str:
    capsys.readouterr()
    assert architecture.main(["--check"]) == 1
    err = capsys.readouterr().err
    assert f"run {architecture.COMMAND}" in err
    return err


def test_an_added_module_makes_the_doc_stale(tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tree / "controller" / "rollout" / "canary.py").write_text('"""Canary steps by traffic weight."""\n')
    err = _check(capsys)
    assert "+| `rollout/canary.py` | 1 | Canary steps by traffic weight. |" in err
    assert architecture.main([]) == 0  # the fix the message names
    assert architecture.main(["--check"]) == 0
    assert "| `rollout/canary.py` |" in architecture.DOC.read_text()


def test_a_renamed_module_makes_the_doc_stale(tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tree / "controller" / "rollout" / "planner.py").rename(tree / "controller" / "rollout" / "plan.py")
    err = _check(capsys)
    assert "-| `rollout/planner.py` |" in err and "+| `rollout/plan.py` |" in err


def test_a_new_import_edge_makes_the_doc_stale(tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    labels = tree / "controller" / "api" / "labels.py"
    labels.write_text(labels.read_text() + "\nfrom lwsflow.controller.kube import client  # noqa\n")
    err = _check(capsys)
    assert "+- `controller.api` → `controller.errors`, `controller.kube`" in err


def test_a_lines_marker_naming_a_gone_file_is_refused(tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tree / "controller" / "kube" / "informer.py").unlink()
    before = architecture.DOC.read_text()
    assert architecture.main([]) == 2
    assert "`controller/kube/informer.py` in a lines marker names no file" in capsys.readouterr().err
    assert architecture.DOC.read_text() == before  # nothing written


def test_the_graph_sees_lazy_and_typing_only_imports() -> None:
    mod = architecture.Module(Path("pipelines/x.py"), 1, "", {})
    tree = architecture.ast.parse(
        "from typing import TYPE_CHECKING\n"
        "from lwsflow.controller import errors\n"
        "if TYPE_CHECKING:\n    from lwsflow.sim.cluster import Cluster\n"
        "def f():\n    import lwsflow.rehearsal.demo\n")
    mod.imports.update(architecture._imports(tree, mod.dotted, False))
    others = [architecture.Module(Path(p), 1, "", {})
              for p in ("controller/errors.py", "sim/cluster.py", "rehearsal/demo.py")]
    assert architecture.edges([mod, *others]) == {
        ("pipelines", "controller.errors"): "import", ("pipelines", "sim"): "typing",
        ("pipelines", "rehearsal"): "lazy"}


def test_lengths_are_rounded_to_two_figures() -> None:
    assert [architecture.rounded(n) for n in (4, 69, 647, 1461, 14463)] == [4, 69, 650, 1500, 14000]
