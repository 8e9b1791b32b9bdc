"""Atomic writes: whole content, readable mode (not mkstemp's 0600), no temporary left behind."""

from __future__ import annotations

from pathlib import Path

import pytest

from lwsflow.components.atomic import stage_file, stage_files, write_file_atomic


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


def test_staging_many_files_syncs_them_all_or_leaves_none(tmp_path: Path) -> None:
    items = [(tmp_path / f"d{i % 3}" / f"f{i}.yaml", f"i: {i}\n".encode()) for i in range(40)]
    names = [Path(n) for n in stage_files(items)]
    assert [n.read_bytes() for n in names] == [data for _, data in items]
    for name, (path, _) in zip(names, items, strict=True):
        assert name.parent == path.parent and name.stat().st_mode & 0o777 == 0o644
    blocked = tmp_path / "file"
    blocked.write_text("x")
    with pytest.raises(OSError):  # the last folder cannot be made (a file is in its place)
        stage_files([(tmp_path / "e" / "a.yaml", b"a"), (blocked / "b.yaml", b"b")])
    assert list((tmp_path / "e").iterdir()) == []
