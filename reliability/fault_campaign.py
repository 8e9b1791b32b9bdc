"""The fault campaign (issue 9, "Faults the rollout must survive"): many seeded trials per fault type,
each judged by the same invariants as the fast tests in ``tests/reliability/test_faults_*.py``, and
one table of figures: trials run and survived per fault type.

    .venv/bin/python reliability/fault_campaign.py [--kill-trials 50] [--api-trials 10]
        [--cluster-trials 5] [--gitops-trials 3] [--smoke-trials 3] [--seed 1000]
        [--only kill-succeed,api-errors,...] [--json FILE]

Fault types: ``api-errors`` (500/503/429 with Retry-After, 409 on writes, watch cuts, 410 on resume),
``kill-succeed`` / ``kill-rollback`` (`lwsflow rollout` SIGKILLed at random moments and restarted;
``kill-gitops`` / ``kill-gitops-rollback``: the release applied by GitOps, no ``--manifest``;
``kill-pair``: a P/D pair, decode first; ``kill-under-api-errors``: the same while the API is flaky),
``pod-crash``, ``node-lost``, ``never-ready``, ``foreign-change`` (cluster faults mid-stage),
``gitops-cli-kill-at-commit|push``, ``gitops-step-kill-at-commit|push``, ``gitops-race``,
``smoke-hang|reset|garbage|half-stream`` (an endpoint in that mode) and ``smoke-gate-<mode>`` (the
new pods of a rollout in that mode, caught by the smoke stage hook, rolled back).
Exit code 0 when every trial survived, 1 otherwise. Everything talks HTTPS to an embedded cluster on
127.0.0.1 (realtime, high speed) or to local git.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # run as a script: the `reliability` package beside it

from lwsflow.sim.apiserver import ApiFaults  # noqa: E402
from reliability.fault_gitops import race_trial, seam_trial_cli, seam_trial_step  # noqa: E402
from reliability.fault_helpers import Trial, served  # noqa: E402
from reliability.fault_smoke import EXPECTED_FAILS, smoke_gate_trial, smoke_trial  # noqa: E402
from reliability.fault_trials import api_fault_trial, cluster_fault_trial, kill_pair_trial, kill_trial  # noqa: E402

CLUSTER_KINDS = ("pod-crash", "node-lost", "never-ready", "foreign-change")
SEAMS = ("commit", "push")


def _api(n: int, seed: int, tmp: Path) -> Iterator[Trial]:
    faults = ApiFaults(seed=seed, error_rate=0.15, error_statuses=(500, 503, 429), retry_after_s=1,
                       conflict_rate=0.35, watch_cut_mean_s=0.05, gone_on_resume_rate=0.4)
    with served(tmp, faults=faults) as env:
        for i in range(n):
            yield api_fault_trial(env, seed + i)


KILL_FAULTS = {"error_rate": 0.05, "retry_after_s": 0, "conflict_rate": 0.1, "watch_cut_mean_s": 0.1,
               "gone_on_resume_rate": 0.3}


def _kill(n: int, seed: int, tmp: Path, scenario: str, *, flaky: bool = False) -> Iterator[Trial]:
    with served(tmp, faults=ApiFaults(seed=seed, **KILL_FAULTS) if flaky else None) as env:  # type: ignore[arg-type]
        for i in range(n):
            trial = kill_trial(env, tmp, seed + i, scenario)
            trial.kind += "-under-api-errors" if flaky else ""
            yield trial


def _kill_pair(n: int, seed: int, tmp: Path) -> Iterator[Trial]:
    with served(tmp) as env:
        for i in range(n):
            yield kill_pair_trial(env, tmp, seed + i)


def _cluster(n: int, seed: int, tmp: Path, kind: str) -> Iterator[Trial]:
    with served(tmp) as env:
        for i in range(n):
            yield cluster_fault_trial(env, kind, seed + i)


def _smoke_gate(n: int, seed: int, tmp: Path, mode: str) -> Iterator[Trial]:
    with served(tmp, engines=True) as env:
        for i in range(n):
            yield smoke_gate_trial(env, mode, seed + i)


def _fresh(n: int, tmp: Path, run: Callable[[Path, int], Trial]) -> Iterator[Trial]:
    for i in range(n):
        d = tmp / f"t{i}"
        d.mkdir()
        yield run(d, i)


def plan(args: argparse.Namespace) -> dict[str, tuple[int, Callable[[Path], Iterator[Trial]]]]:
    """Fault type -> (trials, a generator of judged trials in a scratch folder)."""
    s = args.seed
    out: dict[str, tuple[int, Callable[[Path], Iterator[Trial]]]] = {
        "api-errors": (args.api_trials, lambda t: _api(args.api_trials, s, t)),
        "kill-succeed": (args.kill_trials, lambda t: _kill(args.kill_trials, s, t, "succeed")),
        "kill-rollback": (args.kill_trials, lambda t: _kill(args.kill_trials, s, t, "rollback")),
        "kill-gitops": (args.kill_trials, lambda t: _kill(args.kill_trials, s, t, "gitops")),
        "kill-gitops-rollback": (args.kill_trials, lambda t: _kill(args.kill_trials, s, t,
                                                                   "gitops-rollback")),
        "kill-pair": (args.kill_trials, lambda t: _kill_pair(args.kill_trials, s, t)),
        "kill-under-api-errors": (args.kill_trials, lambda t: _kill(args.kill_trials, s, t, "succeed",
                                                                    flaky=True)),
    }
    for kind in CLUSTER_KINDS:
        out[kind] = (args.cluster_trials, lambda t, k=kind: _cluster(args.cluster_trials, s, t, k))
    for seam in SEAMS:
        out[f"gitops-cli-kill-at-{seam}"] = (args.gitops_trials, lambda t, m=seam: _fresh(
            args.gitops_trials, t, lambda d, _i: seam_trial_cli(d, m)))
        out[f"gitops-step-kill-at-{seam}"] = (args.gitops_trials, lambda t, m=seam: _fresh(
            args.gitops_trials, t, lambda d, _i: seam_trial_step(d, m)))
    out["gitops-race"] = (args.gitops_trials, lambda t: _fresh(
        args.gitops_trials, t, lambda d, i: race_trial(d, s + i, racers=6)))
    for mode in sorted(EXPECTED_FAILS):
        timeouts = [0.2 + 0.2 * (i % 3) for i in range(args.smoke_trials)]
        out[f"smoke-{mode}"] = (args.smoke_trials, lambda _t, m=mode, ts=timeouts: (
            smoke_trial(m, x) for x in ts))
        out[f"smoke-gate-{mode}"] = (args.smoke_trials, lambda t, m=mode: _smoke_gate(
            args.smoke_trials, s, t, m))
    if args.only:
        wanted = set(args.only.split(","))
        unknown = wanted - set(out)
        if unknown:
            raise SystemExit(f"error: --only: unknown fault type(s) {', '.join(sorted(unknown))} "
                             f"(known: {', '.join(out)})")
        out = {k: v for k, v in out.items() if k in wanted}
    return out


def _note(trials: list[Trial]) -> str:
    """A short per-type figure besides the counts: faults injected, kills and where they landed."""
    injected: Counter[int] = Counter()
    requests: Counter[str] = Counter()
    landed: Counter[str] = Counter()
    kills = exhausted = 0
    for t in trials:
        injected.update(t.detail.get("injected") or {})  # type: ignore[arg-type]
        requests.update(t.detail.get("requests") or {})  # type: ignore[arg-type]
        kills += int(t.detail.get("kills") or 0)  # type: ignore[call-overload]
        exhausted += int(t.detail.get("lost_every_race_then_rerun") or 0)  # type: ignore[call-overload]
        for where in t.detail.get("landed") or ():  # type: ignore[attr-defined]
            phase, passed, _ = str(where).split("/")
            landed[f"{phase}@{passed.split('=')[1]}"] += 1
    parts = []
    if injected:
        parts.append(f"{sum(requests.values())} requests ({requests['watch']} watch streams opened), "
                     "injected " + " ".join(f"{k}:{v}" for k, v in sorted(injected.items())))
    if kills:
        parts.append(f"{kills} SIGKILLs, landed " + " ".join(f"{k}:{v}" for k, v in sorted(landed.items())))
    if exhausted:
        parts.append(f"{exhausted} racer(s) lost every push race, published on rerun")
    slow = [float(t.detail["slowest_check_s"]) for t in trials if "slowest_check_s" in t.detail]  # type: ignore[arg-type]
    if slow:
        parts.append(f"slowest failed check {max(slow):.2f}s")
    return "; ".join(parts)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kill-trials", type=int, default=50, help="per kill scenario (succeed, rollback)")
    ap.add_argument("--api-trials", type=int, default=10)
    ap.add_argument("--cluster-trials", type=int, default=5, help="per cluster fault kind")
    ap.add_argument("--gitops-trials", type=int, default=3, help="per GitOps fault type")
    ap.add_argument("--smoke-trials", type=int, default=3, help="per engine failure mode")
    ap.add_argument("--seed", type=int, default=1000)
    ap.add_argument("--only", default="", help="comma-separated fault types")
    ap.add_argument("--json", type=Path, default=None, help="also write every trial here")
    args = ap.parse_args(argv)
    # in-process rollouts log best-effort event writes refused by injected 409s: expected, not news
    logging.getLogger("lwsflow").setLevel(logging.ERROR)
    rows: list[tuple[str, int, int, float, str]] = []
    failures: list[Trial] = []
    everything: list[dict[str, object]] = []
    t_all = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="lwsflow-faults-") as tmp:
        for kind, (n, trials) in plan(args).items():
            if n <= 0:
                continue
            t0 = time.monotonic()
            done: list[Trial] = []
            scratch = Path(tmp) / kind
            scratch.mkdir()
            for trial in trials(scratch):
                done.append(trial)
                failures += [trial] if not trial.survived else []
                everything.append({"type": kind, "name": trial.name, "result": trial.result,
                                   "problems": trial.problems, "detail": trial.detail,
                                   "seconds": round(trial.seconds, 2)})
            survived = sum(t.survived for t in done)
            rows.append((kind, len(done), survived, time.monotonic() - t0, _note(done)))
            print(f"{kind:<28} {survived:>4}/{len(done):<4} survived  ({rows[-1][3]:.0f}s)", flush=True)
    print()
    print(f"{'fault type':<28} {'trials':>6} {'survived':>8}  notes")
    for kind, n, ok, _secs, note in rows:
        print(f"{kind:<28} {n:>6} {ok:>8}  {note}")
    total, ok = sum(r[1] for r in rows), sum(r[2] for r in rows)
    print(f"{'total':<28} {total:>6} {ok:>8}  ({time.monotonic() - t_all:.0f}s wall)")
    for t in failures:
        print(f"FAILED {t.kind} {t.name}: {t.result}: {'; '.join(t.problems)}")
    if args.json:
        args.json.write_text(json.dumps(everything, indent=2, default=str))
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())
