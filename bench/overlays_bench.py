"""Benchmark: render + build-overlays + validate for a 100-model catalog x 3 environments.

Generates the catalog into a temporary folder (the six example models cycled, each a new name; the
example environments' overrides follow their model), then prints, in one run:

* the **kustomize floor**: the three ``kubectl kustomize`` runs alone, one after another and all at
  once, with Go's default GC target and with the ``GOGC`` lwsflow gives kustomize;
* the **old path** (the fast paths switched off: the pure-Python YAML emitter and parser, every
  existing overlay parsed on re-render, jsonschema on every object, environments built one after
  another with Go's default GC)
  beside the **new path**, part by part: render (fresh tree), re-render (``render --check`` on the
  written tree), each environment's kustomize run, parse and validation, and the total (fresh render +
  build-overlays). Each path runs in a fresh Python process (cold validators, as in the CLI); imports
  are reported apart. Both paths must produce the same files and the same built objects.
* the CLI end to end (``lwsflow render`` + ``lwsflow build-overlays``, interpreter start included).

Figures are medians over ``--runs`` (default 3) with min-max; the machine's load average is printed
with them, since other work on the machine moves them; so are CPU seconds (this process and its
kustomize children), which load moves less: CPU / cores is about the wall an idle machine would show
where the work spreads over the cores. Target: total <= 5 s on a 2-core machine.
Run: ``.venv/bin/python bench/overlays_bench.py [--models 100] [--runs 3]``.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import hashlib
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "catalog.yaml"
TARGET_S = 5.0


# -- the catalog ---------------------------------------------------------------------------------------


def make_catalog(n: int, dest: Path) -> Path:
    """``n`` models cycled from the example catalog (``<name>-<i>``), overrides kept per model."""
    src = yaml.safe_load(EXAMPLE.read_text())
    models = []
    for i in range(n):
        m = copy.deepcopy(src["models"][i % len(src["models"])])
        m["name"] = f"{m['name']}-{i:03d}"
        models.append(m)
    for env in src["environments"]:
        stems = env.get("overrides") or {}
        overrides = {m["name"]: stems[m["name"].rsplit("-", 1)[0]] for m in models
                     if m["name"].rsplit("-", 1)[0] in stems}
        if overrides:
            env["overrides"] = overrides
    src["models"] = models
    for pool in src["nodePools"]:  # n models need more nodes than the example's pools: timing, not capacity
        pool["allowOvercommit"] = True
    path = dest / "catalog.yaml"
    path.write_text(yaml.safe_dump(src, sort_keys=False))
    return path


# -- one path, in a child process -------------------------------------------------------------------------


class Recorder:
    """Wall time of each call of a patched function, by label and key (safe across threads)."""

    def __init__(self) -> None:
        self.rows: list[tuple[str, str, float]] = []
        self._lock = threading.Lock()

    def wrap(self, module: Any, name: str, label: str, key: Callable[..., str]) -> None:
        fn = getattr(module, name)

        def timed(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                with self._lock:
                    self.rows.append((label, key(*args, **kwargs), time.perf_counter() - t0))

        setattr(module, name, timed)

    def total(self, label: str, key: str | None = None) -> float:
        return sum(dt for lab, k, dt in self.rows if lab == label and (key is None or k == key))


@contextlib.contextmanager
def old_path() -> Iterator[Callable[[Path], list[Any]]]:
    """The code path as it was before the speed-ups; yields the old sequential ``build_overlays``."""
    from lwsflow.components import kustomize as K
    from lwsflow.components import overlays as O
    from lwsflow.controller import yamlio
    from lwsflow.controller.api import defaults as D
    from lwsflow.controller.api import schema_check as S
    from lwsflow.controller.errors import InvalidInput

    def old_kustomize_build(path: Path, timeout: float = K.BUILD_TIMEOUT_S) -> list[dict[str, Any]]:
        proc = K.run_bounded([str(K.kubectl_path()), "kustomize", str(path)], what=f"{path}: kustomize build",
                             timeout=timeout)  # the caller's environment: Go's default GC target
        if proc.returncode != 0:
            raise InvalidInput("kustomize build failed", source=str(path))
        docs = yamlio.parse_yaml_documents(proc.stdout, source=str(path))
        return [d for d in docs if isinstance(d, dict)]

    def old_overlay_file(
        path: Path, overlay: Callable[[dict[str, Any] | None], dict[str, Any]]
    ) -> tuple[dict[str, Any], bytes]:
        doc = overlay(O.read_kustomization(path))
        return doc, O._yaml(doc)

    def old_build(tree: Path) -> list[Any]:
        return [b for env in K.environments(tree) for b in K.build_environment(tree, env)]

    saved = (yamlio._CDumper, K.kustomize_build, O._overlay_file, S.fast_check, D.wire_copy)
    yamlio._CDumper, K.kustomize_build, O._overlay_file = None, old_kustomize_build, old_overlay_file
    S.fast_check, D.wire_copy = lambda plural: lambda obj: False, copy.deepcopy  # jsonschema on every object
    try:
        yield old_build
    finally:
        yamlio._CDumper, K.kustomize_build, O._overlay_file, S.fast_check, D.wire_copy = saved


def cpu() -> float:
    """CPU seconds of this process and its finished children (less moved by load than wall)."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def child(which: str, catalog_path: Path, work: Path) -> dict[str, Any]:
    """Time one path (``old`` or ``new``) on a fresh tree; returns its figures and result digests."""
    t0 = time.perf_counter()
    from lwsflow.components import kustomize as K
    from lwsflow.components import overlays as O
    from lwsflow.components.catalog import load_catalog

    imports = time.perf_counter() - t0
    rec = Recorder()
    rec.wrap(K, "run_bounded", "kustomize", lambda cmd, **_: Path(cmd[-1]).name)
    rec.wrap(K, "parse_tool_output", "parse", lambda _text, source="": Path(source).name)
    rec.wrap(K, "check_objects", "validate", lambda build: build.env)
    if which == "old":
        from lwsflow.controller import yamlio

        rec.wrap(yamlio, "parse_yaml_documents", "parse", lambda _text, source="": Path(source).name)
    tree = work / f"tree-{which}"
    catalog = load_catalog(catalog_path)
    with old_path() if which == "old" else contextlib.nullcontext(K.build_overlays) as build:
        t, c = time.perf_counter(), cpu()
        O.render_to(catalog, tree)
        render, render_cpu = time.perf_counter() - t, cpu() - c
        t = time.perf_counter()
        drift = O.render_to(catalog, tree, check=True)
        rerender = time.perf_counter() - t
        t, c = time.perf_counter(), cpu()
        builds = build(tree)
        build_s, build_cpu = time.perf_counter() - t, cpu() - c
    assert not drift, drift
    envs = sorted({b.env for b in builds})
    files = O.on_disk(tree, ["base", *envs])
    built = json.dumps([[b.path, b.objects, b.images, b.files] for b in builds], sort_keys=True)
    return {
        "imports": imports, "render": render, "rerender": rerender, "build": build_s,
        "total": render + build_s, "render_cpu": render_cpu, "build_cpu": build_cpu,
        "total_cpu": render_cpu + build_cpu,
        "envs": {e: {part: rec.total(part, e) for part in ("kustomize", "parse", "validate")} for e in envs},
        "files_sha256": hashlib.sha256(json.dumps({k: v.hex() for k, v in files.items()}).encode())
        .hexdigest(),
        "built_sha256": hashlib.sha256(built.encode()).hexdigest(),
        "objects": sum(len(b.objects) for b in builds), "files": len(files),
    }


