"""The bad-input and secrets campaign (issue 9, "Bad input" and "Security"): thousands of generated
invalid catalogs and LWS/DS manifests through the real CLI, and planted secrets searched for in
everything lwsflow writes or prints. Prints one table of figures.

    .venv/bin/python reliability/bad_input_campaign.py [--catalogs 1000] [--manifests 1000]
        [--valid 50] [--seed 0] [--json FILE]

* invalid catalogs: each generated case (``reliability/strategies.py``: one field broken in a
  valid catalog) goes through ``plan``, ``plan --json``, ``render`` over an existing tree,
  ``render --check`` and ``render`` into a new folder. Refused means: exit 2, exactly one stderr
  line starting ``error:`` that names the broken field, no traceback, nothing on stdout, the
  existing tree unchanged (content and mtimes) and the new folder not created.
* invalid manifests: each case through ``validate``: exit 2, each stderr line but the summary an `error:` line
  for the file, one naming the broken field path, no traceback, the folder unchanged.
* valid catalogs: rendered twice (byte-identical trees) and accepted by ``validate``.
* secrets: canary values planted as every credential variable (HF_TOKEN, GIT_PASSWORD,
  REGISTRY_PASSWORD, ...) while each valid catalog is planned, rendered and validated; found = the
  number of times any canary appears in the rendered files or the commands' output (must be 0).

Exit code 0 when every invalid input was refused correctly, every valid one rendered
deterministically and no secret was found; 1 otherwise (the first few failures are listed).
"""

from __future__ import annotations

import argparse
import json
import secrets
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # run as a script: the `reliability` package beside it

from hypothesis import given, seed, settings  # noqa: E402

from reliability.cli_harness import (  # noqa: E402
    CATALOG_COMMANDS,
    catalog_command,
    refusal_problems,
    run_cli,
    snapshot,
    snapshot_changes,
    tree_bytes,
    validate_problems,
    write_yaml,
)
from reliability.strategies import (  # noqa: E402
    CAMPAIGN,
    EXAMPLES,
    Broken,
    invalid_catalogs,
    invalid_manifests,
    valid_catalogs,
)

CREDENTIAL_ENV = ("HF_TOKEN", "GIT_USERNAME", "GIT_PASSWORD", "REGISTRY_USERNAME", "REGISTRY_PASSWORD",
                  "LWSFLOW_API_TOKEN", "OPENAI_API_KEY")


class Tally:
    """Counts per category and the first failures, for the table and the exit code."""

    def __init__(self) -> None:
        self.tried: Counter[str] = Counter()
        self.ok: Counter[str] = Counter()
        self.failures: list[str] = []

    def record(self, category: str, problems: list[str], what: str) -> None:
        self.tried[category] += 1
        if problems:
            if len(self.failures) < 20:
                self.failures.append(f"{category}: {what}: {'; '.join(problems)}")
        else:
            self.ok[category] += 1


def run_catalogs(n: int, seed_value: int, work: Path, tally: Tally) -> None:
    tree = work / "overlays"
    assert run_cli(["render", EXAMPLES / "catalog.yaml", "--out", tree]).code == 0
    fresh = work / "never-created"
    fields: Counter[str] = Counter()

    @seed(seed_value)
    @settings(CAMPAIGN, max_examples=n, derandomize=False)
    @given(case=invalid_catalogs())
    def trial(case: Broken) -> None:
        catalog = write_yaml(work / "catalog.yaml", case.doc)
        fields[case.field] += 1
        for command in CATALOG_COMMANDS:
            before = snapshot(tree)
            res = run_cli(catalog_command(command, catalog, tree, fresh))
            problems = refusal_problems(res, case.field)
            if snapshot_changes(before, snapshot(tree)):
                problems.append("the existing tree changed")
            if fresh.exists():
                problems.append("the new output folder was created")
                shutil.rmtree(fresh)
            tally.record(f"catalog/{command}", problems, case.what)
        tally.tried["catalog documents"] += 1

    trial()
    tally.tried["catalog fields broken"] = len(fields)


def run_manifests(n: int, seed_value: int, work: Path, tally: Tally) -> None:
    folder = work / "manifests"

    @seed(seed_value)
    @settings(CAMPAIGN, max_examples=n, derandomize=False)
    @given(case=invalid_manifests())
    def trial(case: Broken) -> None:
        manifest = write_yaml(folder / "workload.yaml", case.doc)
        before = snapshot(folder)
        res = run_cli(["validate", "-q", manifest])
        problems = validate_problems(res, manifest, case.field)
        if snapshot_changes(before, snapshot(folder)):
            problems.append("the manifest folder changed")
        tally.record(f"manifest/{case.doc.get('kind')}", problems, case.what)

    trial()


