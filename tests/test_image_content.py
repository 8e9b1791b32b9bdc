"""What ships is only the product: the controller image (``Containerfile``) copies controller,
components and pipelines, not the embedded cluster (``sim/``), and what it installs works without it.

The image's ``pip install .`` is reproduced offline: a wheel is built from exactly the files the
Containerfile copies (``--no-build-isolation``, the project venv's setuptools), installed into a fresh
venv by ``tests/wheelkit.py`` (as tests/test_wheel_install.py does), and the controller is started
from there.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from wheelkit import install_wheel, run

ROOT = Path(__file__).resolve().parents[1]
CONTAINERFILE = ROOT / "Containerfile"

pytestmark = pytest.mark.slow


def _copied() -> list[str]:
    """The sources of the Containerfile's COPY instructions (``COPY a b ./`` -> a, b)."""
    out = []
    for line in CONTAINERFILE.read_text().splitlines():
        m = re.match(r"\s*COPY\s+(?!--from)(.+)$", line)
        if m:
            out.extend(m.group(1).split()[:-1])
    return out



def test_the_image_copies_the_product_only() -> None:
    assert sorted(_copied()) == ["README.md", "components", "controller", "pipelines", "pyproject.toml",
                                 "setup.py"]


def test_the_controller_runs_from_the_image_content_without_the_embedded_cluster(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    for rel in _copied():
        if (ROOT / rel).is_dir():
            shutil.copytree(ROOT / rel, src / rel, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(ROOT / rel, src / rel)
    bindir, site = install_wheel(src, tmp_path)
    assert sorted(p.name for p in (site / "lwsflow").iterdir()) == ["components", "controller", "pipelines"]

    nosim = run([bindir / "python", "-c", "import lwsflow.sim"], tmp_path)
    assert "No module named 'lwsflow.sim'" in nosim.stderr, nosim.stderr
    # every controller and pipeline-step module imports without the embedded cluster; the one
    # exception builds the embedded cluster's config (used by `sim serve` and the local stack only)
    walk = run([bindir / "python", "-c", "import importlib, pkgutil, lwsflow.controller, lwsflow.components\n"
                 "for pkg in (lwsflow.controller, lwsflow.components):\n"
                 "    for m in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + '.'):\n"
                 "        if m.name != 'lwsflow.components.catalog_cluster':\n"
                 "            importlib.import_module(m.name)\n"], tmp_path)
    assert walk.returncode == 0, walk.stderr
    helped = run([bindir / "lwsflow", "controller", "run", "--help"], tmp_path)
    assert helped.returncode == 0, helped.stdout + helped.stderr
    assert "--leader-elect" in helped.stdout and "--cluster-clock" in helped.stdout
