"""Where the test suite's time goes: wall and CPU seconds per test folder and the slowest tests.

Runs pytest (by default what ``make test`` runs: ``pytest -n 4 --dist worksteal -q`` over ``tests/``)
with this file loaded as a plugin, then prints the run's total wall and CPU seconds, the CPU
utilisation, a table per test level (unit, integration, e2e: the folder ``tests/<area>/<level>/`` names
it), a table per area folder (``tests/api``, ...: tests, wall, CPU) and the ``--top`` (default 20)
slowest tests.

What is counted, per test (pytest-xdist runs each worker as its own process):

* **wall**: pytest's own durations of the test's setup, call and teardown (what ``--durations``
  sums); a fixture shared by several tests counts in the first test that sets it up.
* **CPU**: user + system seconds of the process running the test (``time.process_time``, all its
  threads, so an in-process embedded cluster counts) plus those of its child processes that ended
  and were waited for during the test (``RUSAGE_CHILDREN``: kubectl, buildah, a demo subprocess).
  A child still running when the test ends (a server a module fixture started) counts in the test
  during which it is reaped, or only in the run's total.

The run's **total CPU** is everything pytest and its workers used, imports and collection included
(``RUSAGE_CHILDREN`` of this script around the run), so it is a little more than the per-test sum.
**Utilisation** is total CPU / total wall: 100 % is one core kept busy.

The run is saved (``--out``, default ``build/test-times.json``); ``--from FILE`` prints the tables of
a saved run without running anything, ``--markdown`` prints them as the README's tables.

Run: ``.venv/bin/python bench/test_times.py [--paths tests/api tests/render] [-n 2] [-- PYTEST-ARGS]``.
The exit status is pytest's.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from collections.abc import Generator, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = ROOT / "build" / "test-times.json"
OPTION = "--test-times-dir"


# -- the plugin (loaded in pytest and in each xdist worker with ``-p test_times``) -------------------


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(OPTION, default=None,
                     help="write per-test wall and CPU seconds as JSON lines into this folder")


_REPORTS = pytest.StashKey[list[pytest.TestReport]]()


def _cpu() -> tuple[float, float]:
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time(), kids.ru_utime + kids.ru_stime


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, Any, Any]:
    folder = item.config.getoption(OPTION)
    if folder is None:
        return (yield)
    self0, kids0 = _cpu()
    reports: list[pytest.TestReport] = []
    item.stash[_REPORTS] = reports
    try:
        return (yield)
    finally:
        self1, kids1 = _cpu()
        outcome = "passed"
        for r in reports:  # setup, call, teardown: a failure outside the call is an error
            if r.failed and outcome in ("passed", "skipped"):
                outcome = "failed" if r.when == "call" else "error"
            elif r.skipped and outcome == "passed":
                outcome = "skipped"
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        record = {"nodeid": item.nodeid, "wall": sum(r.duration for r in reports),
                  "cpu_self": self1 - self0, "cpu_children": kids1 - kids0,
                  "outcome": outcome, "worker": worker}
        with open(Path(folder) / f"{worker}.jsonl", "a") as f:
            f.write(json.dumps(record) + "\n")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, Any]:
    report = yield
    reports = item.stash.get(_REPORTS, None)
    if reports is not None:
        reports.append(report)
    return report


# -- the tables (pure functions over the records) ----------------------------------------------------


@dataclass(frozen=True)
class Record:
    nodeid: str
    wall: float
    cpu_self: float
    cpu_children: float
    outcome: str = "passed"
    worker: str = "main"

    @property
    def cpu(self) -> float:
        return self.cpu_self + self.cpu_children


@dataclass(frozen=True)
class Row:
    folder: str
    tests: int
    wall: float
    cpu: float


def folder_of(nodeid: str, depth: int = 2) -> str:
    """``tests/api/test_x.py::test_y[1]`` -> ``tests/api``; a file directly in ``tests/`` -> ``tests``."""
    parts = nodeid.split("::", 1)[0].split("/")[:-1]
    return "/".join(parts[:depth]) or "."


def per_folder(records: Iterable[Record], depth: int = 2) -> list[Row]:
    """One row per folder, the slowest (wall) first."""
    acc: dict[str, list[float]] = {}
    for r in records:
        a = acc.setdefault(folder_of(r.nodeid, depth), [0, 0.0, 0.0])
        a[0] += 1
        a[1] += r.wall
        a[2] += r.cpu
    rows = [Row(f, int(n), w, c) for f, (n, w, c) in acc.items()]
    return sorted(rows, key=lambda row: (-row.wall, row.folder))


LEVELS = ("unit", "integration", "e2e", "conformance")


def level_of(nodeid: str) -> str:
    """The test's level, as its folder names it (``tests/<area>/<level>/``, ``tests/conformance``)."""
    parts = nodeid.split("::", 1)[0].split("/")[:-1]
    return next((p for p in reversed(parts) if p in LEVELS), "other")


