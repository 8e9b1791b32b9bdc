"""Run `lwsflow` in-process and check how it refuses: exit code, one line naming the field, nothing
written. Shared by the reliability tests and ``reliability/bad_input_campaign.py``.

The CLI runs through ``lwsflow.cli.main(argv)`` (which returns the exit code), with stdout and
stderr captured by ``contextlib.redirect_*``: that works inside hypothesis loops, where pytest's
function-scoped ``capsys`` cannot be reset per example.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

TRACEBACK_MARKERS = ("Traceback (most recent call last)", 'File "', "error: internal:")


@dataclass(frozen=True)
class CliResult:
    code: int
    out: str
    err: str

    @property
    def text(self) -> str:
        return self.out + self.err


def run_cli(argv: list[str], env: dict[str, str] | None = None) -> CliResult:
    """``lwsflow ARGV`` in this process; ``env`` entries are set for the call and restored after."""
    from lwsflow.cli import main

    out, err = io.StringIO(), io.StringIO()
    saved = {k: os.environ.get(k) for k in env or {}}
    os.environ.update(env or {})
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main([str(a) for a in argv])
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return CliResult(code, out.getvalue(), err.getvalue())


# every command that reads a catalog, the render ones over an existing tree, with --check, and into a
# folder that does not exist yet (which a refusal must not create)
CATALOG_COMMANDS = ("plan", "plan-json", "render", "render-check", "render-fresh")


def catalog_command(command: str, catalog: Path, tree: Path, fresh: Path) -> list[object]:
    """The argv for one of ``CATALOG_COMMANDS``."""
    return {"plan": ["plan", catalog], "plan-json": ["plan", catalog, "--json"],
            "render": ["render", catalog, "--out", tree],
            "render-check": ["render", catalog, "--out", tree, "--check"],
            "render-fresh": ["render", catalog, "--out", fresh]}[command]


def write_yaml(path: Path, doc: Any) -> Path:
    """Write ``doc`` as YAML (strings with any characters survive: yaml escapes them)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(doc, sort_keys=False, allow_unicode=False, width=10_000))
    return path


# -- how a refusal must look ---------------------------------------------------------------------------


def refusal_problems(res: CliResult, field: str, *, code: int = 2) -> list[str]:
    """Everything wrong with a refusal of a one-line-error command (plan, render, set-image, ...)."""
    problems = []
    if res.code != code:
        problems.append(f"exit code {res.code}, expected {code}")
    lines = res.err.splitlines()
    if len(lines) != 1:
        problems.append(f"stderr has {len(lines)} lines, expected exactly one")
    elif not lines[0].startswith("error: "):
        problems.append("stderr line does not start with 'error: '")
    if field and field not in res.err:
        problems.append(f"stderr does not name the field {field!r}")
    if any(m in res.text for m in TRACEBACK_MARKERS):
        problems.append("output contains a traceback or an internal error")
    if res.out.strip():
        problems.append("a refused command printed to stdout")
    return problems


def assert_refused(res: CliResult, field: str, *, code: int = 2) -> None:
    problems = refusal_problems(res, field, code=code)
    assert not problems, f"{'; '.join(problems)}\nstdout: {res.out!r}\nstderr: {res.err!r}"


def validate_problems(res: CliResult, file: Path, field: str) -> list[str]:
    """Everything wrong with `lwsflow validate -q FILE` refusing a manifest broken at ``field``.

    `validate` reports each problem as one stderr line ``error: FILE: KIND/NAME: path: message`` and
    ends with a one-line summary; a problem that spilled over two lines shows up as a line that does
    not start with ``error: FILE``.
    """
    problems = []
    if res.code != 2:
        problems.append(f"exit code {res.code}, expected 2")
    lines = [ln for ln in res.err.splitlines() if ln][:-1]  # the last line is the summary
    if not lines:
        problems.append("no problem reported")
    stray = [ln for ln in lines if not ln.startswith(f"error: {file}: ")]
    if stray:
        problems.append(f"{len(stray)} stderr line(s) are not one-line problems: {stray[0]!r}")
    if field not in "\n".join(lines):
        problems.append(f"no problem names the field {field!r}")
    if res.out:
        problems.append(f"stdout is not empty: {res.out[:80]!r}")
    if any(m in res.text for m in TRACEBACK_MARKERS):
        problems.append("output contains a traceback or an internal error")
    return problems


# -- nothing written -----------------------------------------------------------------------------------

Snapshot = dict[str, tuple[str, int, str]]


def snapshot(root: Path) -> Snapshot:
    """Every entry under ``root`` (``root`` itself included): kind, mtime in ns, content digest."""
    out: Snapshot = {}
    if not root.exists() and not root.is_symlink():
        return out
    for path in [root, *sorted(root.rglob("*"))]:
        rel = path.relative_to(root).as_posix()
        st = path.lstat()
        if path.is_symlink():
            out[rel] = ("link", st.st_mtime_ns, os.readlink(path))
        elif path.is_dir():
            out[rel] = ("dir", st.st_mtime_ns, "")
        else:
            out[rel] = ("file", st.st_mtime_ns, hashlib.sha256(path.read_bytes()).hexdigest())
    return out


def snapshot_changes(before: Snapshot, after: Snapshot) -> list[str]:
    """Paths added, removed or changed (content, kind or mtime) between two snapshots."""
    return sorted(p for p in set(before) | set(after) if before.get(p) != after.get(p))


def tree_bytes(root: Path) -> dict[str, bytes]:
    """Relative path -> content of every file under ``root`` (for byte-identical comparisons)."""
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}
