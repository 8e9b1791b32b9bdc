"""The README is the front door (issue 31.11): the two commands come first, what changed lives in
CHANGELOG.md, and the Commands table lists exactly the CLI's commands with options they take."""

from __future__ import annotations

import itertools
import re

import typer

from lwsflow.cli import _register
from lwsflow.cli.app import app
from lwsflow.controller.api.paths import repo_root

ROOT = repo_root()
WORD = re.compile(r"[a-z][a-z0-9-]*(\|[a-z][a-z0-9-]*)*")  # a command word, or alternatives a|b
OPTION = re.compile(r"(?<![\w-])(--?[A-Za-z][\w-]*)")


def cli_commands() -> dict[str, set[str]]:
    """Every command a user can run (``sim serve``, ``rollout pause``, ...), with its options."""
    _register()

    def walk(cmd: object, path: tuple[str, ...]) -> dict[str, set[str]]:
        subs = getattr(cmd, "commands", None)
        if subs is None:
            params = [p for p in getattr(cmd, "params", []) if not getattr(p, "hidden", False)]
            return {" ".join(path): {o for p in params for o in (*p.opts, *p.secondary_opts)
                                     if o.startswith("-")}}
        found: dict[str, set[str]] = {}
        for name, sub in subs.items():
            if not getattr(sub, "hidden", False):
                found.update(walk(sub, (*path, name)))
        return found

    return walk(typer.main.get_command(app), ())


def table_rows() -> list[tuple[list[str], str]]:
    """The Commands table: per row, the commands its first cell names and the cell's text."""
    text = (ROOT / "README.md").read_text()
    section = text.split("\n## Commands\n", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        if not line.startswith("| `lwsflow "):
            continue
        cell = re.split(r"(?<!\\)\|", line)[1].strip().strip("`").replace("\\|", "|")
        words: list[list[str]] = []
        for token in cell.split()[1:]:
            if not WORD.fullmatch(token):
                break
            words.append(token.split("|"))
        rows.append(([" ".join(c) for c in itertools.product(*words)], cell))
    return rows


def test_the_commands_table_lists_every_command_and_only_real_options() -> None:
    commands = cli_commands()
    assert {"dashboard", "report", "sim serve", "rollout pause", "analysis run"} <= commands.keys()
    rows = table_rows()
    named = [c for cs, _ in rows for c in cs]
    missing = sorted(commands.keys() - set(named))
    unknown = sorted(set(named) - commands.keys())
    assert not missing, f"README's Commands table lacks: {missing}"
    assert not unknown, f"README's Commands table names commands the CLI does not have: {unknown}"
    for cs, cell in rows:
        takes = set().union(*(commands[c] for c in cs))
        wrong = sorted(set(OPTION.findall(cell.split(" ", 1)[1])) - takes)
        assert not wrong, f"{cell}: no such option of {' / '.join(cs)}: {wrong}"


def test_the_two_commands_come_first_and_what_changed_is_in_the_changelog() -> None:
    lines = (ROOT / "README.md").read_text().splitlines()
    first = "\n".join(lines[:40])
    assert "make demo   #" in first and "make test   #" in first
    assert "[CHANGELOG.md](CHANGELOG.md)" in first
    assert not any(ln.startswith("## What changed") for ln in lines)
    changelog = (ROOT / "CHANGELOG.md").read_text().splitlines()
    releases = [ln for ln in changelog if ln.startswith("## ")]
    assert releases[0] == "## Unreleased" and len(releases) >= 2, releases


def test_conformance_figures_are_linked_not_copied() -> None:
    """Figures copied into the README went stale (6,867 embedded-gap paths there, 1,783 in the run
    docs/reference-cluster.md records): the README links to where each run's figures are kept."""
    text = (ROOT / "README.md").read_text()
    row = next(ln for ln in text.splitlines() if ln.startswith("| `bench/conformance_figures.py`"))
    assert "docs/reference-cluster.md#figures" in row
    assert not re.search(r"\d+ (embedded-gap|objects on both clusters|paths compared)", row), row