def run_valid_and_secrets(n: int, seed_value: int, work: Path, tally: Tally, found: Counter[str]) -> None:
    @seed(seed_value)
    @settings(CAMPAIGN, max_examples=n, derandomize=False)
    @given(doc=valid_catalogs())
    def trial(doc: dict[str, Any]) -> None:
        base = work / "valid"
        shutil.rmtree(base, ignore_errors=True)
        catalog = write_yaml(base / "catalog.yaml", doc)
        canary = f"canary-{secrets.token_hex(12)}"
        env = dict.fromkeys(CREDENTIAL_ENV, canary)
        found["planted"] += len(CREDENTIAL_ENV)
        results = [run_cli(["plan", catalog, "--json"], env=env),
                   run_cli(["render", catalog, "--out", base / "a"], env=env),
                   run_cli(["render", catalog, "--out", base / "b"], env=env),
                   run_cli(["validate", "-q", base / "a"], env=env)]
        problems = [f"{r.code}: {r.err.strip()}" for r in results if r.code != 0]
        a, b = tree_bytes(base / "a"), tree_bytes(base / "b")
        if a != b:
            problems.append("two renders differ")
        hits = sum(t.count(canary.encode()) for t in a.values()) + sum(r.text.count(canary) for r in results)
        found["found"] += hits
        if hits:
            problems.append(f"canary found {hits} time(s)")
        tally.record("valid catalog", problems, "generated valid catalog")

    trial()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--catalogs", type=int, default=1000, help="invalid catalogs (x5 commands)")
    ap.add_argument("--manifests", type=int, default=1000, help="invalid LWS/DS manifests")
    ap.add_argument("--valid", type=int, default=50, help="valid catalogs (determinism, canaries)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", type=Path, help="also write the figures here")
    args = ap.parse_args(argv)
    tally, secrets_found = Tally(), Counter[str]()
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="lwsflow-bad-input-") as tmp:
        work = Path(tmp)
        run_catalogs(args.catalogs, args.seed, work, tally)
        run_manifests(args.manifests, args.seed + 1, work, tally)
        run_valid_and_secrets(args.valid, args.seed + 2, work, tally, secrets_found)
    wall = time.perf_counter() - started

    invalid_docs = tally.tried["catalog documents"] + sum(v for k, v in tally.tried.items()
                                                          if k.startswith("manifest/"))
    refusals = sum(v for k, v in tally.tried.items() if k.startswith(("catalog/", "manifest/")))
    refused_ok = sum(v for k, v in tally.ok.items() if k.startswith(("catalog/", "manifest/")))
    print(f"bad-input campaign (seed {args.seed}, {wall:.0f} s wall)")
    print(f"  {'category':28} {'tried':>7} {'refused/ok':>10}")
    for key in sorted(k for k in tally.tried if "/" in k or k == "valid catalog"):
        print(f"  {key:28} {tally.tried[key]:>7} {tally.ok[key]:>10}")
    n_catalogs = tally.tried["catalog documents"]
    print(f"  invalid documents generated: {invalid_docs} ({n_catalogs} catalogs, "
          f"{tally.tried['catalog fields broken']} distinct field names or unknown keys broken; "
          f"{invalid_docs - n_catalogs} manifests)")
    print(f"  invalid inputs tried through the CLI: {refusals}, refused correctly: {refused_ok}")
    print(f"  secrets planted: {secrets_found['planted']}, found in output: {secrets_found['found']}")
    for failure in tally.failures:
        print(f"  FAIL {failure}")
    figures = {"seed": args.seed, "wall_s": round(wall, 1), "invalid_documents": invalid_docs,
               "invalid_inputs_tried": refusals, "invalid_inputs_refused": refused_ok,
               "by_category": {k: {"tried": tally.tried[k], "ok": tally.ok[k]} for k in sorted(tally.tried)},
               "secrets_planted": secrets_found["planted"], "secrets_found": secrets_found["found"],
               "failures": tally.failures}
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    good = refused_ok == refusals and tally.ok["valid catalog"] == tally.tried["valid catalog"]
    return 0 if good and secrets_found["found"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
