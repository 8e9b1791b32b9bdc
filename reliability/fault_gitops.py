"""GitOps fault trials with real git: promotions SIGKILLed at the seams (after the overlay is written
but before the commit; after the commit but before the push) and promotions racing against one bare
remote. A ``git`` shim early on PATH kills the process that runs it at the chosen git sub-command,
which is exactly a crash at that seam (nothing after it runs, no cleanup)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

from lwsflow.controller.errors import OperationFailed
from reliability.fault_helpers import Trial

REPO = Path(__file__).resolve().parents[1]
CATALOG = REPO / "examples" / "catalog.yaml"
LWSFLOW = str(Path(sys.executable).parent / "lwsflow")
MODELS = ("llama-8b", "llama-70b", "qwen-7b")  # one serving image each: set-image applies
ENVS = ("dev", "staging", "prod")
DIGEST_DEV = "sha256:" + "d" * 64


def digest(n: int) -> str:
    return f"sha256:{n:064x}"


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True,
                          timeout=60).stdout.strip()


def clone(remote: Path, dest: Path) -> Path:
    subprocess.run(["git", "clone", "-q", str(remote), str(dest)], check=True, timeout=60)
    git(dest, "config", "user.name", "Fault Campaign")
    git(dest, "config", "user.email", "faults@lwsflow.invalid")
    return dest


def make_remote(tmp: Path) -> Path:
    """A bare remote holding the example catalog's rendered tree, with a new digest pinned in dev
    (so promoting dev -> staging is a real change)."""
    seed = tmp / "seed"
    seed.mkdir(parents=True)
    git(seed, "init", "-q", "-b", "main")
    git(seed, "config", "user.name", "Fault Campaign")
    git(seed, "config", "user.email", "faults@lwsflow.invalid")
    subprocess.run([LWSFLOW, "render", str(CATALOG), "--out", str(seed / "overlays")], check=True,
                   capture_output=True, timeout=60)
    git(seed, "add", "-A")
    git(seed, "commit", "-q", "-m", "render")
    remote = tmp / "remote.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(seed), str(remote)], check=True, timeout=60)
    from lwsflow.components.gitops import set_image

    set_image("llama-8b", "dev", DIGEST_DEV, repo=clone(remote, tmp / "setup"), push=True)
    return remote


def shim_path(tmp: Path, kill_at: str) -> str:
    """A PATH whose ``git`` SIGKILLs its caller when asked to run ``kill_at`` (e.g. commit, push)."""
    real = shutil.which("git")
    assert real, "git is not installed"
    d = tmp / f"shim-{kill_at}"
    d.mkdir(parents=True, exist_ok=True)
    (d / "git").write_text(f"""#!/bin/sh
for a in "$@"; do
  if [ "$a" = "{kill_at}" ]; then kill -9 $PPID; exit 137; fi
