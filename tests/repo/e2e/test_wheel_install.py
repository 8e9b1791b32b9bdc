"""The wheel is what users install: build it, install it into a fresh venv, and run the CLI from outside
the repository. Everything lands under ``lwsflow.*`` (no generic top-level ``controller``,
``components``, ``pipelines``, ``cli``, ``dashboard``, ``report``, ``sim`` or ``rehearsal``), and the
package data the commands read (CRD schemas, Lua health checks, shipped scenarios) travels inside it.

Offline and fast: the wheel is built from a copy of the source tree (so no ``build/`` appears in the
checkout) and installed alone into a fresh venv by ``tests/wheelkit.py``.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.wheelkit import install_wheel, run

ROOT = Path(__file__).resolve().parents[3]
DATA = ("lwsflow/controller/api/crds/leaderworkersets.json.gz",
        "lwsflow/controller/api/crds/disaggregatedsets.json.gz",
        "lwsflow/components/argocd_health/leaderworkerset.lua",
        "lwsflow/components/argocd_health/disaggregatedset.lua",
        "lwsflow/sim/evaluator/scenarios/deadlines.yaml",
        "lwsflow/dashboard/templates/base.html",  # the dashboard's pages and offline assets
        "lwsflow/dashboard/vendor/htmx.min.js")




@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path]]:
    """(the fresh venv's bin folder, its site-packages) with only the built wheel installed."""
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"
    files = run(["git", "ls-files", "-co", "--exclude-standard", "-z"], ROOT)
    assert files.returncode == 0, files.stderr
    for rel in filter(None, files.stdout.split("\0")):
        if (ROOT / rel).is_file():
            (src / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / rel, src / rel)
    yield install_wheel(src, tmp)


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A working directory outside the repository."""
    assert ROOT not in tmp_path.parents
    return tmp_path


def test_wheel_holds_the_package_data(installed: tuple[Path, Path]) -> None:
    _, site = installed
    missing = [d for d in DATA if not (site / d).is_file()]
    assert not missing, missing
    assert sorted(p.name for p in site.iterdir() if p.suffix not in (".pth", ".dist-info")
                  and p.name != "__pycache__") == ["lwsflow"]


def test_cli_runs_from_the_wheel(installed: tuple[Path, Path], outside: Path) -> None:
    bin_dir, site = installed
    lwsflow = bin_dir / "lwsflow"
    res = run([lwsflow, "--help"], outside)
    assert res.returncode == 0 and "Usage: lwsflow" in res.stdout, res.stderr
    res = run([lwsflow, "plan", ROOT / "examples" / "catalog.yaml"], outside)
    assert res.returncode == 0 and "llama-405b" in res.stdout, res.stderr
    kc = outside / "sim" / "kubeconfig"
    res = run([lwsflow, "sim", "serve", "--duration", "1", "--kubeconfig", kc], outside)
    assert res.returncode == 0 and "serving https://127.0.0.1:" in res.stdout, res.stderr
    assert kc.stat().st_mode & 0o777 == 0o600
    res = run([lwsflow, "sim", "evaluate", "deadlines", "--json"], outside)  # a shipped scenario
    assert res.returncode == 0, res.stderr
    where = run([bin_dir / "python", "-c", "import lwsflow.controller, lwsflow.sim.testing; "
                  "print(lwsflow.controller.__file__)"], outside)
    assert where.returncode == 0 and where.stdout.startswith(str(site)), where.stdout + where.stderr


@pytest.mark.parametrize("name", ["controller", "components", "pipelines", "cli", "dashboard", "report",
                                  "sim", "rehearsal"])
def test_no_generic_top_level_package(installed: tuple[Path, Path], outside: Path, name: str) -> None:
    res = run([installed[0] / "python", "-c", f"import {name}"], outside)
    assert res.returncode == 1 and f"No module named '{name}'" in res.stderr, res.stdout + res.stderr
