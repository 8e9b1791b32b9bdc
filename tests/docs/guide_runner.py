"""Run a guide's ```console blocks as written, and compare what they print with what the guide shows.

The rules, which the guides follow (docs/conventions.md):

- Only fences whose info string is ``console`` run; ```text, ```sh, ```yaml blocks are for reading
  (a real KFP server, a cloud cluster, a 90-second demo).
- In a block, a line ``$ CMD`` is a command; a command ending in ``\\`` continues on the next line.
  The lines up to the next command are its expected output. No lines shown: the output is not checked.
- ``...`` alone on a line stands for any number of lines (none included); ``...`` inside a line for
  any text (digests, times, ports).
- Each guide runs, block after block, in a fresh temporary folder that stands for the repository
  root: a copy of ``examples/`` and ``overlays/``, links to everything else (``.venv``, ``pipelines``,
  ...) but ``.git`` and ``.lwsflow/`` (the guides' scratch folder), with the venv's ``bin`` first on ``PATH``
  (``lwsflow`` and ``kubectl`` are the venv's). Commands run in ``bash``; ``export`` and ``cd`` carry
  over to later commands, and so does ``$?``.
- A command ending in `` &`` is a background server (``lwsflow sim serve ... &``): it is started, the
  runner waits for the lines the guide shows for it, and it is stopped when the guide ends.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

COPIED = ("examples", "overlays")  # guides may change these; everything else is linked, read-only by use
COMMAND_TIMEOUT_S = 120.0
BACKGROUND_WAIT_S = 60.0
FENCE = re.compile(r"^(?P<indent>\s*)```(?P<info>[\w-]*)\s*$")


@dataclass
class Step:
    """One ``$`` command of a guide and the lines the guide shows for it."""

    command: str
    expected: list[str]
    line: int  # where the command starts in the guide (1-based)

    @property
    def background(self) -> bool:
        return self.command.rstrip().endswith("&") and not self.command.rstrip().endswith("&&")


@dataclass
class Block:
    line: int
    steps: list[Step] = field(default_factory=list)


def console_blocks(text: str) -> list[Block]:
    """The ```console blocks of a markdown text, parsed into steps (indented fences included)."""
    blocks: list[Block] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, info, start = m["indent"], m["info"], i
        body: list[str] = []
        i += 1
        while i < len(lines) and not (FENCE.match(lines[i]) and lines[i].strip() == "```"):
            body.append(lines[i][len(indent):] if lines[i].startswith(indent) else lines[i].lstrip())
            i += 1
        i += 1
        if info == "console":
            blocks.append(_parse(body, start + 2))
    return blocks


def _parse(body: list[str], first_line: int) -> Block:
    block = Block(first_line - 1)
    j = 0
    while j < len(body):
        if not body[j].startswith("$ "):
            raise ValueError(f"line {first_line + j}: output before the first `$ ` command: {body[j]!r}")
        start, parts = j, [body[j][2:]]
        while parts[-1].endswith("\\") and j + 1 < len(body):
            j += 1
            parts.append(body[j])
        j += 1
        expected: list[str] = []
        while j < len(body) and not body[j].startswith("$ "):
            expected.append(body[j])
            j += 1
        block.steps.append(Step("\n".join(parts), expected, first_line + start))
    return block


def _pattern(expected: list[str]) -> re.Pattern[str]:
    out = []
    for line in expected:
        if line.strip() == "...":
            out.append(r"(?:[^\n]*\n)*?")
        else:
            out.append(".*?".join(re.escape(p) for p in line.rstrip().split("...")) + r"[ \t]*\n")
    return re.compile("".join(out))


def matches(expected: list[str], actual: str) -> bool:
    """Does ``actual`` (the whole output) read as ``expected`` with its ``...`` wildcards?"""
    text = "".join(ln.rstrip() + "\n" for ln in actual.splitlines())
    return _pattern(expected).fullmatch(text) is not None


class GuideFailure(AssertionError):
    pass


