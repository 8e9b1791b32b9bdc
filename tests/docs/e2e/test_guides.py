"""Every guide runs as written (issue 13.8): the ```console blocks of README.md and docs/*.md are
executed in order, in a fresh folder, against a fresh embedded cluster where the guide starts one,
and their output is compared with what the guide shows (rules in ``guide_runner``)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from lwsflow.controller.api.paths import repo_root
from tests.docs.guide_runner import console_blocks, matches, run_guide

ROOT = repo_root()
GUIDES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
RUN = [g for g in GUIDES if console_blocks(g.read_text())]


def test_the_runner_lists_the_guides_it_runs(capsys: pytest.CaptureFixture[str]) -> None:
    """Which guides run, and how many commands each; the others have no ```console block."""
    listing = {g.relative_to(ROOT).as_posix(): sum(len(b.steps) for b in console_blocks(g.read_text()))
               for g in GUIDES}
    with capsys.disabled():
        print("\nguides run: " + ", ".join(f"{k} ({v} commands)" for k, v in listing.items() if v))
        print("guides with nothing to run: " + ", ".join(k for k, v in listing.items() if not v))
    assert "README.md" in listing and listing["README.md"] >= 4  # the "30 seconds" block
    assert {"docs/rollout.md", "docs/gitops.md", "docs/own-setup.md"} <= {k for k, v in listing.items() if v}


def test_wildcards() -> None:
    assert matches(["a ... c", "...", "end"], "a b c\nx\ny\nend\n")
    assert matches(["a", "...", "b"], "a\nb\n")
    assert not matches(["a", "b"], "a\nb\nc\n")
    assert not matches(["digest sha256:..."], "digest sha1:abc\n")


def test_the_smoke_table_header_reads_a_time_column_of_any_width() -> None:
    """The time column is as wide as its header when every check takes under 10 ms."""
    steps = [s for b in console_blocks((ROOT / "docs" / "smoke.md").read_text()) for s in b.steps]
    header = next(ln for s in steps for ln in s.expected if "┃ time" in ln)
    for cell in ("┃ time ┃", "┃ time   ┃", "┃ time     ┃"):
        assert matches([header], re.sub(r"┃ time[^┃]*┃", cell, header) + "\n"), cell
@pytest.mark.parametrize("guide", RUN, ids=[g.relative_to(ROOT).as_posix() for g in RUN])
def test_guide_runs_as_written(guide: Path) -> None:
    assert run_guide(ROOT, guide) > 0