# -- the parent: floor, both paths, the CLI -------------------------------------------------------------


def kubectl() -> str:
    return str(Path(sys.executable).parent / "kubectl")


def floor(tree: Path, envs: list[str], gogc: str | None) -> tuple[float, float, float]:
    """Wall of the kustomize runs alone, one after another then all at once, and their CPU per run."""
    env = dict(os.environ)
    if gogc is not None:
        env["GOGC"] = gogc
    else:
        env.pop("GOGC", None)
    cmds = [[kubectl(), "kustomize", str(tree / e)] for e in envs]
    t, c = time.perf_counter(), cpu()
    for cmd in cmds:
        subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL)
    seq, seq_cpu = time.perf_counter() - t, cpu() - c
    t = time.perf_counter()
    procs = [subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL) for cmd in cmds]
    if any(p.wait() for p in procs):
        raise SystemExit("kustomize failed")
    return seq, time.perf_counter() - t, seq_cpu / len(cmds)


def run_child(which: str, catalog: Path, work: Path) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if k != "GOGC"}
    out = subprocess.run([sys.executable, __file__, "--child", which, "--catalog", str(catalog),
                          "--work", str(work)], env=env, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise SystemExit(f"{which} path failed:\n{out.stderr}")
    result: dict[str, Any] = json.loads(out.stdout)
    return result


def cli(catalog: Path, work: Path) -> tuple[float, float]:
    lwsflow = str(Path(sys.executable).parent / "lwsflow")
    tree = work / "tree-cli"
    t = time.perf_counter()
    subprocess.run([lwsflow, "render", str(catalog), "--out", str(tree)], check=True,
                   stdout=subprocess.DEVNULL)
    render = time.perf_counter() - t
    t = time.perf_counter()
    subprocess.run([lwsflow, "build-overlays", str(tree)], check=True, stdout=subprocess.DEVNULL)
    return render, time.perf_counter() - t


def med(xs: list[float]) -> str:
    return f"{statistics.median(xs):6.2f}s ({min(xs):.2f}-{max(xs):.2f})"


def load() -> str:
    return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", type=int, default=100)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--child", choices=("old", "new"), help=argparse.SUPPRESS)
    ap.add_argument("--catalog", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--work", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.catalog, args.work)))
        return 0

    from lwsflow.components.kustomize import KUSTOMIZE_GOGC, cores

    print(f"{args.models} models x 3 environments, {args.runs} runs, {cores()} cores; {load()}")
    results: dict[str, list[dict[str, Any]]] = {"old": [], "new": []}
    floors: dict[str, list[tuple[float, float, float]]] = {"default": [], KUSTOMIZE_GOGC: []}
    clis: list[tuple[float, float]] = []
    with tempfile.TemporaryDirectory(prefix="overlays-bench-") as tmp:
        catalog = make_catalog(args.models, Path(tmp))
        for i in range(args.runs):
            # alternate the order so drift in the machine's load does not favour one path
            for which in (("old", "new") if i % 2 == 0 else ("new", "old")):
                with tempfile.TemporaryDirectory(dir=tmp) as work:
                    results[which].append(run_child(which, catalog, Path(work)))
            with tempfile.TemporaryDirectory(dir=tmp) as work:
                clis.append(cli(catalog, Path(work)))
                tree = Path(work) / "tree-cli"
                envs = sorted(p.parent.name for p in tree.glob("*/kustomization.yaml"))
                floors["default"].append(floor(tree, envs, None))
                floors[KUSTOMIZE_GOGC].append(floor(tree, envs, KUSTOMIZE_GOGC))
    old, new = results["old"], results["new"]
    same_files = {r["files_sha256"] for r in old + new}
    same_built = {r["built_sha256"] for r in old + new}
    first = new[0]
    print(f"catalog: {first['files']} files rendered, {first['objects']} objects built; "
          f"old and new identical: files {'yes' if len(same_files) == 1 else 'NO'}, "
          f"built objects {'yes' if len(same_built) == 1 else 'NO'}")
    print("kustomize floor (the three runs alone):")
    for gogc, rows in floors.items():
        print(f"  GOGC={gogc:<8} one after another {med([r[0] for r in rows])}   "
              f"all at once {med([r[1] for r in rows])}   CPU per run {med([r[2] for r in rows])}")
    print(f"{'part':<28} {'old path':>22} {'new path':>22}")

    def row(label: str, get: Callable[[dict[str, Any]], float]) -> None:
        print(f"{label:<28} {med([get(r) for r in old]):>22} {med([get(r) for r in new]):>22}")

    row("imports (apart)", lambda r: r["imports"])
    row("render (fresh tree)", lambda r: r["render"])
    row("re-render (render --check)", lambda r: r["rerender"])
    for env in sorted(first["envs"]):
        for part in ("kustomize", "parse", "validate"):
            row(f"  {env} {part}", lambda r, e=env, p=part: r["envs"][e][p])
    row("build-overlays (wall)", lambda r: r["build"])
    row("total: render + build", lambda r: r["total"])
    row("CPU: render", lambda r: r["render_cpu"])
    row("CPU: build-overlays", lambda r: r["build_cpu"])
    row(f"CPU: total / {cores()} cores", lambda r: r["total_cpu"] / cores())
    print(f"CLI end to end (new): render {med([c[0] for c in clis])}, "
          f"build-overlays {med([c[1] for c in clis])}, sum {med([c[0] + c[1] for c in clis])}")
    total = statistics.median(r["total"] for r in new)
    print(f"new path total {total:.2f}s (target <= {TARGET_S:g}s: {'ok' if total <= TARGET_S else 'SLOW'}); "
          f"{load()}")
    if len(same_files) != 1 or len(same_built) != 1:
        print("old and new paths disagree")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