@dataclass
class GuideRun:
    """Runs the steps of one guide in a fresh folder; ``close()`` stops its background servers."""

    repo: Path
    guide: str
    workdir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="lwsflow-guide-")))
    exports: list[str] = field(default_factory=list)
    last_rc: int = 0
    background: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def __post_init__(self) -> None:
        for entry in sorted(self.repo.iterdir()):
            if entry.name in COPIED:
                shutil.copytree(entry, self.workdir / entry.name, symlinks=True)
            elif entry.name not in (".git", ".lwsflow"):
                (self.workdir / entry.name).symlink_to(entry)
        venv_bin = str(self.repo / ".venv" / "bin")
        self.env = {
            **os.environ,
            "PATH": f"{venv_bin}{os.pathsep}{os.environ.get('PATH', '')}",
            "PYTHONUNBUFFERED": "1",  # stdout and stderr interleave as a terminal shows them
            "COLUMNS": "200",  # tables as wide as the guides show them
            "NO_COLOR": "1",
            "TERM": "dumb",
            "HOME": str(self.workdir),  # git identity and caches of the guide stay in its folder
            "GIT_AUTHOR_NAME": "Guide Reader", "GIT_AUTHOR_EMAIL": "reader@example.com",
            "GIT_COMMITTER_NAME": "Guide Reader", "GIT_COMMITTER_EMAIL": "reader@example.com",
        }
        self.env.pop("KUBECONFIG", None)

    def _script(self, command: str) -> str:
        return "\n".join([*self.exports, f"(exit {self.last_rc})", command])

    def run(self, step: Step) -> None:
        where = f"{self.guide}:{step.line}: $ {step.command}"
        if step.background:
            self._start(step, where)
            return
        try:
            proc = subprocess.run(["bash", "-c", self._script(step.command)], cwd=self.workdir, env=self.env,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=COMMAND_TIMEOUT_S,
                                  start_new_session=True)
        except subprocess.TimeoutExpired:
            raise GuideFailure(f"{where}\ntimed out after {COMMAND_TIMEOUT_S:.0f} s") from None
        self.last_rc = proc.returncode
        out = proc.stdout.decode(errors="replace")
        first = step.command.split()[0] if step.command.split() else ""
        if first in ("export", "cd"):
            self.exports.append(step.command)
        if step.expected and not matches(step.expected, out):
            raise GuideFailure(_diff(where, step.expected, out))

    def _start(self, step: Step, where: str) -> None:
        log = self.workdir / f".bg-{len(self.background)}.log"
        with log.open("wb") as sink:
            script = self._script(step.command.rstrip()[:-1])
            proc = subprocess.Popen(["bash", "-c", script], cwd=self.workdir, env=self.env, stdout=sink,
                                    stderr=subprocess.STDOUT, start_new_session=True)
        self.background.append(proc)
        want = [ln for ln in step.expected if ln.strip()]
        deadline = time.monotonic() + BACKGROUND_WAIT_S
        out = ""
        while time.monotonic() < deadline:
            out = log.read_text(errors="replace")
            if len(out.splitlines()) >= len(want) and out.endswith("\n"):
                break
            if proc.poll() is not None:
                raise GuideFailure(f"{where}\nthe background command exited ({proc.returncode}):\n{out}")
            time.sleep(0.05)
        if want and not matches(want, "\n".join(out.splitlines()[: len(want)]) + "\n"):
            raise GuideFailure(_diff(where, want, out))

    def close(self) -> None:
        for proc in self.background:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
        shutil.rmtree(self.workdir, ignore_errors=True)


def _diff(where: str, expected: list[str], actual: str) -> str:
    return (f"{where}\n--- the guide shows\n" + "\n".join(expected) + "\n--- the command printed\n" + actual)


def run_guide(repo: Path, path: Path) -> int:
    """Run every ```console block of ``path``; returns the number of commands run."""
    blocks = console_blocks(path.read_text())
    runner = GuideRun(repo, path.relative_to(repo).as_posix())
    n = 0
    try:
        for block in blocks:
            for step in block.steps:
                runner.run(step)
                n += 1
    finally:
        runner.close()
    return n
