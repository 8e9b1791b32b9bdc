"""Dependencies point one way: pipelines -> components -> controller; inside controller, the rollout
engine, the cluster-access layer and the API types never know about the embedded cluster."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# package (as a path prefix) -> module prefixes it must never import
FORBIDDEN = {
    "controller": ("lwsflow.components", "lwsflow.pipelines", "lwsflow.sim"),
    "components": ("lwsflow.pipelines",),
    "controller/api": ("lwsflow.controller.rollout", "lwsflow.controller.kube"),
    "controller/kube": ("lwsflow.controller.rollout",),
    # The embedded cluster stands in for Kubernetes: it never reaches into the controller that drives it.
    "sim": ("lwsflow.controller.rollout", "lwsflow.controller.kube", "lwsflow.components",
            "lwsflow.pipelines"),
}
# The old top-level names must be gone everywhere: an import of ``controller`` means a stale path.
STALE = ("controller", "components", "pipelines", "sim")


def _imports(path: Path) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
    return out


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_no_import_against_the_layering(package: str) -> None:
    files = sorted((ROOT / package).rglob("*.py"))
    assert files, package
    bad = [f"{f.relative_to(ROOT)} imports {m}" for f in files for m in sorted(_imports(f))
           if any(m == p or m.startswith(p + ".") for p in FORBIDDEN[package])]
    assert not bad, bad


@pytest.mark.parametrize("package", ["controller", "components", "pipelines", "sim", "tests", "bench",
                                     "reliability", "scripts"])
def test_every_import_uses_the_lwsflow_namespace(package: str) -> None:
    bad = [f"{f.relative_to(ROOT)} imports {m}" for f in sorted((ROOT / package).rglob("*.py"))
           for m in sorted(_imports(f)) if m.split(".")[0] in STALE]
    assert not bad, bad


def test_the_check_sees_a_violation(tmp_path: Path) -> None:
    bad = tmp_path / "x.py"
    bad.write_text("from lwsflow.components.catalog import Catalog\nimport lwsflow.pipelines.cli\n")
    assert _imports(bad) == {"lwsflow.components.catalog", "lwsflow.pipelines.cli"}


def test_scripts_never_reach_into_tests() -> None:
    """Campaigns and benchmarks share code through importable packages (``reliability``,
    ``lwsflow.sim.testing``), never by putting ``tests/`` on ``sys.path``."""
    bad = [str(f.relative_to(ROOT)) for d in ("bench", "reliability", "scripts")
           for f in sorted((ROOT / d).rglob("*.py"))
           if any("sys.path" in line and "tests" in line for line in f.read_text().splitlines())]
    assert not bad, bad
