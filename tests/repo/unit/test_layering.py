"""Dependencies point one way: the front ends (cli -> dashboard, report) -> pipelines -> components ->
controller; inside controller, the rollout engine, the cluster-access layer and the API types never know
about the embedded cluster. What ships (the Containerfile copies controller, components, pipelines, cli,
dashboard and report) never imports the embedded cluster (``sim``) or the tools that rehearse the product
on it (``rehearsal``), which stand on top of it all."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]

NOT_SHIPPED = ("lwsflow.sim", "lwsflow.rehearsal")
# package (as a path prefix) -> module prefixes it must never import
FRONT_ENDS = ("lwsflow.cli", "lwsflow.dashboard", "lwsflow.report")
# what drives a cluster: the rollout executors, the feature folders built on them, the operator
DRIVERS = ("lwsflow.controller.rollout", "lwsflow.controller.bluegreen", "lwsflow.controller.pd",
           "lwsflow.controller.incluster")
FORBIDDEN = {
    "controller": ("lwsflow.components", "lwsflow.pipelines", *FRONT_ENDS, *NOT_SHIPPED),
    "components": ("lwsflow.pipelines", *FRONT_ENDS, *NOT_SHIPPED),
    "pipelines": (*FRONT_ENDS, *NOT_SHIPPED),
    # the dashboard and the report pictures are libraries the commands call, never the other way
    "dashboard": ("lwsflow.cli", "lwsflow.report", *NOT_SHIPPED),
    "report": ("lwsflow.cli", "lwsflow.dashboard", "lwsflow.pipelines", *NOT_SHIPPED),
    "cli": NOT_SHIPPED,
    "controller/api": (*DRIVERS, "lwsflow.controller.kube"),
    "controller/kube": DRIVERS,
    # The embedded cluster stands in for Kubernetes: it never reaches into the controller that drives it,
    # nor into the tools built on it.
    "sim": (*DRIVERS, "lwsflow.controller.kube", "lwsflow.components",
            "lwsflow.pipelines", *FRONT_ENDS, "lwsflow.rehearsal"),
}
# The only imports against FORBIDDEN, each inside a function (never at import time), with its reason.
ALLOWED = {
    ("cli/__init__.py", "lwsflow.rehearsal.cli"):
        "registers the rehearsal commands (demo, engine-stub, sim, refcluster) where lwsflow.rehearsal "
        "is installed; where it is not (the image) each of them says in one line that it needs the full "
        "install",
}
# The old top-level names must be gone everywhere: an import of ``controller`` means a stale path.
STALE = ("controller", "components", "pipelines", "cli", "dashboard", "report", "sim", "rehearsal")


def _imports(path: Path, *, in_functions: bool = False) -> set[str]:
    """The modules ``path`` imports: import statements and ``importlib.import_module`` /
    ``__import__`` calls with a literal name (an f-string counts by its literal prefix). With
    ``in_functions``: only those inside a function body (lazy imports)."""
    tree = ast.parse(path.read_text(), str(path))
    roots: list[ast.AST] = [tree]
    if in_functions:
        roots = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
    out: set[str] = set()
    for node in (n for root in roots for n in ast.walk(root)):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
        elif isinstance(node, ast.Call) and node.args and _is_import_call(node.func):
            arg = node.args[0]
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                out.add(arg.value)
            elif (isinstance(arg, ast.JoinedStr) and arg.values and isinstance(arg.values[0], ast.Constant)
                  and isinstance(arg.values[0].value, str)):
                out.add(arg.values[0].value.rstrip("."))
    return out


def _is_import_call(func: ast.expr) -> bool:
    return ((isinstance(func, ast.Attribute) and func.attr == "import_module")
            or (isinstance(func, ast.Name) and func.id in ("import_module", "__import__")))


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_no_import_against_the_layering(package: str) -> None:
    files = sorted((ROOT / package).rglob("*.py"))
    assert files, package
    bad = [f"{f.relative_to(ROOT)} imports {m}" for f in files for m in sorted(_imports(f))
           if any(m == p or m.startswith(p + ".") for p in FORBIDDEN[package])
           and (str(f.relative_to(ROOT)), m) not in ALLOWED]
    assert not bad, bad


@pytest.mark.parametrize(("where", "module"), sorted(ALLOWED))
def test_each_allowed_import_is_there_and_lazy(where: str, module: str) -> None:
    """An allowance that is no longer used goes; one that moved to import time is a violation."""
    assert module in _imports(ROOT / where, in_functions=True), (where, module)


@pytest.mark.parametrize("package", ["controller", "components", "pipelines", "cli", "dashboard", "report",
                                     "sim", "rehearsal", "tests",
                                     "bench", "reliability", "scripts"])
def test_every_import_uses_the_lwsflow_namespace(package: str) -> None:
    bad = [f"{f.relative_to(ROOT)} imports {m}" for f in sorted((ROOT / package).rglob("*.py"))
           for m in sorted(_imports(f)) if m.split(".")[0] in STALE]
    assert not bad, bad


def test_the_check_sees_a_violation(tmp_path: Path) -> None:
    bad = tmp_path / "x.py"
    bad.write_text("from lwsflow.components.catalog import Catalog\nimport lwsflow.cli\n"
                   "import importlib\nimportlib.import_module('lwsflow.sim.engine')\n"
                   "def f(n):\n    importlib.import_module(f'lwsflow.rehearsal.cli.{n}')\n")
    assert _imports(bad) == {"lwsflow.components.catalog", "lwsflow.cli", "importlib",
                             "lwsflow.sim.engine", "lwsflow.rehearsal.cli"}
    assert _imports(bad, in_functions=True) == {"lwsflow.rehearsal.cli"}


def test_scripts_never_reach_into_tests() -> None:
    """Campaigns and benchmarks share code through importable packages (``reliability``,
    ``lwsflow.sim.testing``), never by putting ``tests/`` on ``sys.path``."""
    bad = [str(f.relative_to(ROOT)) for d in ("bench", "reliability", "scripts")
           for f in sorted((ROOT / d).rglob("*.py"))
           if any("sys.path" in line and "tests" in line for line in f.read_text().splitlines())]
    assert not bad, bad
