"""The README's commands in a fresh clone (issue 24): how long each takes cold and warm.

Usage: ``.venv/bin/python bench/fresh_clone.py [--targets demo,test,conformance] [--runs 2] [--keep]
[--busy N]``.

Clones HEAD into an empty temporary folder (nothing beside it) with an empty upstream cache
(``LWSFLOW_CACHE``; the reference cluster's binaries are lent from the usual cache, as a second clone
on the same machine gets them), then times each target (default ``demo``) ``--runs`` times: the
first run is cold for the first target (``scripts/setup`` creates the venv with the real ``pip
install`` from the machine's pip cache, installs nothing from apt when the tools are there, fetches
the upstream modules), the rest warm. ``--busy N`` runs N CPU hogs (``yes > /dev/null``) beside the
targets, as a busy machine would (issue 35's flake check). Prints one line per figure. Minutes on
two cores; ``make test`` and ``make conformance`` take much longer.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lwsflow.rehearsal.refcluster import binaries
from reliability import fresh_clone


def _make(repo: Path, env: dict[str, str], target: str, label: str) -> bool:
    t0 = time.perf_counter()
    proc = fresh_clone.run(["make", target], repo, env, 4 * 3600)
    wall = time.perf_counter() - t0
    print(f"make {target} ({label}): {wall:.0f} s wall ({wall / 60:.1f} min), exit {proc.returncode}",
          flush=True)
    if proc.returncode:
        print(proc.stdout[-3000:] + proc.stderr[-3000:], file=sys.stderr)
    return proc.returncode == 0


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--targets", default="demo", help="comma-separated make targets (demo,test,conformance)")
    ap.add_argument("--runs", type=int, default=2, help="runs per target (the very first one is cold)")
    ap.add_argument("--keep", action="store_true", help="keep the clone (its path is printed)")
    ap.add_argument("--busy", type=int, default=0, help="CPU hogs (yes > /dev/null) beside the targets")
    args = ap.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="lwsflow-fresh-"))
    hogs = [subprocess.Popen(["yes"], stdout=subprocess.DEVNULL) for _ in range(args.busy)]
    if hogs:
        print(f"{len(hogs)} CPU hogs (yes > /dev/null) running beside the targets", flush=True)
    try:
        repo = fresh_clone.clone(tmp / "empty")
        cache = tmp / "cache"
        (cache / "refcluster").mkdir(parents=True)
        if binaries.cache_dir().is_dir():
            (cache / "refcluster" / binaries.version()).symlink_to(binaries.cache_dir())
        env = fresh_clone.clean_env(LWSFLOW_CACHE=str(cache))
        print(f"fresh clone of HEAD in {repo} (upstream cache {cache})", flush=True)
        ok, first = True, True
        for target in args.targets.split(","):
            for _ in range(args.runs):
                label = "cold: no venv, empty upstream cache" if first else "warm"
                ok, first = ok and _make(repo, env, target, label), False
        return 0 if ok else 1
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
