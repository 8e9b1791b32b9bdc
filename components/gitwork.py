"""Throw-away git clones for pipeline steps: each step clones the GitOps repo, works, pushes.

Pipeline steps run in separate pods (or subprocesses locally) and share nothing but the repository,
so every step starts from ``repo_url`` at a known commit and publishes by pushing. Credentials come
from the environment (``GIT_USERNAME`` / ``GIT_PASSWORD``, filled from a Kubernetes Secret) through a
credential helper that reads them at use time, so they never appear on a command line or in a URL.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from lwsflow.components.proc import GIT_TIMEOUT_S, run_bounded
from lwsflow.controller.errors import OperationFailed

_IDENTITY = {"GIT_AUTHOR_NAME": "lwsflow pipeline", "GIT_AUTHOR_EMAIL": "pipeline@lwsflow.invalid",
             "GIT_COMMITTER_NAME": "lwsflow pipeline", "GIT_COMMITTER_EMAIL": "pipeline@lwsflow.invalid"}
# Reads the secret-backed variables when git asks; the single quotes keep them out of argv.
_CRED_HELPER = '!f() { echo "username=${GIT_USERNAME}"; echo "password=${GIT_PASSWORD}"; }; f'


def git_env() -> dict[str, str]:
    """The environment for git: a commit identity unless one is set, no interactive prompts."""
    env = dict(os.environ)
    for k, v in _IDENTITY.items():
        env.setdefault(k, v)
    env["GIT_TERMINAL_PROMPT"] = "0"
    return env


def git(*args: str, cwd: Path | None = None, timeout: float = GIT_TIMEOUT_S) -> str:
    """Run git; a failure is ``OperationFailed`` with git's own last line."""
    pre = ["-c", f"credential.helper={_CRED_HELPER}"] if os.environ.get("GIT_USERNAME") else []
    p = run_bounded(["git", *pre, *args], what=f"git {args[0]}", timeout=timeout, cwd=cwd, env=git_env())
    if p.returncode != 0:
        lines = [ln for ln in (p.stderr or p.stdout).splitlines() if ln.strip()]
        raise OperationFailed(f"git {args[0]} failed: {lines[-1] if lines else p.returncode}")
    return p.stdout.strip()


@contextmanager
def checkout(repo_url: str, commit: str = "", branch: str = "main") -> Iterator[Path]:
    """A fresh clone of ``repo_url`` on ``branch`` (at ``commit`` when given), deleted afterwards."""
    with tempfile.TemporaryDirectory(prefix="lwsflow-git-") as tmp:
        work = Path(tmp) / "repo"
        git("clone", "--quiet", "--branch", branch, repo_url, str(work))
        # Library code commits with plain git in this clone: give it the pipeline's identity there.
        env = git_env()
        git("config", "user.name", env["GIT_AUTHOR_NAME"], cwd=work)
        git("config", "user.email", env["GIT_AUTHOR_EMAIL"], cwd=work)
        if commit:
            git("fetch", "--quiet", "origin", commit, cwd=work)
            git("checkout", "--quiet", "-B", branch, commit, cwd=work)
        yield work


def head(work: Path) -> str:
    return git("rev-parse", "HEAD", cwd=work)


def commit_all(work: Path, message: str) -> bool:
    """Commit every change in the clone; False when there was nothing to commit."""
    git("add", "-A", cwd=work)
    if not git("status", "--porcelain", cwd=work):
        return False
    git("commit", "--quiet", "-m", message, cwd=work)
    return True


def push(work: Path, refspec: str, force: bool = False) -> None:
    git("push", "--quiet", *(["--force"] if force else []), "origin", refspec, cwd=work)
