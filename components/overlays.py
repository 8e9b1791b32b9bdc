"""The rendered Kustomize tree: ``base/<model>/`` plus one overlay per environment and model.

Layout written by ``render_tree`` (all paths relative to the output folder)::

    base/<model>/kustomization.yaml          resources: one file per rendered object
    base/<model>/<kind>-<name>.yaml          the renderer's objects, environment-agnostic
    <env>/kustomization.yaml                 aggregates every model of the environment (Argo CD's path)
    <env>/<model>/kustomization.yaml         namespace, labels, replicas, rollout patches, image pin
    <env>/<model>/kustomizeconfig.yaml       teaches ``replicas:`` the LeaderWorkerSet kind

Environment differences are computed, not hand-coded: the overlay holds exactly what turns the
base (``render_model(catalog, model)``) into the environment's render (``render_model(catalog,
model, env)``). LeaderWorkerSet replicas go through ``replicas:`` (with the shipped fieldSpec, since
kustomize does not know the kind); everything else - DS role replicas, rollout budgets, the stage
annotations - goes through JSON 6902 patches, because a strategic-merge patch on a custom resource
replaces lists wholesale. Rollout budgets, stage annotations and replicas are always written, even
when equal to the base, so an overlay states what runs in its environment.

**Digest pins are state, not render output.** ``set-image`` and ``promote`` write the serving
image's pin into ``<env>/<model>/kustomization.yaml`` as an ``images:`` entry
(``{name, [newName], digest}``) and record who pinned it in the overlay's own
``metadata.annotations["lwsflow.io/image-pin"]``. ``render`` keeps such a pin while its ``name`` is
still the base image, so re-rendering never undoes a promotion. Without one, a catalog image written
``name[:tag]@sha256:...`` becomes the ``images:`` entry and is re-derived on every render (a digest
bump in the catalog reaches every environment nobody pinned explicitly); a tag-only catalog image
gets no entry, which only non-production environments accept.

**Not released yet.** An environment named ``prod``, ``production`` or ``prod-*`` runs digests
only. A model whose image has no digest there yet (a new catalog with tag-only images) still gets
its ``<env>/<model>/`` overlay, so ``set-image``/``promote`` can pin it, but the environment's
aggregate ``<env>/kustomization.yaml`` leaves it out, with a comment saying why, until a pin lands
(``held_reason``, ``aggregate_file``; gitops lists it in the same commit as the pin). Argo CD syncs the
aggregate, so nothing tag-only reaches production, and the first render of a new catalog works.

Writing is deterministic (same input, same bytes) and atomic in the sense that matters for a
GitOps tree: every file is computed before the first write, so an error leaves the folder as it
was; each file is replaced with ``os.replace``. A symlinked output folder, a symlink inside it and
any path escaping it are refused.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from lwsflow.components.atomic import stage_files
from lwsflow.components.catalog import Catalog
from lwsflow.components.sizing import check_pool_capacity, size_catalog
from lwsflow.controller.api import labels as L
from lwsflow.controller.api.objects import container_images
from lwsflow.controller.errors import InvalidInput
from lwsflow.controller.yamlio import dump_yaml, parse_yaml_documents

RenderFn = Callable[..., list[dict[str, Any]]]

ENVIRONMENT_LABEL = f"{L.LWSFLOW}/environment"
RENDERED_REVISION = f"{L.LWSFLOW}/rendered-revision"
PIN_ORIGIN = f"{L.LWSFLOW}/image-pin"  # on the overlay's own metadata: who pinned (set-image, promote)
KUSTOMIZATION = "kustomization.yaml"
KUSTOMIZE_CONFIG = "kustomizeconfig.yaml"
KUSTOMIZE_API = "kustomize.config.k8s.io/v1beta1"
RESERVED_DIRS = frozenset({"base", "rbac", "argocd", "controller"})  # controller: incluster
DIGEST = re.compile(r"^sha256:[0-9a-f]{64}\Z")

REPLICAS_CONFIG = {
    "replicas": [
        {"path": "spec/replicas", "create": True, "group": L.LWS_GROUP, "version": "v1", "kind": L.LWS_KIND}
    ]
}


def requires_digest(env: str) -> bool:
    """Production environments run only images pinned by digest."""
    return env in ("prod", "production") or env.startswith("prod-")


# -- image references ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ImageRef:
    """``name[:tag][@sha256:...]`` split into its parts (``name`` keeps the registry host)."""

    name: str
    tag: str | None = None
    digest: str | None = None

    @classmethod
    def parse(cls, ref: str) -> ImageRef:
        rest, _, digest = ref.partition("@")
        slash = rest.rfind("/")
        colon = rest.rfind(":")
        tag = None
        if colon > slash:
            rest, tag = rest[:colon], rest[colon + 1 :]
        return cls(rest, tag or None, digest or None)


# -- JSON 6902 diff ------------------------------------------------------------------------------------


def pointer(parts: Iterable[str | int]) -> str:
    """A JSON pointer (RFC 6901): ``~`` and ``/`` inside keys are escaped (annotation keys have ``/``)."""
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


def diff_ops(old: Any, new: Any, path: tuple[str | int, ...] = ()) -> list[dict[str, Any]]:
    """JSON 6902 operations turning ``old`` into ``new``; lists of another length are replaced whole."""
    if isinstance(old, dict) and isinstance(new, dict):
        # an identical subtree (most of a pod template) in one C-level comparison; repr tells 1, 1.0
        # and True apart, as the leaf rule below does
        if old == new and repr(old) == repr(new):
            return []
        ops: list[dict[str, Any]] = []
        for k, v in new.items():
            if k not in old:
                ops.append({"op": "add", "path": pointer((*path, k)), "value": v})
            else:
                ops += diff_ops(old[k], v, (*path, k))
        ops += [{"op": "remove", "path": pointer((*path, k))} for k in old if k not in new]
        return ops
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        return [
            op for i, (a, b) in enumerate(zip(old, new, strict=True)) for op in diff_ops(a, b, (*path, i))
        ]
    if old == new and type(old) is type(new):
        return []
    return [{"op": "replace", "path": pointer(path), "value": new}]


def _get(obj: Any, parts: tuple[str | int, ...]) -> tuple[bool, Any]:
    for p in parts:
        if isinstance(obj, dict):
            if p not in obj:
                return False, None
            obj = obj[p]
        elif isinstance(obj, list) and isinstance(p, int) and p < len(obj):
            obj = obj[p]
        else:
            return False, None
    return True, obj


def _explicit_paths(obj: dict[str, Any]) -> list[tuple[str | int, ...]]:
    """Fields every overlay states even when equal to the base: rollout budgets and stage annotations."""
    ann = ("metadata", "annotations")
    paths: list[tuple[str | int, ...]] = [
        (*ann, k) for k in (L.ROLLOUT_STAGES, L.ROLLOUT_BAKE, L.ROLLOUT_DEADLINE)
    ]
    ruc = ("rolloutStrategy", "rollingUpdateConfiguration")
    if obj.get("kind") == L.LWS_KIND:
        paths += [("spec", *ruc, f) for f in ("maxUnavailable", "maxSurge", "partition")]
    elif obj.get("kind") == L.DS_KIND:
        for i, _role in enumerate(obj.get("spec", {}).get("roles", [])):
            paths.append(("spec", "roles", i, "spec", "replicas"))
            paths += [("spec", "roles", i, "spec", *ruc, f) for f in ("maxUnavailable", "maxSurge")]
    return paths


def overlay_ops(base: dict[str, Any], env: dict[str, Any]) -> list[dict[str, Any]]:
    """Patch operations for one object; LWS ``spec.replicas`` and the namespace are left to kustomize."""
    skip = {"/metadata/namespace"} | ({"/spec/replicas"} if base.get("kind") == L.LWS_KIND else set())
    ops = [op for op in diff_ops(base, env) if op["path"] not in skip]
    touched = {op["path"] for op in ops}
    for parts in _explicit_paths(env):
        ptr = pointer(parts)
        in_base, _ = _get(base, parts)
        found, value = _get(env, parts)
        if found and in_base and ptr not in touched and not any(ptr.startswith(t + "/") for t in touched):
            ops.append({"op": "replace", "path": ptr, "value": value})
    # Role patches address list indexes: guard each index with a `test` on the role's name so a
    # reordered base fails the build instead of patching the wrong role.
    guards: list[dict[str, Any]] = []
    for i, role in enumerate(base.get("spec", {}).get("roles", []) if base.get("kind") == L.DS_KIND else []):
        if any(op["path"].startswith(f"/spec/roles/{i}/") for op in ops):
            guards.append({"op": "test", "path": f"/spec/roles/{i}/name", "value": role.get("name")})
    return guards + ops


# -- tree computation ----------------------------------------------------------------------------------


def _key(obj: dict[str, Any]) -> tuple[str, str, str]:
    return (
        str(obj.get("apiVersion", "")),
        str(obj.get("kind", "")),
        str(obj.get("metadata", {}).get("name", "")),
    )


def object_filename(obj: dict[str, Any]) -> str:
    return f"{str(obj.get('kind', 'object')).lower()}-{obj.get('metadata', {}).get('name', 'unnamed')}.yaml"


def _yaml(doc: Any) -> bytes:
    return dump_yaml(doc).encode()


def read_kustomization(path: Path) -> dict[str, Any] | None:
    """An existing kustomization (None when absent); a malformed one is InvalidInput naming it."""
    if not path.is_file():
        return None
    docs = parse_yaml_documents(path.read_bytes(), source=str(path))
    if len(docs) != 1 or not isinstance(docs[0], dict):
        raise InvalidInput("expected one kustomization mapping", source=str(path))
    return docs[0]


def existing_pins(kustomization: dict[str, Any] | None) -> dict[str, dict[str, str]]:
    """The digest-pinned ``images:`` entries of an overlay, by image name."""
    out: dict[str, dict[str, str]] = {}
    for entry in (kustomization or {}).get("images") or []:
        if isinstance(entry, dict) and DIGEST.match(str(entry.get("digest", ""))) and entry.get("name"):
            out[str(entry["name"])] = {
                k: str(entry[k]) for k in ("name", "newName", "digest") if entry.get(k)
            }
    return out


def pin_origin(kustomization: dict[str, Any] | None) -> str | None:
    """Who wrote the overlay's pin (``set-image``, ``promote from staging``), None for catalog digests."""
    ann = ((kustomization or {}).get("metadata") or {}).get("annotations") or {}
    origin = ann.get(PIN_ORIGIN)
    return str(origin) if origin else None


