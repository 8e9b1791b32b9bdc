"""What ships is only the product: the controller image (``Containerfile``) copies controller,
components, pipelines and the front ends (cli, dashboard, report), not the embedded cluster
(``sim/``) nor the tools that rehearse the product on it (``rehearsal/``), and every module it installs
imports without them.

The image's ``pip install .`` is reproduced offline: a wheel is built from exactly the files the
Containerfile copies (``--no-build-isolation``, the project venv's setuptools), installed into a fresh
venv by ``tests/wheelkit.py`` (as tests/repo/e2e/test_wheel_install.py does), and the controller is started
from there.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from lwsflow.cli import REHEARSAL_COMMANDS
from tests.wheelkit import install_wheel, run

ROOT = Path(__file__).resolve().parents[3]
CONTAINERFILE = ROOT / "Containerfile"
SHIPPED = ["cli", "components", "controller", "dashboard", "pipelines", "report"]



def _copied() -> list[str]:
    """The sources of the Containerfile's COPY instructions (``COPY a b ./`` -> a, b)."""
    out = []
    for line in CONTAINERFILE.read_text().splitlines():
        m = re.match(r"\s*COPY\s+(?!--from)(.+)$", line)
        if m:
            out.extend(m.group(1).split()[:-1])
    return out



def test_the_image_copies_the_product_only() -> None:
    assert sorted(_copied()) == sorted(["README.md", *SHIPPED, "pyproject.toml", "setup.py"])


def test_the_controller_runs_from_the_image_content_without_the_embedded_cluster(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    for rel in _copied():
        if (ROOT / rel).is_dir():
            shutil.copytree(ROOT / rel, src / rel, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(ROOT / rel, src / rel)
    bindir, site = install_wheel(src, tmp_path)
    assert sorted(p.name for p in (site / "lwsflow").iterdir()) == SHIPPED

    for absent in ("lwsflow.sim", "lwsflow.rehearsal"):
        gone = run([bindir / "python", "-c", f"import {absent}"], tmp_path)
        assert f"No module named '{absent}'" in gone.stderr, gone.stderr
    # every shipped module imports without them: no exception list
    walk = run([bindir / "python", "-c",
                "import importlib, pkgutil\n"
                "def fail(name):\n    raise SystemExit(f'cannot import {name}')\n"
                "n = 0\n"
                f"for pkg in [importlib.import_module('lwsflow.' + d) for d in {SHIPPED}]:\n"
                "    for m in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + '.', onerror=fail):\n"
                "        importlib.import_module(m.name)\n"
                "        n += 1\n"
                "print(n)\n"], tmp_path, timeout=300)
    assert walk.returncode == 0, walk.stderr
    shipped = sum(1 for d in SHIPPED for _ in (src / d).rglob("*.py")) - len(SHIPPED)
    assert int(walk.stdout) == shipped, walk.stdout  # every .py file but each package's top __init__.py
    helped = run([bindir / "lwsflow", "controller", "run", "--help"], tmp_path)
    assert helped.returncode == 0, helped.stdout + helped.stderr
    assert "--leader-elect" in helped.stdout and "--cluster-clock" in helped.stdout
    for command in REHEARSAL_COMMANDS:  # a rehearsal command: one line saying what it needs, exit 1
        absent = run([bindir / "lwsflow", command, "--port", "0"], tmp_path)
        assert absent.returncode == 1, absent.stdout + absent.stderr
        (line,) = absent.stderr.splitlines()
        assert line.startswith(f"error: lwsflow {command} needs the full install"), line
