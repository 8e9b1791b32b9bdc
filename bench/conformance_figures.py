"""Figures of the conformance tier, from a real run: tests passed, failed and allow-listed by kind;
the whole-object differential's objects and paths compared, matched and ignored by kind.

Run ``make conformance`` first (or some of its files: the figures are then that run's); it writes
``build/conformance/results.json`` (each test's outcome and the allow-list entries it used,
tests/conformance/conftest.py) and ``build/conformance/differential.json`` (test_differential.py).
Then::

    .venv/bin/python bench/conformance_figures.py [--entries] [--update-differential]

A test is *matched* when it passed using no allow-list or differential entry, *allow-listed* (by the
entry's kind: embedded-gap, version, nondeterministic, modelled-out; the first of those in that order
when it used several) when it passed using one, and *failed* / *error* / *skipped* as the run said.
``--update-differential`` writes the differences the ignore file did not explain into
tests/conformance/differential.yaml as candidate entries (``kind: TODO``, ``reason: TODO``: the
differential's tests refuse them until a person classifies each) and drops entries that explained
nothing: review the diff by hand.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
REPORT = Path(os.environ.get("LWSFLOW_CONFORMANCE_REPORT", REPO / "build" / "conformance"))
ALLOWLIST = REPO / "tests" / "conformance" / "allowlist.yaml"
IGNORES = REPO / "tests" / "conformance" / "differential.yaml"
KINDS = ("embedded-gap", "version", "nondeterministic", "modelled-out")
OUTCOMES = ("failed", "error", "skipped")
# which check of issue #15 each test module is (7: the whole-object differential of issue #25)
CHECKS = {"test_examples": 1, "test_rolling": 2, "test_behaviours": 3, "test_exclusive": 3,
          "test_disaggregated": 3, "test_admission": 5, "test_scheduling": 6, "test_differential": 7}
# list positions whose key is a name chosen by the manifest: a candidate entry matches any
_NAMED_LISTS = re.compile(r"(containers|initContainers|containerStatuses|initContainerStatuses|volumes|"
                          r"volumeMounts|volumeClaimTemplates|ownerReferences|ports|subsets|endpoints|"
                          r"addresses)\[[^\]]*\]")


def _load(name: str) -> dict[str, Any]:
    path = REPORT / name
    if not path.exists():
        raise SystemExit(f"error: {path} not found: run `make conformance` (or its test files) first")
    return dict(json.loads(path.read_text()))


def _check(test_id: str) -> int:
    module = test_id.split("tests/conformance/", 1)[-1].split(".py::", 1)[0]
    return CHECKS.get(module, 4 if module.startswith("test_rollout") else 0)


def tests_table(results: dict[str, Any], show_entries: bool) -> Counter[str]:
    kinds = {str(e["id"]): str(e["kind"]) for e in yaml.safe_load(ALLOWLIST.read_text()) or []}
    by_check: dict[int, Counter[str]] = defaultdict(Counter)
    used: Counter[str] = Counter()
    unused_some: set[str] = set()
    for test_id, r in results["tests"].items():
        entries = {v for k, v in r["properties"] if k == "allowlisted"}
        unused_some |= {v for k, v in r["properties"] if k == "allowlist-unused"}
        used.update(entries)
        used_kinds = {kinds.get(e) for e in entries} | {v for k, v in r["properties"] if k == "ignored-kind"}
        if r["outcome"] != "passed":
            bucket = r["outcome"]
        else:
            bucket = next((k for k in KINDS if k in used_kinds), "matched")
        by_check[_check(test_id)][bucket] += 1
    cols = ("matched", *KINDS, *OUTCOMES)
    total: Counter[str] = sum(by_check.values(), Counter())
    print(f"conformance run finished {results['finished']}: {sum(total.values())} tests")
    print(f"{'check':<7}{'tests':>6}" + "".join(f"{c:>17}" for c in cols))
    for check in sorted(by_check):
        c = by_check[check]
        print(f"{check or '?':<7}{sum(c.values()):>6}" + "".join(f"{c[k]:>17}" for k in cols))
    print(f"{'all':<7}{sum(total.values()):>6}" + "".join(f"{total[k]:>17}" for k in cols))
    entry_kinds = Counter(kinds.values())
    print(f"allow-list entries: {len(kinds)} ({', '.join(f'{entry_kinds[k]} {k}' for k in KINDS)}); "
          f"used in this run: {len(used)}")
    if unused_some:
        print(f"entries (runs: some) the reference matched in this run: {', '.join(sorted(unused_some))}")
    if show_entries:
        for e, k in kinds.items():
            print(f"  {k:<17} {used[e]:>3} test(s)  {e}")
    return total


def differential_table(diff: dict[str, Any], show_entries: bool) -> None:
    f = diff["figures"]
    ignored = f["ignored_by_kind"]
    print(f"\nwhole-object differential ({f['sources']} sources, {f['seconds']} s): "
          f"{f['objects_compared']} objects on both clusters, {f['objects_only_reference']} on the "
          f"reference only, {f['objects_only_embedded']} on the embedded one only")
    print(f"paths compared {f['paths_compared']}, matched {f['paths_matched']}, differences "
          f"{f['differences']}: " + ", ".join(f"{ignored.get(k, 0)} {k}" for k in (*KINDS, "unexplained")))
    print(f"ignore entries: {f['entries']}; explaining nothing in this run: {len(f['entries_unused'])}")
    if show_entries:
        per = Counter(d["entry"] for d in diff["differences"] if d["entry"])
        for entry, n in per.most_common():
            print(f"  {n:>6}  {entry}")


def candidates(diff: dict[str, Any]) -> list[dict[str, Any]]:
    """The unexplained differences as ignore entries: object names dropped, a list position named by
    the manifest (a container, a volume...) generalised to ``[*]``; one entry per kind and path."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for d in diff["differences"]:
        if d["entry"] is None:
            path = _NAMED_LISTS.sub(lambda m: f"{m.group(1)}[*]", d["path"])
            groups[(d["object"].split("/", 1)[0], path)].append(d)
    out = []
    for (kind, path), ds in sorted(groups.items()):
        sample = ds[0]
        out.append({"object": kind, "path": path, "kind": "TODO",
                    "reason": f"TODO ({len(ds)} difference(s) in {len({d['source'] for d in ds})} source(s); "
                              f"e.g. {sample['object']}: reference={sample['reference']!r} "
                              f"embedded={sample['embedded']!r})"})
    return out


