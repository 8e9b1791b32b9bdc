"""Build lwsflow's wheel from a source folder and install it alone into a fresh venv, offline.

Shared by tests/repo/e2e/test_wheel_install.py (the wheel users install) and
tests/repo/e2e/test_image_content.py (what the controller image installs). The wheel is built with
the project venv's setuptools (``--no-build-isolation``, ``--no-index``); the fresh venv gets only
the wheel, and a ``.pth`` line lends it the project venv's site-packages for the dependencies. A
``.pth`` line adds a folder to ``sys.path`` without running the ``.pth`` files in it, so the
project's editable-install finder stays out and only the wheel's code can be imported. """

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path


def run(cmd: list[str | Path], cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """A command outside the project venv's environment (no PYTHONPATH, no VIRTUAL_ENV)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return subprocess.run([str(c) for c in cmd], cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          check=False, env=env)


def install_wheel(src: Path, tmp: Path) -> tuple[Path, Path]:
    """Build the wheel of ``src`` and install it into ``tmp/venv``: (its bin folder, its site-packages)."""
    built = run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
                 "-w", tmp / "dist", src], tmp, timeout=300)
    assert built.returncode == 0, built.stdout + built.stderr
    (wheel,) = (tmp / "dist").glob("lwsflow-*.whl")
    venv = tmp / "venv"
    made = run([sys.executable, "-m", "venv", "--without-pip", venv], tmp)
    assert made.returncode == 0, made.stderr
    python = venv / "bin" / "python"
    inst = run([sys.executable, "-m", "pip", "--python", python, "install", "--no-index", "--no-deps",
                wheel], tmp)
    assert inst.returncode == 0, inst.stdout + inst.stderr
    site = Path(run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                    tmp).stdout.strip())
    (site / "_project_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return venv / "bin", site
