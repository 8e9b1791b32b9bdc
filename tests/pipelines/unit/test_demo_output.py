"""What the demo prints and writes: clean failure lines, the bad release's verdict, plain file modes."""

from __future__ import annotations

import io
from pathlib import Path

from lwsflow import report as pictures
from lwsflow.rehearsal import demo
from lwsflow.rehearsal.demo import _Progress, _verdict
from lwsflow.rehearsal.local_run import PipelineRun
from lwsflow.report.records import Stage, Trace

TRACE = ("12:00:00.123 - INFO - Executing task 'build-image'\n"
         "Traceback (most recent call last):\n"
         '  File "/x/steps.py", line 1, in build_image\n'
         "lwsflow.controller.errors.OperationFailed: registry 127.0.0.1:1 unreachable\n"
         "ValueError: boom\n")


def test_progress_turns_a_traceback_into_one_line_naming_the_task() -> None:
    sink = io.StringIO()
    _Progress(sink).write(TRACE)
    assert sink.getvalue().splitlines() == ["Executing task 'build-image'",
                                            "[build-image] failed: registry 127.0.0.1:1 unreachable",
                                            "[build-image] ValueError: boom"]
    quiet = io.StringIO()
    _Progress(quiet, show_failure=False).write(TRACE)  # the caller prints its verdict; bugs still show
    assert quiet.getvalue().splitlines() == ["Executing task 'build-image'", "[build-image] ValueError: boom"]


def test_verdict_of_a_rolled_back_release() -> None:
    reason = "stage 1 deadline (1200s) passed: target=1 ready=2"
    run = PipelineRun(model="m", succeeded=False, failed_task="rollout", reports={"rollout": {
        "result": "rolled-back", "message": f"rolled back: {reason}",
        "stages": [{"index": 1, "result": "failed"}], "rollbacks": [{"reason": reason}]}})
    assert _verdict(run) == "bad release: rolled back at stage 1: deadline (1200s) passed: target=1 ready=2"
    other = PipelineRun(model="m", succeeded=False, failed_task="build-overlays",
                        error="Pipeline failed.\nInner task failed: 'build-overlays'.\n")
    assert _verdict(other) == "bad release: failed at build-overlays: Inner task failed: 'build-overlays'."


def test_stages_picture_gets_the_mode_of_an_ordinary_file(tmp_path: Path) -> None:
    plain = tmp_path / "plain.txt"
    plain.write_text("x")
    trace = Trace("ns", "LeaderWorkerSet", "m", "abc", "Succeeded", 0.0, 120.0, "status",
                  [Stage(1, "", 1, 0.0, 60.0, 120.0, "passed")])
    path = pictures.write_png(pictures.stages_figure([trace]), tmp_path / "stages.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert path.stat().st_mode & 0o777 == plain.stat().st_mode & 0o777  # the umask's, not mkstemp's 0600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plain.txt", "stages.png"]  # no temp file left


def test_the_demo_analyses_at_a_pace_a_person_can_follow() -> None:
    """`lwsflow demo` measures over 5 s windows (at 6 s and 8 s) with 5 req/s; its tests' shorter windows
    (issue 35) keep the measurements after a full window of the new pods and as many requests in each."""
    assert demo.ANALYSIS_WINDOW_S == 5.0
    metric = demo.analysis_spec(5.0)["metrics"][0]
    assert demo.analysis_spec(5.0)["window"] == "5s" and demo.load_rate(5.0) == demo.LOAD_RATE == 5.0
    assert (metric["initialDelay"], metric["interval"], metric["count"]) == ("6s", "2s", 2)
    short = demo.analysis_spec(3.0)
    assert (short["window"], short["metrics"][0]["initialDelay"], short["metrics"][0]["interval"]) == (
        "3s", "4s", "1s")
    assert demo.load_rate(3.0) * 3.0 >= demo.LOAD_RATE * 5.0 - 0.5  # as many requests per window