def _entry_id(e: dict[str, Any]) -> str:
    """An entry's id as test_differential.py reports it (differential.Ignore.id)."""
    scope = "" if e.get("source", "*") == "*" else f"{e['source']} "
    name = "" if e.get("name", "*") == "*" else f"/{e['name']}"
    ref, emb = e.get("reference", "*"), e.get("embedded", "*")
    values = "" if (ref, emb) == ("*", "*") else f" ({ref} -> {emb})"
    return f"{scope}{e['object']}{name} {e['path']}{values}"


def update_differential(diff: dict[str, Any]) -> None:
    """Edit the ignore file as text, so that its comments and layout stay for the review: the entries
    that explained nothing go, the candidates are appended under a heading."""
    unused = set(diff["figures"]["entries_unused"])
    text = IGNORES.read_text()
    # one block per entry: from its "- " line up to the next entry, heading or blank line
    blocks = re.split(r"(?m)^(?=- |# --|\n)", text)
    kept, dropped = [], 0
    for block in blocks:
        parsed = yaml.safe_load(block) if block.startswith("- ") else None
        if parsed and _entry_id(parsed[0]) in unused:
            dropped += 1
            continue
        kept.append(block)
    new = candidates(diff)
    out = "".join(kept).rstrip("\n") + "\n"
    if new:
        out += ("\n# -- candidates written by bench/conformance_figures.py --update-differential: classify "
                "each --\n" + yaml.safe_dump(new, sort_keys=False, width=100, allow_unicode=True))
    IGNORES.write_text(out)
    print(f"{IGNORES.relative_to(REPO)}: {dropped} unused entries dropped, {len(new)} candidates added "
          "(kind/reason TODO: review each)")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--entries", action="store_true", help="also list each entry and its use")
    parser.add_argument("--update-differential", action="store_true",
                        help="write the unexplained differences into differential.yaml as candidates")
    args = parser.parse_args(argv)
    total = tests_table(_load("results.json"), args.entries)
    diff = _load("differential.json") if (REPORT / "differential.json").exists() else None
    if diff is not None:
        differential_table(diff, args.entries)
        gaps = total["embedded-gap"] + diff["figures"]["ignored_by_kind"].get("embedded-gap", 0)
        print(f"\nembedded gaps measured in this run: {total['embedded-gap']} test(s) allow-listed as "
              f"embedded-gap, {diff['figures']['ignored_by_kind'].get('embedded-gap', 0)} differential "
              f"path(s) ignored as embedded-gap ({gaps} in all)")
        if args.update_differential:
            update_differential(diff)
    return 1 if any(total[k] for k in ("failed", "error")) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