def kept_pins(kustomization: dict[str, Any] | None) -> dict[str, dict[str, str]]:
    """The pins a re-render must keep: those set-image/promote wrote (catalog digests are re-derived,
    so a digest bump in the catalog reaches every environment nobody pinned explicitly)."""
    return existing_pins(kustomization) if pin_origin(kustomization) else {}


def set_pins(doc: dict[str, Any], pins: list[dict[str, str]], origin: str) -> dict[str, Any]:
    """``doc`` with ``pins`` merged into ``images:`` and ``origin`` recorded, in the renderer's key order."""
    entries = {str(e.get("name")): e for e in doc.get("images") or [] if isinstance(e, dict)}
    entries.update({p["name"]: p for p in pins})
    images = [entries[n] for n in sorted(entries)]
    meta = dict(doc.get("metadata") or {})
    meta["annotations"] = {**(meta.get("annotations") or {}), PIN_ORIGIN: origin}
    out: dict[str, Any] = {}
    for k, v in doc.items():
        if k in ("images", "metadata"):
            continue
        if k == "patches":
            out["images"] = images
        out[k] = v
        if k == "kind":
            out["metadata"] = meta
    out.setdefault("images", images)
    return out


def image_entries(base_objs: list[dict[str, Any]], pins: dict[str, dict[str, str]]) -> list[dict[str, str]]:
    """The ``images:`` of an overlay: kept pins, then catalog digests (a bare tag gets no entry)."""
    refs = sorted({r for o in base_objs for r in container_images(o)})
    entries: dict[str, dict[str, str]] = {}
    for ref in refs:
        img = ImageRef.parse(ref)
        if img.name in pins:
            entries[img.name] = pins[img.name]
        elif img.digest and DIGEST.match(img.digest):
            entries[img.name] = {"name": img.name, "digest": img.digest}
    return [entries[n] for n in sorted(entries)]