def per_level(records: Iterable[Record]) -> list[Row]:
    """One row per level, in the order unit, integration, e2e, conformance."""
    acc: dict[str, list[float]] = {}
    for r in records:
        a = acc.setdefault(level_of(r.nodeid), [0, 0.0, 0.0])
        a[0] += 1
        a[1] += r.wall
        a[2] += r.cpu
    order = {lv: i for i, lv in enumerate((*LEVELS, "other"))}
    return [Row(lv, int(n), w, c) for lv, (n, w, c) in sorted(acc.items(), key=lambda kv: order[kv[0]])]


def slowest(records: Iterable[Record], n: int = 20) -> list[Record]:
    return sorted(records, key=lambda r: (-r.wall, r.nodeid))[:n]


def _pct(part: float, whole: float) -> str:
    return f"{100 * part / whole:.0f} %" if whole > 0 else "-"


def render(run: dict[str, Any], top: int = 20, markdown: bool = False) -> str:
    """The summary, the per-folder table and the ``top`` slowest tests of a saved run."""
    records = [Record(**r) for r in run["records"]]
    rows = per_folder(records)
    wall = float(run["wall"])
    cpu = float(run["cpu"])
    sum_wall = sum(r.wall for r in records)
    sum_cpu = sum(r.cpu for r in records)
    outcomes: dict[str, int] = {}
    for r in records:
        outcomes[r.outcome] = outcomes.get(r.outcome, 0) + 1
    counts = ", ".join(f"{n:,} {o}" for o, n in sorted(outcomes.items()))
    head = [
        f"command: {' '.join(run['command'])} (exit {run['exit']})",
        f"tests: {len(records):,} ({counts or 'none'}); {run['workers'] or 'no'} xdist workers;"
        f" {run['cores']} cores, load average {run['load_before']} before, {run['load_after']} after",
        f"total wall {wall:,.1f} s, total CPU {cpu:,.1f} s (pytest, its workers and their children),"
        f" utilisation {_pct(cpu, wall)} of one core",
        f"per-test sums: wall {sum_wall:,.1f} s, CPU {sum_cpu:,.1f} s ({_pct(sum_cpu, sum_wall)} of wall)",
    ]
    levels = [(r.folder, f"{r.tests:,}", f"{r.wall:,.1f}", f"{r.cpu:,.1f}", _pct(r.cpu, r.wall))
              for r in per_level(records)]
    folders = [(r.folder, f"{r.tests:,}", f"{r.wall:,.1f}", f"{r.cpu:,.1f}", _pct(r.cpu, r.wall))
               for r in rows]
    folders.append(("total", f"{len(records):,}", f"{sum_wall:,.1f}", f"{sum_cpu:,.1f}",
                     _pct(sum_cpu, sum_wall)))
    tests = [(r.nodeid, f"{r.wall:,.1f}", f"{r.cpu:,.1f}", _pct(r.cpu, r.wall))
             for r in slowest(records, top)]
    table = _markdown if markdown else _plain
    return "\n".join([
        *head, "",
        table(("Level", "Tests", "Wall (s)", "CPU (s)", "CPU / wall"), levels), "",
        table(("Folder", "Tests", "Wall (s)", "CPU (s)", "CPU / wall"), folders), "",
        f"The {len(tests)} slowest tests (wall):", "",
        table(("Test", "Wall (s)", "CPU (s)", "CPU / wall"), tests),
    ])


