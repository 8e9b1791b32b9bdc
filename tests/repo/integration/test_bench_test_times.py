"""bench/test_times.py (issue 35.4): per-folder wall and CPU seconds and the slowest tests of a run,
from synthetic records (the tables) and from a real pytest run over a tiny test folder (the plugin)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import textwrap
from pathlib import Path
from types import ModuleType

import pytest

from lwsflow.controller.api.paths import repo_root

SCRIPT = repo_root() / "bench" / "test_times.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("test_times_bench", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


tt = _load()


def rec(nodeid: str, wall: float, cpu_self: float, cpu_children: float = 0.0,
        outcome: str = "passed") -> dict:
    return {"nodeid": nodeid, "wall": wall, "cpu_self": cpu_self, "cpu_children": cpu_children,
            "outcome": outcome, "worker": "gw0"}


RECORDS = [
    rec("tests/api/test_a.py::test_one", 1.0, 0.5),
    rec("tests/api/test_a.py::test_two[x|y]", 2.0, 0.25, 0.25),
    rec("tests/rollout/sub/test_b.py::test_deep", 10.0, 1.0, 3.0, "failed"),
    rec("tests/test_top.py::test_top", 0.5, 0.5),
]


def run_of(records: list[dict]) -> dict:
    return {"command": ["pytest", "-n", "2", "-q"], "exit": 1, "workers": 2, "cores": 2,
            "load_before": "1.0", "load_after": "2.0", "wall": 8.0, "cpu": 6.0, "records": records}


def test_folders_group_by_the_first_two_path_parts_and_sum_wall_and_cpu() -> None:
    assert tt.folder_of("tests/rollout/sub/test_b.py::TestX::test_y[a/b]") == "tests/rollout"
    assert tt.folder_of("tests/test_top.py::test_top") == "tests"
    rows = tt.per_folder([tt.Record(**r) for r in RECORDS])
    assert [(r.folder, r.tests, r.wall, r.cpu) for r in rows] == [
        ("tests/rollout", 1, 10.0, 4.0), ("tests/api", 2, 3.0, 1.0), ("tests", 1, 0.5, 0.5)]
    slow = tt.slowest([tt.Record(**r) for r in RECORDS], 2)
    assert [r.nodeid for r in slow] == ["tests/rollout/sub/test_b.py::test_deep",
                                        "tests/api/test_a.py::test_two[x|y]"]


def test_levels_come_from_the_folder_that_names_them() -> None:
    assert tt.level_of("tests/rollout/unit/test_planner.py::test_x") == "unit"
    assert tt.level_of("tests/docs/e2e/test_guides.py::test_g[docs/a.md]") == "e2e"
    assert tt.level_of("tests/conformance/test_crd_api.py::test_y") == "conformance"
    assert tt.level_of("tests/test_top.py::test_top") == "other"
    recs = [tt.Record(**r) for r in [rec("tests/a/e2e/test_e.py::t", 5.0, 1.0),
                                      rec("tests/a/unit/test_u.py::t", 1.0, 1.0),
                                      rec("tests/b/unit/test_v.py::t", 2.0, 0.5)]]
    assert [(r.folder, r.tests, r.wall, r.cpu) for r in tt.per_level(recs)] == [
        ("unit", 2, 3.0, 1.5), ("e2e", 1, 5.0, 1.0)]
    assert "| `unit` | 2 | 3.0 | 1.5 | 50 % |" in tt.render(run_of([vars(r) for r in recs]), markdown=True)


def test_the_report_gives_totals_utilisation_folders_and_the_slowest() -> None:
    text = tt.render(run_of(RECORDS), top=2)
    assert "total wall 8.0 s, total CPU 6.0 s" in text and "utilisation 75 % of one core" in text
    assert "tests: 4 (1 failed, 3 passed)" in text
    assert "per-test sums: wall 13.5 s, CPU 5.5 s (41 % of wall)" in text
    lines = text.splitlines()
    assert lines[lines.index("The 2 slowest tests (wall):") + 4].split() == [
        "tests/api/test_a.py::test_two[x|y]", "2.0", "0.5", "25", "%"]
    md = tt.render(run_of(RECORDS), top=2, markdown=True)
    assert "| `tests/rollout` | 1 | 10.0 | 4.0 | 40 % |" in md
    assert "| **total** | 4 | 13.5 | 5.5 | 41 % |" in md
    assert "| `tests/api/test_a.py::test_two[x\\|y]` | 2.0 | 0.5 | 25 % |" in md  # the | is escaped
    assert "|---|---:|---:|---:|---:|" in md


def test_a_file_that_is_not_a_saved_run_is_one_line_and_exit_2(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "bad.json").write_text('{"records": []}')
    for name in ("bad.json", "missing.json"):
        assert tt.main(["--from", str(tmp_path / name)]) == 2
        out, err = capsys.readouterr()
        assert out == "" and err.count("\n") == 1 and f"--from {tmp_path / name}: not a saved run" in err


TINY = {
    "pytest.ini": "[pytest]\n",
    "alpha/test_a.py": """
        import time

        def test_burns_cpu_in_the_worker():
            t0 = time.process_time()
            while time.process_time() - t0 < 0.3:
                pass

        def test_fails():
            assert 1 == 2
    """,
    "beta/test_b.py": """
        import subprocess, sys

        BURN = "import time\\nt0 = time.process_time()\\nwhile time.process_time() - t0 < 0.3: pass"

        def test_burns_cpu_in_a_child():
            subprocess.run([sys.executable, "-c", BURN], check=True)
    """,
}


def test_a_run_over_a_tiny_folder_counts_worker_and_child_cpu(tmp_path: Path) -> None:
    tiny = tmp_path / "tiny"
    for name, body in TINY.items():
        (tiny / name).parent.mkdir(parents=True, exist_ok=True)
        (tiny / name).write_text(textwrap.dedent(body))
    out = tmp_path / "run.json"
    proc = subprocess.run([sys.executable, str(SCRIPT), "--paths", str(tiny), "-n", "2", "--out", str(out),
                           "--", "-p", "no:cacheprovider"], capture_output=True, text=True, timeout=240)
    assert proc.returncode == 1, proc.stdout + proc.stderr  # pytest's: one test failed
    run = json.loads(out.read_text())
    by_name = {r["nodeid"].rsplit("::", 1)[1]: r for r in run["records"]}
    assert sorted(by_name) == ["test_burns_cpu_in_a_child", "test_burns_cpu_in_the_worker", "test_fails"]
    assert by_name["test_fails"]["outcome"] == "failed"
    assert {r["worker"] for r in run["records"]} <= {"gw0", "gw1"}
    worker, child = by_name["test_burns_cpu_in_the_worker"], by_name["test_burns_cpu_in_a_child"]
    assert worker["cpu_self"] >= 0.3 and worker["cpu_children"] < 0.1
    assert child["cpu_children"] >= 0.3
    assert worker["wall"] >= 0.3 and child["wall"] >= 0.3
    # the run's total counts the workers' CPU (they are pytest's children), imports and collection too
    assert run["cpu"] > sum(r["cpu_self"] + r["cpu_children"] for r in run["records"])
    assert run["command"] == ["pytest", "-n", "2", "--dist", "worksteal", "-q", "-p", "no:cacheprovider",
                              str(tiny)]
    assert "| `alpha` | 2 |" not in proc.stdout and "\nalpha " in proc.stdout
    again = subprocess.run([sys.executable, str(SCRIPT), "--from", str(out), "--markdown", "--top", "1"],
                           capture_output=True, text=True, timeout=60)
    assert again.returncode == 0, again.stderr
    assert "| `alpha` | 2 |" in again.stdout and "| `beta` | 1 |" in again.stdout
    assert "The 1 slowest tests (wall):" in again.stdout