def unpinned(refs: Iterable[str], kustomization: dict[str, Any] | None) -> list[str]:
    """The base image references an overlay leaves without a digest (no pin, no catalog digest)."""
    pins = existing_pins(kustomization)
    out = []
    for ref in sorted(set(refs)):
        img = ImageRef.parse(ref)
        if img.name not in pins and not (img.digest and DIGEST.match(img.digest)):
            out.append(ref)
    return out


def held_reason(env: str, refs: Iterable[str], kustomization: dict[str, Any] | None) -> str | None:
    """Why ``env`` cannot run an overlay yet (a digests-only environment and a bare tag), else None."""
    bare = unpinned(refs, kustomization) if requires_digest(env) else []
    return f"no digest pinned for {', '.join(bare)}" if bare else None


def aggregate_file(env: str, models: list[str], held: dict[str, str]) -> bytes:
    """``<env>/kustomization.yaml``: every model in order; a held one as a comment saying why."""
    head = _yaml({"apiVersion": KUSTOMIZE_API, "kind": "Kustomization"}).decode()
    lines = ["resources:" if any(m not in held for m in models) else "resources: []"]
    for m in models:
        if m in held:
            lines.append(f"# - {m} (not released in {env}: {held[m]}; `lwsflow set-image` or "
                         "`lwsflow promote` pins it and lists it here)")
        else:
            lines.append(f"- {m}")
    return (head + "\n".join(lines) + "\n").encode()


