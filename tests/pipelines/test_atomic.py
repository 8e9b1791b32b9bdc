"""Atomic writes: whole content, readable mode (not mkstemp's 0600), no temporary left behind."""

from __future__ import annotations

from pathlib import Path

from lwsflow.components.atomic import stage_file, write_file_atomic


def test_write_replaces_the_file_whole_and_leaves_nothing_else(tmp_path: Path) -> None:
    target = tmp_path / "deep" / "report.json"
    write_file_atomic(target, b"old\n")
    write_file_atomic(target, b"new\n")
    assert target.read_bytes() == b"new\n"
    assert target.stat().st_mode & 0o777 == 0o644
    assert [p.name for p in target.parent.iterdir()] == ["report.json"]


def test_a_staged_file_waits_beside_the_target_until_renamed(tmp_path: Path) -> None:
    target = tmp_path / "a.yaml"
    tmp = Path(stage_file(target, b"x: 1\n"))
    assert tmp.parent == tmp_path and tmp.read_bytes() == b"x: 1\n" and not target.exists()