def _plain(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(c) for c in col) for col in zip(header, *rows, strict=False)]
    fmt = "  ".join(f"{{:{'<' if i == 0 else '>'}{w}}}" for i, w in enumerate(widths))
    return "\n".join(fmt.format(*row).rstrip() for row in (header, *rows))


def _markdown(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(cells) + " |"
    align = ["---"] + ["---:"] * (len(header) - 1)
    # a parametrised test's id may hold a "|", which would end the cell
    first = [(f"`{r[0]}`".replace("|", "\\|") if r[0] != "total" else "**total**", *r[1:]) for r in rows]
    return "\n".join([line(header), "|" + "|".join(align) + "|", *(line(r) for r in first)])


# -- running pytest ----------------------------------------------------------------------------------


def _load() -> str:
    return f"{os.getloadavg()[0]:.1f}"


def run_pytest(paths: Sequence[str], workers: int, extra: Sequence[str], scratch: Path) -> dict[str, Any]:
    """Run pytest with the plugin and return the run: the command, totals and per-test records."""
    scratch.mkdir(parents=True, exist_ok=True)
    for old in scratch.glob("*.jsonl"):
        old.unlink()
    command = [sys.executable, "-m", "pytest",
               *(["-n", str(workers), "--dist", "worksteal"] if workers else []), "-q",
               "-p", "test_times", OPTION, str(scratch), *extra, *paths]
    env = dict(os.environ)
    # the plugin is this file: importable by its name in pytest and in every xdist worker
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(Path(__file__).parent), env.get("PYTHONPATH")) if p)
    load_before = _load()
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    exit_code = subprocess.call(command, cwd=ROOT, env=env)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    records = [json.loads(line) for f in sorted(scratch.glob("*.jsonl"))
               for line in f.read_text().splitlines()]
    shown = ["pytest", *command[3:]]
    i = shown.index("-p")
    del shown[i:i + 4]  # the plugin's own arguments
    return {"command": shown, "exit": exit_code, "workers": workers, "cores": os.cpu_count(),
            "load_before": load_before, "load_after": _load(), "wall": wall,
            "cpu": after.ru_utime + after.ru_stime - kids.ru_utime - kids.ru_stime,
            "records": sorted(records, key=lambda r: r["nodeid"])}


def main(argv: Sequence[str]) -> int:
    argv = list(argv)
    extra: list[str] = []
    if "--" in argv:
        i = argv.index("--")
        argv, extra = argv[:i], argv[i + 1:]
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0],
                                 epilog="Arguments after -- go to pytest as they are.")
    ap.add_argument("--paths", nargs="+", default=["tests"], metavar="PATH",
                    help="what pytest runs (default: tests, as make test)")
    # scripts/test's default (LWSFLOW_TEST_WORKERS, else 4), so the run is make test's
    ap.add_argument("-n", "--workers", type=int, default=int(os.environ.get("LWSFLOW_TEST_WORKERS", "4")),
                    help="pytest-xdist workers (default: as make test, LWSFLOW_TEST_WORKERS or 4; 0: none)")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT,
                    help=f"where the run is saved (default {DEFAULT_OUT.relative_to(ROOT)})")
    ap.add_argument("--from", dest="source", type=Path, metavar="FILE",
                    help="print the tables of a run saved earlier instead of running pytest")
    ap.add_argument("--top", type=int, default=20, help="how many of the slowest tests (default 20)")
    ap.add_argument("--markdown", action="store_true", help="print the tables as the README's Markdown")
    args = ap.parse_args(argv)
    if args.top < 0 or args.workers < 0:
        print(f"test_times: {'--top' if args.top < 0 else '--workers'} must be 0 or more", file=sys.stderr)
        return 2
    if args.source is not None:
        try:
            run = json.loads(args.source.read_text())
            render(run)  # a file that is not a saved run fails here, before anything is printed
        except (OSError, ValueError, KeyError, TypeError) as exc:
            print(f"test_times: --from {args.source}: not a saved run ({exc})", file=sys.stderr)
            return 2
        print(render(run, args.top, args.markdown))
        return 0
    run = run_pytest(args.paths, args.workers, extra, args.out.parent / (args.out.stem + ".d"))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(run, indent=1) + "\n")
    print(f"\n== saved to {args.out}\n")
    print(render(run, args.top, args.markdown))
    return int(run["exit"])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
