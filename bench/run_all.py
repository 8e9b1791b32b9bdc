"""Run every benchmark script in this folder, one after another, and print their figures.

Usage: ``.venv/bin/python bench/run_all.py [NAME ...]`` (names without ``.py``; default: all).
Each script prints its own figures; this runner adds the wall time per script and the exit status.
``test_times`` (it runs the whole test suite) runs only when named.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ON_REQUEST = {"test_times"}  # the whole test suite: `make test`'s figures, not a benchmark of lwsflow


def main(argv: list[str]) -> int:
    scripts = sorted(p for p in HERE.glob("*.py") if p.name != Path(__file__).name)
    if argv:
        scripts = [p for p in scripts if p.stem in argv]
    else:
        scripts = [p for p in scripts if p.stem not in ON_REQUEST]
    failed = 0
    for script in scripts:
        print(f"== {script.stem}", flush=True)
        t0 = time.perf_counter()
        rc = subprocess.call([sys.executable, str(script)], cwd=HERE.parent)
        print(f"-- {script.stem}: exit {rc}, {time.perf_counter() - t0:.1f} s wall\n", flush=True)
        failed += rc != 0
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
