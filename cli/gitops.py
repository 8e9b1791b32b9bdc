"""GitOps commands: ``render``, ``build-overlays``, ``set-image``, ``promote``, ``argocd``.

Thin wrappers over ``lwsflow.components.overlays``, ``.kustomize``, ``.gitops`` and ``.argocd``;
every user error surfaces as one line with exit code 2.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from lwsflow.cli.app import app

if TYPE_CHECKING:
    from lwsflow.components.catalog import Catalog

# Options shared by several commands below, declared once so their flags and help cannot drift apart.
CheckOpt = Annotated[bool, typer.Option("--check", help="only compare; exit 1 listing files that differ")]
RepoOpt = Annotated[Path, typer.Option("--repo", help="git work tree")]
OverlaysOpt = Annotated[Path, typer.Option("--overlays", help="overlay tree inside the repo")]
PushOpt = Annotated[bool, typer.Option("--push", help="push (rebase and retry when rejected)")]


@app.command()
def render(
    catalog: Annotated[Path, typer.Argument(help="catalog YAML")],
    out: Annotated[Path, typer.Option("--out", help="overlay tree to write (base/ and one folder per env)")],
    check: CheckOpt = False,
) -> None:
    """Render the catalog into a Kustomize tree (deterministic, atomic; keeps digest pins)."""
    from lwsflow.cli.output import about_file, warn_about_catalog
    from lwsflow.components.catalog import load_catalog
    from lwsflow.components.overlays import render_to

    cat = load_catalog(catalog)
    warn_about_catalog(cat, catalog)
    with about_file(catalog):  # sizing and rendering errors name the file, as `plan` does
        changed = render_to(cat, out, check=check)
    if check:
        if changed:
            for path in changed:
                print(f"drift: {out / path}")
            print(
                f"{len(changed)} file(s) differ from what {catalog} renders; run `lwsflow render "
                f"{catalog} --out {out}`"
            )
            raise typer.Exit(1)
        print(f"{out}: up to date with {catalog}")
        return
    print(f"{out}: {len(changed)} file(s) written" if changed else f"{out}: unchanged")
    _print_held(cat, out)


def _print_held(cat: Catalog, out: Path) -> None:
    """Name the models a digests-only environment does not run yet (their aggregate holds them)."""
    from lwsflow.components.overlays import KUSTOMIZATION, aggregate_order, listed_models, read_kustomization

    for env in cat.environments:
        path = out / env.name / KUSTOMIZATION
        if path.is_file():
            listed = set(listed_models(read_kustomization(path)))
            held = [m for m in aggregate_order(path.read_bytes()) if m not in listed]
            if held:
                print(f"{env.name}: not released yet, no digest pinned: {', '.join(held)} "
                      "(`lwsflow set-image` or `lwsflow promote` releases them)")


@app.command("build-overlays")
def build_overlays(
    tree: Annotated[Path, typer.Argument(help="overlay tree (with base/ and <env>/)")],
    env: Annotated[str | None, typer.Option("--env", help="only this environment")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the results as JSON")] = False,
) -> None:
    """Kustomize-build every environment overlay and validate the LWS/DS in it (prod: digests only)."""
    from lwsflow.components.kustomize import build_overlays as build

    results = build(tree, env)
    if as_json:
        print(json.dumps([r.summary() for r in results], indent=2))
        return
    for r in results:
        if r.held:
            print(f"not released {r.path}: {r.held}")
            continue
        kinds = ", ".join(f"{o.get('kind')}/{o.get('metadata', {}).get('name')}" for o in r.objects)
        print(f"ok {r.path}: {kinds}; images {', '.join(r.images) or '-'}")


def _report(change: object) -> None:
    from lwsflow.components.gitops import GitChange

    assert isinstance(change, GitChange)
    if change.commit is None:
        print(f"{change.path}: already at {change.digest}; nothing to commit")
    else:
        pushed = f" (pushed after {change.push_attempts} attempt(s))" if change.pushed else ""
        print(f"committed {change.commit} {change.path}{pushed}")
    print(change.head)


@app.command("set-image")
def set_image(
    model: Annotated[str, typer.Argument(help="catalog model name")],
    env: Annotated[str, typer.Option("--env", help="environment overlay to pin")],
    digest: Annotated[str, typer.Option("--digest", help="sha256:<64 hex>")],
    image: Annotated[str | None, typer.Option("--image", help="repository to pull from (newName)")] = None,
    repo: RepoOpt = Path("."),
    overlays: OverlaysOpt = Path("overlays"),
    push: PushOpt = False,
) -> None:
    """Pin a freshly built image digest in one environment: one validated git commit."""
    from lwsflow.components.gitops import set_image as do

    _report(do(model, env, digest, repo=repo, overlays=overlays, image=image, push=push))


@app.command()
def promote(
    model: Annotated[str, typer.Argument(help="catalog model name")],
    source: Annotated[str, typer.Option("--from", help="source environment")],
    target: Annotated[str, typer.Option("--to", help="target environment")],
    repo: RepoOpt = Path("."),
    overlays: OverlaysOpt = Path("overlays"),
    push: PushOpt = False,
) -> None:
    """Promote the source environment's digest pin to the target: one validated git commit."""
    from lwsflow.components.gitops import promote as do

    _report(do(model, source, target, repo=repo, overlays=overlays, push=push))


@app.command()
def argocd(
    tree: Annotated[Path, typer.Argument(help="overlay tree whose environments get an Application")],
    out: Annotated[Path, typer.Option("--out", help="folder for the Argo CD manifests")],
    repo_url: Annotated[str, typer.Option("--repo-url", help="git URL Argo CD pulls")],
    path: Annotated[str, typer.Option("--path", help="overlay tree path inside the repo")] = "overlays",
    revision: Annotated[str, typer.Option("--revision", help="branch, tag or commit to track")] = "HEAD",
    namespace: Annotated[str, typer.Option("--namespace", help="Argo CD's namespace")] = "argocd",
    check: CheckOpt = False,
) -> None:
    """Write Argo CD Applications (one per environment) and the argocd-cm health checks."""
    from lwsflow.components.argocd import write_argocd

    changed = write_argocd(
        tree, out, repo_url=repo_url, path=path, revision=revision, namespace=namespace, check=check
    )
    if check and changed:
        for p in changed:
            print(f"drift: {out / p}")
        raise typer.Exit(1)
    print(f"{out}: {len(changed)} file(s) {'differ' if check else 'written'}")
