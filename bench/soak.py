"""The seeded soak (issue 36): RolloutPolicies under every fault at once, invariants checked live.

Run: ``.venv/bin/python bench/soak.py [--seed 1] [--hours 24] [--policies 100] [--speed 300]``.
``reliability/soak.py`` says what runs and what is injected, ``reliability/soak_checks.py`` what is
checked. Prints a progress line every 30 s of wall time, then the count of each fault injected and
each invariant checked, every violation, and the wall time; exit 1 on any violation, 2 on bad input.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parents[1])]  # run as a script: `reliability` beside it

from reliability.soak import FAULTS, INVARIANTS, Soak, run_soak  # noqa: E402


def _positive(kind: Callable[[str], float]) -> Callable[[str], float]:
    def parse(text: str) -> float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be above 0, not {text}")
        return value
    return parse


def table(soak: Soak) -> str:
    lines = [f"{'fault injected':<28} {'count':>8}"]
    lines += [f"{k:<28} {soak.counts[k]:>8}" for k in FAULTS]
    lines += ["", f"{'invariant':<28} {'checks':>8} {'violated':>8}"]
    broken = [v.split(":", 1)[0] for v in soak.checker.violations]
    lines += [f"{k:<28} {soak.checker.checks[k]:>8} {broken.count(k):>8}" for k in INVARIANTS]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--hours", type=_positive(float), default=24.0, help="virtual hours of faults")
    ap.add_argument("--policies", type=_positive(int), default=100)
    ap.add_argument("--speed", type=_positive(float), default=300.0, help="virtual seconds per wall second")
    args = ap.parse_args(argv)
    soak = Soak(args.seed, args.hours, policies=args.policies, speed=args.speed,
                progress=lambda line: print(line, flush=True))
    t0 = time.monotonic()
    violations = run_soak(soak)
    print(table(soak))
    for v in soak.checker.violations:
        print(f"VIOLATION {v}")
    print(f"Lease holders: {soak.checker.transitions}; controller replicas started: {len(soak.procs)}; "
          f"requests held: {soak.counts['lease-delay-requests']} Lease, "
          f"{soak.counts['slow-answer-requests']} slow reads; scheduled faults fired up to {soak.lag:.0f} "
          "virtual s late")
    print(f"seed {args.seed}: {args.policies} policies, {args.hours:g} virtual hours at x{args.speed:g}: "
          f"{violations} violations ({time.monotonic() - t0:.0f} s wall)")
    return 1 if violations else 0


if __name__ == "__main__":
    sys.exit(main())
