"""Bounded runs of the external tools lwsflow drives (git, kubectl kustomize, buildah).

Every run has a deadline and captures its output; a run past its deadline is ``OperationFailed``
naming what was running, so no caller can wait forever or leak a traceback for a hung tool.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from lwsflow.controller.errors import OperationFailed

GIT_TIMEOUT_S = 60.0  # one git command, clone, fetch and push included


def run_bounded(
    cmd: list[str], *, what: str, timeout: float, cwd: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``cmd`` (text output captured, exit status not checked) with a deadline of ``timeout`` s."""
    try:
        return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout,
                              check=False)
    except subprocess.TimeoutExpired:
        raise OperationFailed(f"{what} did not finish within {timeout:.0f}s") from None


def stop_process(proc: subprocess.Popen[bytes], grace_s: float) -> None:
    """Stop a server we started: SIGTERM, ``grace_s`` to exit, then SIGKILL (a no-op once it ended)."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=5)
