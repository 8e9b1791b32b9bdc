"""`lwsflow demo`, the README's first command, for one model: release, then a bad release."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lwsflow.pipelines.cli import main

pytestmark = pytest.mark.slow


def test_demo_releases_then_catches_a_bad_release(tmp_path: Path, example_catalog: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["demo", "--out", str(tmp_path), "--models", "llama-70b", "--catalog", str(example_catalog)])
    out = capsys.readouterr().out
    summary = json.loads((tmp_path / "summary.json").read_text())
    good = summary["models"][0]
    assert good["ok"] and good["stages"] == "2/2" and good["smoke"].startswith("pass")
    assert good["digest"].startswith("sha256:") and good["makespan_s"] > 0
    bad = summary["bad_release"]
    assert bad["checks"] == {k: True for k in bad["checks"]}, bad
    assert bad["live_images"] == [good["image"]]
    plain_mode = (tmp_path / "summary.json").stat().st_mode & 0o777  # what an ordinary write gets
    for picture in ("timeline.png", "stages.png"):
        assert (tmp_path / picture).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert (tmp_path / picture).stat().st_mode & 0o777 == plain_mode, picture  # not mkstemp's 0600
    assert not list(tmp_path.glob(".*.tmp"))
    assert "llama-70b" in out and "cluster on the old revision" in out
    # the gate's verdict as one clean line; no exception class paths in the progress
    assert "bad release: rolled back at stage 1: deadline (" in out
    assert "lwsflow.controller.errors" not in out and "Traceback" not in out
    assert code == 0
