"""Figures of the conformance tier for the note: behaviours compared, matched, and allow-listed by kind.

Run: ``.venv/bin/python bench/conformance_figures.py [--entries]``. Needs no cluster: it collects the
conformance tests (``pytest --collect-only`` with ``LWSFLOW_CONFORMANCE=1``; each test id is one
behaviour compared on both clusters) and reads ``tests/conformance/allowlist.yaml``. A behaviour is
*allow-listed* when an entry applies to it, else *matched* (its test asserts equality). An entry
``<group>/<param>[/...]`` applies to the tests of its group's check whose parameter matches
``<param>`` (fnmatch; an unparametrised check: all its tests); ``invalid/<case>`` entries name the
held-invalid case itself.

Kinds: an entry's ``kind`` field, else inferred from its reason: ``embedded-gap`` ("EMBEDDED GAP" or
"EMBEDDED BUG": the embedded cluster's to fix), ``version`` (mentions v0.9.0 / v0.10 or the
reference CRDs: the reference cluster runs LWS v0.9.0 against v0.10+ semantics), else
``modelled-out`` (not modelled on purpose: TPUs, controller timing, the scheduler's queue).
A behaviour under entries of several kinds counts once, under the first of embedded-gap, version,
modelled-out.
"""

from __future__ import annotations

import argparse
import fnmatch
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
ALLOWLIST = REPO / "tests" / "conformance" / "allowlist.yaml"
KINDS = ("embedded-gap", "version", "modelled-out")
# allow-list group -> the test function (module::name prefix) whose ids it speaks about
GROUPS = {
    "invalid": "test_admission.py::test_held_invalid_refused_naming_the_same_field",
    "examples": "test_examples.py::",
    "rolling": "test_rolling.py::",
    "behaviours": "test_behaviours.py::",
    "exclusive": "test_exclusive.py::",
    "ds": "test_disaggregated.py::",
    "scheduling": "test_scheduling.py::",
    "rollout": "test_rollout_ds.py::",  # none today (rollout/ds-gate went when the gate read the children)
}
# which check of issue #15 each test module is
CHECKS = {"test_examples": 1, "test_rolling": 2, "test_behaviours": 3, "test_exclusive": 3,
          "test_disaggregated": 3, "test_rollout": 4, "test_admission": 5, "test_scheduling": 6}


def collect() -> list[str]:
    """Conformance test ids, ``module.py::function[param]``."""
    env = {**os.environ, "LWSFLOW_CONFORMANCE": "1"}
    cmd = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
           "tests/conformance"]
    out = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, check=False)
    ids = [line.split("tests/conformance/", 1)[1] for line in out.stdout.splitlines()
           if line.startswith("tests/conformance/")]
    if out.returncode != 0 or not ids:
        tail = f"{out.stdout[-2000:]}\n{out.stderr[-2000:]}"
        raise SystemExit(f"collecting the conformance tests failed:\n{tail}")
    return ids


def kind_of(entry: dict[str, object]) -> str:
    if entry.get("kind"):
        kind = str(entry["kind"])
        if kind not in KINDS:
            raise SystemExit(f"{ALLOWLIST}: entry {entry.get('id')}: kind {kind!r} is not one of {KINDS}")
        return kind
    reason = str(entry.get("reason", ""))
    if "EMBEDDED GAP" in reason or "EMBEDDED BUG" in reason:
        return "embedded-gap"
    if re.search(r"v0\.9\.0|v0\.10|reference CRDs", reason):
        return "version"
    return "modelled-out"


def applies(entry_id: str, test_id: str) -> bool:
    group, _, rest = entry_id.partition("/")
    prefix = GROUPS.get(group)
    if prefix is None or not test_id.startswith(prefix):
        return False
    param = test_id.partition("[")[2].rstrip("]")
    if group == "invalid":
        return fnmatch.fnmatchcase(param, entry_id)
    return not param or fnmatch.fnmatchcase(param, rest.split("/", 1)[0])


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--entries", action="store_true", help="also list each allow-list entry")
    args = parser.parse_args(argv)
    tests = collect()
    entries = yaml.safe_load(ALLOWLIST.read_text()) or []
    kinds = {str(e["id"]): kind_of(e) for e in entries}
    per_test: dict[str, set[str]] = {t: {k for e, k in kinds.items() if applies(e, t)} for t in tests}
    unused = [e for e in kinds if not any(applies(e, t) for t in tests)]

    def bucket(t: str) -> str:
        return next((k for k in KINDS if k in per_test[t]), "matched")

    by_check: dict[int, Counter[str]] = {}
    for t in tests:
        module = t.split(".py::", 1)[0]
        check = CHECKS.get(module, 4 if module.startswith("test_rollout") else 0)  # check 4's files
        by_check.setdefault(check, Counter())[bucket(t)] += 1
    total = Counter(bucket(t) for t in tests)
    cols = ("matched", *KINDS)
    print(f"{'check':<8}{'compared':>9}" + "".join(f"{c:>14}" for c in cols))
    for check in sorted(by_check):
        c = by_check[check]
        print(f"{check or '?':<8}{sum(c.values()):>9}" + "".join(f"{c[k]:>14}" for k in cols))
    print(f"{'all':<8}{len(tests):>9}" + "".join(f"{total[k]:>14}" for k in cols))
    entry_kinds = Counter(kinds.values())
    print(f"allow-list entries: {len(kinds)} ({', '.join(f'{entry_kinds[k]} {k}' for k in KINDS)})")
    if args.entries:
        for e, k in kinds.items():
            n = sum(applies(e, t) for t in tests)
            print(f"  {k:<13} {n:>3} behaviour(s)  {e}")
    if unused:
        print(f"entries that apply to no collected test: {', '.join(unused)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
