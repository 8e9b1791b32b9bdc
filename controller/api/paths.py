"""Where the upstream reference material lives: pinned Go modules, cached outside the repository.

Tests and tools read upstream CRDs, example manifests and schemas (LWS, Gateway API, Inference
Extension, Argo Workflows, Kubernetes' generated.proto files, Kueue's quota CRDs). They come from the
Go module proxy at the versions named in ``scripts/upstream/go.mod`` and are verified against its
``go.sum`` by ``go mod download`` (the checksum is compared again here). :func:`fetch` copies the
folders lwsflow reads into ``${LWSFLOW_CACHE:-~/.cache/lwsflow}/upstream/<module>@<version>/``
(``scripts/setup`` runs it; an accessor runs it on first use, with a progress line). Nothing is read
from beside the repository.

The runtime never needs any of this: it reads the packaged CRD copies under ``controller/api/crds/``
(and the embedded cluster its packaged protobuf table, ``sim/apiserver/k8s_protobuf.json.gz``).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path

ENV_CACHE = "LWSFLOW_CACHE"


class UpstreamMissing(RuntimeError):
    """The upstream material is not in the cache and cannot be fetched (no Go, or the fetch failed)."""


@dataclass(frozen=True)
class Module:
    """One pinned upstream module and the folders (or files) of it that lwsflow reads."""

    path: str
    parts: tuple[str, ...]  # folders or files; a part with a ``*`` is a glob of files


# Kubernetes' protobuf schemas (each API package's generated.proto, with the Go types whose struct tags
# say which fields are pointers or omitempty): scripts/pack_protobuf.py derives the embedded cluster's
# decoding table from them (sim/apiserver/protobuf.py)
_APIMACHINERY_PROTO = tuple(f"pkg/{d}/{f}" for d, files in (
    ("apis/meta/v1", ("generated.proto", "types.go")), ("util/intstr", ("generated.proto", "intstr.go")),
    ("api/resource", ("generated.proto",)), ("runtime", ("generated.proto", "types.go"))) for f in files)


# What is copied out of each module; the version comes from scripts/upstream/go.mod.
MODULES: dict[str, Module] = {
    "lws": Module("sigs.k8s.io/lws", ("config/crd/bases", "config/samples", "docs/examples")),
    "gateway-api": Module("sigs.k8s.io/gateway-api", ("config/crd/standard",)),
    "inference-extension": Module("sigs.k8s.io/gateway-api-inference-extension", ("config/crd/bases",)),
    "argo-workflows": Module("github.com/argoproj/argo-workflows/v3", ("api/jsonschema/schema.json",)),
    "k8s-api": Module("k8s.io/api", ("*/*/generated.proto", "*/*/types.go", "*/*/register.go")),
    "k8s-apimachinery": Module("k8s.io/apimachinery", _APIMACHINERY_PROTO),
    "kueue": Module("sigs.k8s.io/kueue", tuple(f"config/components/crd/bases/kueue.x-k8s.io_{p}.yaml" for p in
                                             ("clusterqueues", "localqueues", "resourceflavors"))),
}


def repo_root() -> Path:
    """The repository root (the folder holding ``controller/``)."""
    return Path(__file__).resolve().parents[2]


def pins_dir() -> Path:
    """``scripts/upstream``: the Go module whose go.mod names the versions and whose go.sum pins them."""
    return repo_root() / "scripts" / "upstream"


def cache_dir() -> Path:
    """``$LWSFLOW_CACHE``, else ``~/.cache/lwsflow`` (shared with the reference cluster's binaries)."""
    env = os.environ.get(ENV_CACHE)
    return Path(env).expanduser() if env else Path.home() / ".cache" / "lwsflow"


@cache
def versions() -> dict[str, str]:
    """module path -> version, from the ``require`` block of ``scripts/upstream/go.mod``."""
    text = (pins_dir() / "go.mod").read_text()
    return dict(re.findall(r"^\s*(\S+)\s+(v\S+)\s*$", text, flags=re.M))


def _sums() -> dict[str, str]:
    """``module@version`` -> the h1 checksum of its zip, from ``scripts/upstream/go.sum``."""
    out = {}
    for line in (pins_dir() / "go.sum").read_text().splitlines():
        if not line.strip():
            continue
        mod, ver, h1 = line.split()
        if not ver.endswith("/go.mod"):
            out[f"{mod}@{ver}"] = h1
    return out


def module_dir(name: str) -> Path:
    """The cached copy of module ``name`` (a key of :data:`MODULES`), fetched first when missing."""
    mod = MODULES[name]
    dest = cache_dir() / "upstream" / f"{mod.path}@{versions()[mod.path]}"
    if not (dest / ".complete").is_file():
        fetch(name)
    return dest


def go_binary() -> str | None:
    """The Go toolchain to fetch with: ``go`` on PATH, else the official tarball's usual place."""
    found = shutil.which("go")
    if found:
        return found
    return "/usr/local/go/bin/go" if os.access("/usr/local/go/bin/go", os.X_OK) else None


def fetch(name: str) -> Path:
    """Download module ``name`` through the Go module proxy (checked against go.sum) and copy the
    folders lwsflow reads into the cache. Idempotent; the copy appears atomically."""
    mod = MODULES[name]
    ref = f"{mod.path}@{versions()[mod.path]}"
    dest = cache_dir() / "upstream" / ref
    if (dest / ".complete").is_file():
        return dest
    go = go_binary()
    if go is None:
        raise UpstreamMissing(
            f"upstream material {ref} is not in {dest.parent} and there is no Go toolchain to fetch it: "
            "run scripts/setup (it installs Go), or install Go and retry")
    print(f"lwsflow: fetching {ref} from the Go module proxy into {dest.parent}", file=sys.stderr,
          flush=True)
    env = {**os.environ, "GOFLAGS": "-mod=readonly", "GOTOOLCHAIN": "local"}
    proc = subprocess.run([go, "mod", "download", "-json", ref], cwd=pins_dir(), env=env,
                          capture_output=True, text=True, timeout=900, check=False)
    info = json.loads(proc.stdout) if proc.stdout.strip().startswith("{") else {}
    if proc.returncode or info.get("Error") or not info.get("Dir"):
        why = info.get("Error") or proc.stderr.strip() or f"go exited {proc.returncode}"
        raise UpstreamMissing(f"fetching {ref} failed: {why}")
    pinned = _sums().get(ref)
    if info.get("Sum") != pinned:  # go checks go.sum itself; say so plainly if anything slipped through
        raise UpstreamMissing(f"{ref}: checksum {info.get('Sum')} is not the go.sum pin {pinned}")
    src = Path(info["Dir"])
    tmp = dest.with_name(f".{dest.name}.tmp.{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    for part in mod.parts:
        for rel in sorted(str(p.relative_to(src)) for p in src.glob(part)) if "*" in part else [part]:
            (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
            if (src / rel).is_dir():
                shutil.copytree(src / rel, tmp / rel)
            else:
                shutil.copy2(src / rel, tmp / rel)
    for p in [tmp, *tmp.rglob("*")]:  # the module cache is read-only; the copy must be removable
        p.chmod(0o755 if p.is_dir() else 0o644)
    (tmp / ".complete").write_text(f"{ref} {pinned}\n")
    if dest.exists() and not (dest / ".complete").is_file():
        shutil.rmtree(dest, ignore_errors=True)  # an interrupted copy of an older layout
    try:
        tmp.rename(dest)
    except OSError:  # another process (a parallel test worker) got there first
        shutil.rmtree(tmp, ignore_errors=True)
        if not (dest / ".complete").is_file():
            raise
    return dest


def fetch_all() -> None:
    """Every module of :data:`MODULES` into the cache (``scripts/setup`` calls this)."""
    for name in MODULES:
        fetch(name)


# -- the material, by what it is -------------------------------------------------------------------
def lws_crd_dir() -> Path:
    """The LWS module's controller-gen CRDs (``config/crd/bases``)."""
    return module_dir("lws") / "config" / "crd" / "bases"


def lws_file(rel: str) -> Path:
    """A file of the LWS module by its repository path, e.g. ``config/samples/hpaexample.yaml``."""
    return module_dir("lws") / rel


def example_name(path: Path) -> str:
    """An example's name: its path in the LWS repository with ``/`` spelled ``__``."""
    return "__".join(path.relative_to(module_dir("lws")).parts)


def lws_examples() -> list[Path]:
    """Every YAML file of the LWS module's ``config/samples`` and ``docs/examples``, sorted by name."""
    root = module_dir("lws")
    files = [*(root / "config" / "samples").rglob("*.yaml"), *(root / "docs" / "examples").rglob("*.yaml")]
    return sorted(files, key=example_name)


def gateway_crd(file_name: str) -> Path:
    """A Gateway API (standard channel) or Inference Extension CRD file by its upstream name."""
    if file_name.startswith("inference."):
        return module_dir("inference-extension") / "config" / "crd" / "bases" / file_name
    return module_dir("gateway-api") / "config" / "crd" / "standard" / file_name


def kueue_crd(plural: str) -> Path:
    """One of Kueue's quota CRDs (``clusterqueues``, ``localqueues``, ``resourceflavors``)."""
    return module_dir("kueue") / "config" / "components" / "crd" / "bases" / f"kueue.x-k8s.io_{plural}.yaml"


def k8s_proto_roots() -> tuple[Path, Path]:
    """The cached k8s.io/api and k8s.io/apimachinery copies (generated.proto and Go types per package)."""
    return module_dir("k8s-api"), module_dir("k8s-apimachinery")


def argo_schema() -> Path:
    """Argo Workflows' JSON schema (``api/jsonschema/schema.json``)."""
    return module_dir("argo-workflows") / "api" / "jsonschema" / "schema.json"