done
exec {real} "$@"
""")
    (d / "git").chmod(0o755)
    return f"{d}{os.pathsep}{os.environ['PATH']}"


def _run(cmd: list[str], tmp: Path, kill_at: str = "") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TMPDIR": str(tmp)}  # a killed step leaves its scratch clone here, not in /tmp
    if kill_at:
        env["PATH"] = shim_path(tmp, kill_at)
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env, check=False)


def _overlay(repo: Path, env: str, model: str) -> str:
    return (repo / "overlays" / env / model / "kustomization.yaml").read_text()


def _remote_file(remote: Path, env: str, model: str) -> str:
    return git(remote, "show", f"main:overlays/{env}/{model}/kustomization.yaml")


def _promotions(remote: Path, model: str, target: str) -> int:
    log = git(remote, "log", "--format=%s", "main")
    return sum(1 for s in log.splitlines() if s.startswith(f"promote {model} ") and s.endswith(target))


def seam_trial_cli(tmp: Path, seam: str) -> Trial:
    """`lwsflow promote --push` in a work tree, killed at ``seam`` ("commit" or "push"), then rerun."""
    t0 = time.monotonic()
    trial = Trial(f"gitops-cli-kill-at-{seam}", seam)
    remote = make_remote(tmp)
    work = clone(remote, tmp / "work")
    before_head, before_remote = git(work, "rev-parse", "HEAD"), git(remote, "rev-parse", "main")
    original = _overlay(work, "staging", "llama-8b")
    cmd = [LWSFLOW, "promote", "llama-8b", "--from", "dev", "--to", "staging", "--repo", str(work), "--push"]
    first = _run(cmd, tmp, kill_at=seam)
    p = trial.problems
    if first.returncode != -9:
        p.append(f"the promotion was not killed at {seam}: exit {first.returncode} {first.stderr!r}")
    if (work / ".git" / "index.lock").exists():
        p.append("a stale .git/index.lock was left behind")
    if git(remote, "rev-parse", "main") != before_remote:
        p.append("the remote moved although the push never ran")
    text = _overlay(work, "staging", "llama-8b")
    if text != original and DIGEST_DEV not in text:  # whole old file or whole new file, nothing torn
        p.append("the overlay file is neither the old nor the new version")
    dirty = git(work, "status", "--porcelain").splitlines()
    if seam == "commit":
        if git(work, "rev-parse", "HEAD") != before_head:
            p.append("a commit was made although the process died before committing")
        rerun = _run(cmd, tmp)
        # the half-done promotion is refused (one line naming the change), never committed blindly ...
        if rerun.returncode != 2 or "uncommitted changes" not in rerun.stderr or \
                len(rerun.stderr.strip().splitlines()) != 1:
            p.append(f"rerun on the interrupted tree: exit {rerun.returncode} {rerun.stderr!r}")
        # ... and after discarding it (what `git status` tells the operator) the rerun completes it
        git(work, "reset", "-q", "--hard", "HEAD")
    elif dirty:
        p.append(f"the work tree is dirty after a kill at push: {dirty}")
    final = _run(cmd, tmp)
    trial.result = "completed" if final.returncode == 0 else f"exit {final.returncode}"
    if final.returncode != 0:
        p.append(f"the rerun failed: {final.stderr.strip()!r}")
    if DIGEST_DEV not in _remote_file(remote, "staging", "llama-8b"):
        p.append("the rerun did not publish the promotion to the remote")
    if _promotions(remote, "llama-8b", "staging") != 1:
        p.append(f"{_promotions(remote, 'llama-8b', 'staging')} promotion commits on the remote, expected 1")
    trial.seconds = time.monotonic() - t0
    return trial


STEP = ("import sys; from lwsflow.components.steps import promote; "
        "print(promote(sys.argv[1], 'llama-8b', 'staging', source='dev').commit)")


def seam_trial_step(tmp: Path, seam: str) -> Trial:
    """The pipeline step (fresh clone, promote, push) killed at ``seam``; rerunning the step completes."""
    t0 = time.monotonic()
    trial = Trial(f"gitops-step-kill-at-{seam}", seam)
    remote = make_remote(tmp)
    before = git(remote, "rev-parse", "main")
    cmd = [sys.executable, "-c", STEP, str(remote)]
    first = _run(cmd, tmp, kill_at=seam)
    p = trial.problems
    if first.returncode != -9:
        p.append(f"the step was not killed at {seam}: exit {first.returncode} {first.stderr[-300:]!r}")
    if git(remote, "rev-parse", "main") != before:
        p.append("the remote moved although the step died before pushing")
    git(remote, "fsck", "--no-progress")
    again = _run(cmd, tmp)
    trial.result = "completed" if again.returncode == 0 else f"exit {again.returncode}"
    if again.returncode != 0:
        p.append(f"the rerun failed: {again.stderr.strip()[-300:]!r}")
    elif again.stdout.strip().splitlines()[-1] != git(remote, "rev-parse", "main"):
        p.append("the step's reported commit is not the remote's main")
    if DIGEST_DEV not in _remote_file(remote, "staging", "llama-8b"):
        p.append("the rerun did not publish the promotion")
    if _promotions(remote, "llama-8b", "staging") != 1:
        p.append(f"{_promotions(remote, 'llama-8b', 'staging')} promotion commits, expected 1")
    trial.seconds = time.monotonic() - t0
    return trial


def race_trial(tmp: Path, seed: int, racers: int = 6) -> Trial:
    """``racers`` set-image --push to distinct overlays from separate clones at the same instant, plus
    two racing for the same overlay: every one lands or fails loudly, a failed one lands on rerun,
    the remote ends with every distinct pin, and nothing was ever forced."""
    from lwsflow.components.gitops import set_image

    t0 = time.monotonic()
    trial = Trial("gitops-race", f"race{seed}")
    remote = make_remote(tmp)
    base = git(remote, "rev-parse", "main")
    jobs = [(ENVS[i % 3], MODELS[(i // 3 + seed) % 3], digest(seed * 100 + i)) for i in range(racers)]
    jobs = list(dict.fromkeys(jobs))  # distinct overlays
    same = ("prod", MODELS[(seed + 2) % 3])  # not among the distinct jobs
    duel = [(same[0], same[1], digest(seed * 100 + 90 + k)) for k in range(2)]
    clones = [clone(remote, tmp / f"c{i}") for i in range(len(jobs) + len(duel))]
    errors: dict[int, Exception] = {}
    gate = threading.Barrier(len(clones))

    def go(i: int, job: tuple[str, str, str]) -> None:
        gate.wait(10)
        try:
            set_image(job[1], job[0], job[2], repo=clones[i], push=True)
        except OperationFailed as exc:
            errors[i] = exc
    threads = [threading.Thread(target=go, args=(i, j)) for i, j in enumerate(jobs + duel)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    p = trial.problems
    exhausted = [i for i, e in errors.items() if "still rejected" in str(e)]
    conflicts = [i for i, e in errors.items() if "still rejected" not in str(e)]
    everyone = jobs + duel
    for i in sorted(exhausted):  # lost every push race: a rerun from the same clone publishes it
        try:
            set_image(everyone[i][1], everyone[i][0], everyone[i][2], repo=clones[i], push=True)
        except OperationFailed as exc:
            conflicts.append(i)
            trial.detail["rerun_error"] = str(exc)[:80]
    for env, model, d in jobs:
        if d not in _remote_file(remote, env, model):
            p.append(f"{env}/{model}: the pin {d[:15]}... was lost")
    if any(i < len(jobs) for i in conflicts):
        p.append("a promotion to a distinct overlay failed to rebase")
    winner = _remote_file(remote, *same)
    landed = [d for _e, _m, d in duel if d in winner]
    if len(landed) != 1:
        p.append(f"same-overlay race: {len(landed)} pins on the remote, expected exactly one")
    if len(conflicts) != 1:
        p.append(f"same-overlay race: {len(conflicts)} rebase conflicts reported, expected exactly one")
    history = git(remote, "rev-list", "--first-parent", f"{base}..main").splitlines()
    if len(history) != len(jobs) + 1:
        p.append(f"{len(history)} commits on the remote, expected {len(jobs) + 1} (forced or lost?)")
    trial.detail.update(racers=len(jobs) + len(duel), lost_every_race_then_rerun=len(exhausted),
                        errors=sorted({str(e)[:80] for e in errors.values()}))
    trial.result = "consistent" if not p else "lost"
    trial.seconds = time.monotonic() - t0
    return trial
