"""Generate the code-derived parts of docs/architecture.md: module tables, the import graph, line counts.

Usage: ``.venv/bin/python scripts/architecture.py [--check]``. Walks the packages (``controller``,
``components``, ``pipelines``, ``sim``, ``rehearsal``) with ``ast`` only (nothing is imported) and
rewrites what lies between the doc's markers; everything outside them stays hand-written:

- ``<!-- generated: modules <package> -->`` … ``<!-- end generated -->``: one row per module (path,
  its length, the first sentence of its docstring).
- ``<!-- generated: imports -->`` … ``<!-- end generated -->``: which units import which (a unit is a
  subpackage such as ``controller.api``, a module of ``controller/``'s own such as
  ``controller.errors``, or another package's own top-level modules together, named by the package).
- ``<!-- generated: lines <path or glob> ... -->`` … ``<!-- end generated -->`` inline: the summed
  line count of those files, as "about N lines".

Lengths are given to two significant figures (647 lines: 650), so an edit of a few lines leaves the
doc as it is; a module added, removed or renamed, a new first sentence, a new import edge, or a
module that grows or shrinks past its rounding changes it.

``--check`` writes nothing and exits 1 when the doc differs from what this would write (the diff on
stderr). Output is deterministic: files, rows and edges are sorted.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import re
import sys
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from lwsflow.components.atomic import write_file_atomic

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "architecture.md"
PACKAGES = ("controller", "components", "pipelines", "cli", "dashboard", "report", "sim", "rehearsal")
# Packages whose own top-level modules are each a unit of the graph: the layering rests on them
# (``errors``, ``clock``, ``yamlio``). Elsewhere a package's own modules form one unit.
SPLIT = ("controller",)
COMMAND = ".venv/bin/python scripts/architecture.py"
END = "<!-- end generated -->"
ABBREVIATIONS = ("e.g.", "i.e.", "cf.", "vs.", "etc.", "approx.")
# A block marker opens a section on a line of its own; an inline one sits in a sentence.
BLOCK = re.compile(r"^<!-- generated: (modules \w+|imports) -->\n.*?^<!-- end generated -->$", re.M | re.S)
INLINE = re.compile(r"<!-- generated: lines ([^>]+?) -->(.*?)<!-- end generated -->")


class MarkerError(ValueError):
    """A marker of the doc names a package or file that does not exist."""


@dataclass(frozen=True)
class Module:
    path: Path  # relative to ROOT, e.g. controller/api/lws.py
    lines: int
    summary: str
    imports: dict[str, str]  # imported lwsflow module -> "import" | "lazy" | "typing"

    @property
    def dotted(self) -> str:
        parts = list(self.path.with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        return ".".join(parts)


def _first_sentence(doc: str | None) -> str:
    """The docstring's first sentence, one line, RST literals as Markdown, safe in a table cell."""
    if not doc:
        return ""
    para = " ".join(doc.strip().split("\n\n")[0].split())
    # A sentence ends at ., ! or ? before a space (not "x.y"), unless that ends an abbreviation.
    sentence = para
    for m in re.finditer(r"(?<=[.!?])\s+", para):
        if not para[:m.start()].endswith(ABBREVIATIONS):
            sentence = para[:m.start()]
            break
    sentence = sentence.replace("``", "`").replace("|", "\\|")
    return sentence


def _kind(stack: list[ast.AST]) -> str:
    for node in stack:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            return "lazy"
        if (isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)):
            return "typing"
    return "import"


RANK = {"import": 0, "lazy": 1, "typing": 2}


def _imports(tree: ast.Module, dotted: str, is_package: bool) -> dict[str, str]:
    """The lwsflow modules this module imports, each with the strongest way it does (import time,
    lazily inside a function, or for type checking only)."""
    out: dict[str, str] = {}

    def add(name: str, kind: str) -> None:
        if name.startswith("lwsflow.") and (name not in out or RANK[kind] < RANK[out[name]]):
            out[name] = kind

    def visit(node: ast.AST, stack: list[ast.AST]) -> None:
        if isinstance(node, ast.Import):
            for a in node.names:
                add(a.name, _kind(stack))
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: resolve against this module's package
                pkg = ("lwsflow." + dotted).split(".")
                pkg = pkg if is_package else pkg[:-1]
                pkg = pkg[:len(pkg) - node.level + 1]
                base = ".".join(pkg + ([base] if base else []))
            for a in node.names:
                # ``from lwsflow.controller import errors`` imports the module lwsflow.controller.errors
                add(f"{base}.{a.name}" if a.name != "*" else base, _kind(stack))
        elif (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)
              and isinstance(node.args[0].value, str)
              and ((isinstance(node.func, ast.Attribute) and node.func.attr == "import_module")
                   or (isinstance(node.func, ast.Name) and node.func.id in ("import_module", "__import__")))):
            add(node.args[0].value, _kind(stack))
        for child in ast.iter_child_nodes(node):
            visit(child, [*stack, node])

    visit(tree, [])
    return out