_AGGREGATE_ENTRY = re.compile(r"^(?:# )?- ([a-z0-9][-a-z0-9.]*)(?: \(|$)")


def aggregate_order(data: bytes) -> list[str]:
    """The models an ``aggregate_file`` names, listed or held, in its order."""
    return [m.group(1) for ln in data.decode().splitlines() if (m := _AGGREGATE_ENTRY.match(ln))]


def listed_models(aggregate: dict[str, Any] | None) -> list[str]:
    """The model folders an environment's aggregate kustomization lists."""
    return [str(r) for r in (aggregate or {}).get("resources") or [] if isinstance(r, str)]


def base_image_refs(tree: Path, model: str, init_containers: bool = True) -> list[str]:
    """The container images of ``base/<model>``'s rendered objects, as written in the base
    (``init_containers=False``: not the init containers' and native sidecars')."""
    refs: set[str] = set()
    for f in sorted(safe_path(tree, f"base/{model}").glob("*.yaml")):
        if f.name != KUSTOMIZATION:
            for obj in parse_yaml_documents(f.read_bytes(), source=str(f)):
                if isinstance(obj, dict):
                    refs.update(container_images(obj, init_containers))
    return sorted(refs)


def _revision(files: dict[str, bytes]) -> str:
    h = hashlib.sha256()
    for name in sorted(files):
        h.update(name.encode() + b"\0" + files[name] + b"\0")
    return h.hexdigest()[:16]


def _base_files(model: str, objs: list[dict[str, Any]]) -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    for o in objs:
        name = object_filename(o)
        if f"base/{model}/{name}" in files:
            raise InvalidInput(f"two rendered objects share the file name {name}", source=f"base/{model}")
        files[f"base/{model}/{name}"] = _yaml(o)
    files[f"base/{model}/{KUSTOMIZATION}"] = _yaml(
        {
            "apiVersion": KUSTOMIZE_API,
            "kind": "Kustomization",
            "resources": [object_filename(o) for o in objs],
        }
    )
    return files


