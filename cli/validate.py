"""`lwsflow validate PATH...`: check every LeaderWorkerSet / DisaggregatedSet like the API server would.

Files or directories (recursive ``*.yaml`` / ``*.yml``), multi-document. Each problem is one line on
stderr in the error format of every command, ``error: FILE: KIND/NAME: field.path: message``; other
kinds are skipped with a note on stderr.
Exit 0 when everything is valid, 2 otherwise (unreadable files and bad YAML count as problems).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import typer

from lwsflow.cli.app import app

_OURS = {"LeaderWorkerSet", "DisaggregatedSet", "DisaggregatedSetRoleScaler"}


def _expand(paths: list[Path]) -> list[Path]:
    """Files as given, directories walked (sorted, so output order is stable)."""
    out: list[Path] = []
    for p in paths:
        if p.is_dir():
            out.extend(sorted(f for f in p.rglob("*") if f.suffix in (".yaml", ".yml") and f.is_file()))
        else:
            out.append(p)  # a missing file is reported by the loader, naming it
    return out


def _label(doc: dict[str, Any], index: int) -> str:
    name = (doc.get("metadata") or {}).get("name") if isinstance(doc.get("metadata"), dict) else None
    return f"{doc.get('kind') or '<no kind>'}/{name or f'<unnamed document {index + 1}>'}"


def check_document(doc: Any, index: int) -> tuple[str, list[str]] | None:
    """(KIND/NAME, problem lines) for one of our kinds; None for a kind that is skipped."""
    from lwsflow.controller.api.crd import crd_for_object
    from lwsflow.controller.api.validation import unknown_fields, validate_object

    if not isinstance(doc, dict):
        return f"<document {index + 1}>", [f"not a mapping but a {type(doc).__name__}"]
    label = _label(doc, index)
    if doc.get("kind") not in _OURS:
        return None
    if crd_for_object(doc) is None:
        return label, [f"apiVersion: unsupported apiVersion {doc.get('apiVersion')!r} for {doc.get('kind')}"]
    problems = [str(e) for e in validate_object(doc)]
    problems += [f"{p}: unknown field (the API server would drop it)" for p in unknown_fields(doc)]
    problems += [f"{p}: Required value: no container, so every pod of it is refused (the API server admits "
                 "the object, its StatefulSet reports FailedCreate and no group ever starts)"
                 for p in _no_containers(doc)]
    return label, problems


def _no_containers(doc: dict[str, Any]) -> list[str]:
    """Pod templates with ``containers: []``: the CRD schema and the webhook let them through (so
    ``validate_object``, which admission shares, does too), but the API server refuses every pod."""
    spec: dict[str, Any] = doc["spec"] if isinstance(doc.get("spec"), dict) else {}
    bases: list[tuple[str, Any]] = [("spec", spec)]
    if doc.get("kind") == "DisaggregatedSet":
        roles = spec["roles"] if isinstance(spec.get("roles"), list) else []
        bases = [(f"spec.roles[{i}].spec", r.get("spec")) for i, r in enumerate(roles) if isinstance(r, dict)]
    out = []
    for base, role_spec in bases:
        lwt = role_spec.get("leaderWorkerTemplate") if isinstance(role_spec, dict) else None
        for tname in ("leaderTemplate", "workerTemplate"):
            tpl = lwt.get(tname) if isinstance(lwt, dict) else None
            pod = tpl.get("spec") if isinstance(tpl, dict) else None
            if isinstance(pod, dict) and pod.get("containers") == []:
                out.append(f"{base}.leaderWorkerTemplate.{tname}.spec.containers")
    return out


def validate_paths(paths: list[Path]) -> tuple[list[str], list[str], int]:
    """(problem lines, notes, objects checked) for the given files / directories."""
    from lwsflow.controller.errors import InvalidInput
    from lwsflow.controller.yamlio import load_yaml_documents

    problems: list[str] = []
    notes: list[str] = []
    checked = 0
    files = _expand(paths)
    for given in paths:
        if given.is_dir() and not any(f.is_relative_to(given) for f in files):
            notes.append(f"{given}: no *.yaml or *.yml files")
    for path in files:
        try:
            docs = load_yaml_documents(path)
        except InvalidInput as exc:
            problems.append(str(exc) if exc.source else f"{path}: {exc}")
            continue
        for i, doc in enumerate(docs):
            result = check_document(doc, i)
            if result is None:
                notes.append(f"{path}: skipped {_label(doc, i)} (not a LeaderWorkerSet or DisaggregatedSet)")
                continue
            checked += 1
            label, lines = result
            problems.extend(f"{path}: {label}: {line}" for line in lines)
    return problems, notes, checked


@app.command()
def validate(
    paths: list[Path] = typer.Argument(..., help="YAML files or directories (searched recursively)."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Do not print notes about skipped objects."),
) -> int:
    """Validate LeaderWorkerSet / DisaggregatedSet manifests: CRD schema, defaults and webhook rules."""
    problems, notes, checked = validate_paths(paths)
    if not quiet:
        for note in notes:
            print(f"note: {note}", file=sys.stderr)
    from lwsflow.cli.output import print_error

    for line in problems:
        print_error(line)
    summary = f"{checked} object(s) checked, {len(problems)} problem(s)"
    print(summary, file=sys.stderr)
    if problems:
        raise typer.Exit(code=2)
    return 0