def modules(root: Path) -> list[Module]:
    """Every Python module of the packages, sorted by path (caches and hidden folders skipped)."""
    out = []
    for pkg in PACKAGES:
        for path in sorted((root / pkg).rglob("*.py")):
            rel = path.relative_to(root)
            if any(p.startswith((".", "__pycache__")) for p in rel.parts[:-1]):
                continue
            text = path.read_text()
            tree = ast.parse(text, str(rel))
            mod = Module(rel, len(text.splitlines()), _first_sentence(ast.get_docstring(tree)), {})
            mod.imports.update(_imports(tree, mod.dotted, rel.name == "__init__.py"))
            out.append(mod)
    return out


def unit_of(dotted: str, known: set[str]) -> str | None:
    """The graph unit of a module name (``controller.api.lws`` -> ``controller.api``), or None
    outside the packages. ``known`` holds the dotted names of every module and package."""
    parts = dotted.split(".")
    if parts[0] not in PACKAGES:
        return None
    if len(parts) == 1:
        return parts[0]
    second = ".".join(parts[:2])
    if any(k.startswith(second + ".") for k in known):  # a subpackage
        return second
    return second if parts[0] in SPLIT else parts[0]


def _resolve(name: str, known: set[str]) -> str:
    """``lwsflow.controller.errors.InvalidInput`` -> ``controller.errors``: the longest known prefix."""
    parts = name.removeprefix("lwsflow.").split(".")
    for n in range(len(parts), 0, -1):
        if ".".join(parts[:n]) in known:
            return ".".join(parts[:n])
    return ".".join(parts)


def edges(mods: Iterable[Module]) -> dict[tuple[str, str], str]:
    """(unit, imported unit) -> the strongest kind among the imports behind that edge."""
    mods = list(mods)
    known = {m.dotted for m in mods}
    out: dict[tuple[str, str], str] = {}
    for m in mods:
        src = unit_of(m.dotted, known)
        for name, kind in m.imports.items():
            dst = unit_of(_resolve(name, known), known)
            if src is None or dst is None or dst == src:
                continue
            if (src, dst) not in out or RANK[kind] < RANK[out[(src, dst)]]:
                out[(src, dst)] = kind
    return out


def rounded(n: int) -> int:
    """Two significant figures (1,461 -> 1,500; 647 -> 650; 69 -> 69): sizes, not counts, so that
    an edit of a few lines leaves the doc as it is."""
    digits = len(str(n))
    return round(n, -(digits - 2)) if digits > 2 else n


def about(n: int) -> str:
    return f"about {rounded(n):,} lines"


def lines_of(spec: str, root: Path) -> int:
    total = 0
    for pattern in spec.split():
        found = sorted(root.glob(pattern))
        if not found:
            raise MarkerError(f"`{pattern}` in a lines marker names no file (renamed? fix the marker, "
                              f"then run {COMMAND})")
        total += sum(len(p.read_text().splitlines()) for p in found if p.is_file())
    return total


def module_table(pkg: str, mods: list[Module]) -> str:
    rows = [m for m in mods if m.path.parts[0] == pkg]
    total = sum(m.lines for m in rows)
    out = [f"{len(rows)} modules, {about(total)}.", "", "| Module | Lines (about) | What it is |",
           "|---|--:|---|"]
    for m in rows:
        name = m.path.relative_to(pkg).as_posix()
        out.append(f"| `{name}` | {rounded(m.lines):,} | {m.summary or '(no docstring)'} |")
    return "\n".join(out)


def import_graph(mods: list[Module]) -> str:
    by_src: dict[str, list[str]] = defaultdict(list)
    for (src, dst), kind in sorted(edges(mods).items()):
        by_src[src].append(f"`{dst}`" + ("" if kind == "import" else f" ({kind})"))
    return "\n".join(f"- `{src}` → {', '.join(dsts)}" for src, dsts in sorted(by_src.items()))


def render(doc: str, root: Path | None = None) -> str:
    """The doc with every generated part rewritten from the code under ``root`` (the repository)."""
    root = root or ROOT
    mods = modules(root)

    def block(m: re.Match[str]) -> str:
        what = m.group(1)
        if what == "imports":
            body = import_graph(mods)
        else:
            pkg = what.split()[1]
            if pkg not in PACKAGES:
                raise MarkerError(f"no package {pkg!r} (one of {', '.join(PACKAGES)})")
            body = module_table(pkg, mods)
        return f"<!-- generated: {what} -->\n{body}\n{END}"

    def inline(m: re.Match[str]) -> str:
        return f"<!-- generated: lines {m.group(1)} -->{about(lines_of(m.group(1), root))}{END}"

    return INLINE.sub(inline, BLOCK.sub(block, doc))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="compare only; exit 1 on drift")
    args = ap.parse_args(argv)
    doc = DOC.read_text()
    try:
        new = render(doc, DOC.parents[1])
    except MarkerError as exc:
        print(f"error: docs/{DOC.name}: {exc}", file=sys.stderr)
        return 2
    if new == doc:
        return 0
    if args.check:
        sys.stderr.writelines(difflib.unified_diff(doc.splitlines(True), new.splitlines(True),
                                                   f"{DOC.name} (as written)", f"{DOC.name} (from the code)"))
        print(f"docs/{DOC.name} differs from the code: run {COMMAND}", file=sys.stderr)
        return 1
    write_file_atomic(DOC, new.encode())
    print(f"wrote docs/{DOC.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