def _env_overlay(
    catalog: Catalog,
    model: str,
    env: str,
    base_objs: list[dict[str, Any]],
    env_objs: list[dict[str, Any]],
    revision: str,
    current: dict[str, Any] | None,
) -> dict[str, Any]:
    where = f"{env}/{model}"
    by_key = {_key(o): o for o in env_objs}
    if set(by_key) != {_key(o) for o in base_objs}:
        raise InvalidInput(
            "environment overrides change the set of rendered objects; only replicas "
            "and rollout settings may differ per environment",
            source=where,
        )
    replicas: list[dict[str, Any]] = []
    patches: list[dict[str, Any]] = []
    for b in base_objs:
        e = by_key[_key(b)]
        group, _, version = str(b["apiVersion"]).rpartition("/")
        if b.get("kind") == L.LWS_KIND:
            replicas.append(
                {"name": b["metadata"]["name"], "count": int(e.get("spec", {}).get("replicas", 1))}
            )
        ops = overlay_ops(b, e)
        if ops:
            target = {"group": group, "version": version, "kind": b["kind"], "name": b["metadata"]["name"]}
            patches.append(
                {"target": {k: v for k, v in target.items() if v}, "patch": dump_yaml(ops).rstrip("\n")}
            )
    envspec = catalog.environment(env)
    doc: dict[str, Any] = {
        "apiVersion": KUSTOMIZE_API,
        "kind": "Kustomization",
        "resources": [f"../../base/{model}"],
        "namespace": envspec.namespace or catalog.namespace,
        "configurations": [KUSTOMIZE_CONFIG],
        "labels": [
            {
                "pairs": {
                    L.APP_NAME: model,
                    L.APP_PART_OF: "lwsflow",
                    L.MODEL: model,
                    ENVIRONMENT_LABEL: env,
                },
                "includeSelectors": False,
            }
        ],
        "commonAnnotations": {RENDERED_REVISION: revision},
    }
    if replicas:
        doc["replicas"] = replicas
    images = image_entries(base_objs, kept_pins(current))
    if images:
        doc["images"] = images
    if patches:
        doc["patches"] = patches
    origin = pin_origin(current)
    return set_pins(doc, [], origin) if origin and images else doc


def _overlay_file(
    path: Path, overlay: Callable[[dict[str, Any] | None], dict[str, Any]]
) -> tuple[dict[str, Any], bytes]:
    """The kustomization ``overlay(current)`` computes from the one at ``path`` (None when absent),
    and its bytes.

    Only pins carry over from ``current``, so a file that is byte for byte what the overlay renders
    without one holds no pin and need not be parsed: re-rendering an unchanged tree (``--check``)
    parses only the overlays set-image or promote pinned.
    """
    if path.is_file():
        with contextlib.suppress(InvalidInput):  # e.g. prod refusing a tag: decided with the pins below
            doc = overlay(None)
            data = _yaml(doc)
            if data == path.read_bytes():
                return doc, data
    doc = overlay(read_kustomization(path))
    return doc, _yaml(doc)


def render_tree(catalog: Catalog, out: Path, render: RenderFn | None = None) -> dict[str, bytes]:
    """Every file of the tree as bytes, keyed by path relative to ``out`` (reads pins from ``out``).

    ``render`` defaults to ``lwsflow.components.manifests.render_model``; it is a parameter so the tree logic
    can be exercised with any renderer of the same contract.
    """
    if render is None:
        from lwsflow.components.manifests import render_model

        render = render_model
    envs = [e.name for e in catalog.environments]
    clash = RESERVED_DIRS.intersection(envs)
    if clash:
        raise InvalidInput(
            f"environment name {sorted(clash)[0]!r} is reserved for the overlay tree", field="environments"
        )
    for env_name in (None, *envs):  # the base and every environment must fit their pools (as `plan`)
        check_pool_capacity(catalog, size_catalog(catalog, env_name), env_name)
    files: dict[str, bytes] = {}
    env_models: dict[str, list[str]] = {e: [] for e in envs}
    held: dict[str, dict[str, str]] = {e: {} for e in envs}
    replicas_config = _yaml(REPLICAS_CONFIG)
    for m in catalog.models:
        base_objs = render(catalog, m.name)
        base = _base_files(m.name, base_objs)
        files.update(base)
        revision = _revision(base)
        for env in envs:
            env_objs = render(catalog, m.name, env)
            doc, files[f"{env}/{m.name}/{KUSTOMIZATION}"] = _overlay_file(
                safe_path(out, f"{env}/{m.name}/{KUSTOMIZATION}"),
                partial(_env_overlay, catalog, m.name, env, base_objs, env_objs, revision),
            )
            files[f"{env}/{m.name}/{KUSTOMIZE_CONFIG}"] = replicas_config
            env_models[env].append(m.name)
            reason = held_reason(env, (r for o in base_objs for r in container_images(o)), doc)
            if reason:
                held[env][m.name] = reason
    for env, models in env_models.items():
        files[f"{env}/{KUSTOMIZATION}"] = aggregate_file(env, models, held[env])
    return files


def managed_roots(catalog: Catalog) -> list[str]:
    """The top-level folders the renderer owns (everything else in the tree is left alone)."""
    return ["base", *(e.name for e in catalog.environments)]


# -- safe, atomic writing ------------------------------------------------------------------------------


def safe_path(root: Path, rel: str) -> Path:
    """``root/rel`` after refusing absolute paths, ``..`` and symlinks anywhere on the way."""
    parts = Path(rel).parts
    if not parts or Path(rel).is_absolute() or any(p in ("..", ".", "") for p in parts):
        raise InvalidInput(f"path {rel!r} escapes the output folder", source=str(root))
    if root.is_symlink():
        raise InvalidInput("output folder is a symlink; refusing to write through it", source=str(root))
    cur = root
    for p in parts:
        cur = cur / p
        if cur.is_symlink():
            raise InvalidInput(f"{rel}: {cur} is a symlink; refusing to write through it", source=str(root))
    return cur


def on_disk(root: Path, roots: list[str]) -> dict[str, bytes]:
    """Files currently under the managed folders of ``root``."""
    out: dict[str, bytes] = {}
    for top in roots:
        d = safe_path(root, top)
        if not d.is_dir():
            continue
        for path in sorted(d.rglob("*")):
            if path.is_symlink():
                raise InvalidInput(f"{path} is a symlink inside the rendered tree", source=str(root))
            if path.is_file():
                out[path.relative_to(root).as_posix()] = path.read_bytes()
    return out


def drift(root: Path, files: dict[str, bytes], roots: list[str]) -> list[str]:
    """Paths that differ between ``files`` and the tree on disk (changed, missing or extra), sorted."""
    current = on_disk(root, roots) if root.is_dir() else {}
    return sorted(p for p in set(files) | set(current) if files.get(p) != current.get(p))


def write_tree(root: Path, files: dict[str, bytes], roots: list[str]) -> list[str]:
    """Make the managed folders of ``root`` hold exactly ``files``; returns the paths changed.

    Every path is checked and every new file staged (written and synced under a temporary name)
    before the first rename, so a refused path or a full disk leaves the tree as it was; only the
    final renames, which do not allocate space, remain.
    """
    if root.is_symlink():
        raise InvalidInput("output folder is a symlink; refusing to write through it", source=str(root))
    targets = {rel: safe_path(root, rel) for rel in files}
    changed = drift(root, files, roots)
    root.mkdir(parents=True, exist_ok=True)
    new = [rel for rel in changed if rel in files]
    staged = dict(zip(new, stage_files([(targets[rel], files[rel]) for rel in new]), strict=True))
    for rel in changed:
        if rel in staged:
            os.replace(staged[rel], targets[rel])
        else:
            safe_path(root, rel).unlink()
    for top in roots:  # drop folders emptied by removed models
        d = root / top
        if d.is_dir():
            for sub in sorted((p for p in d.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
                with contextlib.suppress(OSError):
                    sub.rmdir()
    return changed


def render_to(
    catalog: Catalog, out: Path, *, check: bool = False, render: RenderFn | None = None
) -> list[str]:
    """Render the tree into ``out`` (or with ``check`` only compare); returns the differing paths."""
    out = Path(out)
    for folder in (out, *out.parents):  # a file where a folder must go: one line, not an OSError
        if folder.exists() or folder.is_symlink():
            if not folder.is_dir():
                raise InvalidInput(f"{folder} exists and is not a folder", field="--out", source=str(out))
            break
    files = render_tree(catalog, out, render)
    roots = managed_roots(catalog)
    if check:
        return drift(out, files, roots)
    return write_tree(out, files, roots)
