"""The leader-kill campaign (issue 16): SIGKILL the leading `lwsflow controller run --leader-elect`
process at seeded moments of a staged rollout and check that the standby takes over and resumes it.

    .venv/bin/python reliability/leader_kill_campaign.py [--trials 4] [--kills 5] [--seed 0]
        [--lease 3] [--json FILE]

Each trial: an embedded cluster (virtual time, 200x), an LWS of 4 groups under a RolloutPolicy
(stages 1 and 50% with a 10-minute bake each, then a manual gate before 100%), two controller
processes on one Lease. After the template is synced, the current leader is killed ``--kills`` times
at seeded moments, the last one while it waits at the manual gate. Each killed replica is replaced
by a fresh standby, as its Deployment would, and the next kill waits until that standby runs (else
it would measure two replicas down at once, a cold start).
Checked per trial: every kill is followed by a new holder within lease + 2 retry periods; the
rollout is the same one throughout (one id, no abort); it stops at the manual gate with the partition
of stage 2 until promoted; the partition sequence is exactly 4, 3, 2, 0, 4 (no stage skipped, no
gate skipped); it ends Succeeded. Prints the figures; exit 1 on any violation.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO)]  # run as a script: the `reliability` package beside it

from lwsflow.cli import kubectl_plugin  # noqa: E402
from lwsflow.controller.kube.resources import LEASE, LWS, ROLLOUT_POLICY  # noqa: E402
from lwsflow.controller.rollout import gate, state  # noqa: E402
from reliability.incluster_env import policy, sync, wait_policy  # noqa: E402
from reliability.rollout_env import NS, Env, lws_manifest, make_env  # noqa: E402

BIN = REPO / ".venv" / "bin" / "lwsflow"


def _holder(env: Env) -> str:
    try:
        return str(env.kube.get(LEASE, NS, "lwsflow-controller")["spec"].get("holderIdentity") or "")
    except Exception:
        return ""


def _until(pred: Any, timeout: float) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.05)
    return False


def controller_command(kubeconfig: Path, lease_s: float, resync: str = "1s") -> list[str]:
    """One `lwsflow controller run --leader-elect` replica on the embedded cluster's clock."""
    return [str(BIN), "controller", "run", "-n", NS, "--leader-elect", "--lease-namespace", NS,
            "--lease-duration", f"{lease_s:g}s", "--metrics-addr", "127.0.0.1:0", "--health-addr",
            "127.0.0.1:0", "--kubeconfig", str(kubeconfig), "--resync", resync, "--cluster-clock"]


def trial(seed: int, kills: int, lease_s: float, tmp: Path) -> dict[str, Any]:
    rng = random.Random(seed)
    env = make_env(tmp)
    procs: dict[int, subprocess.Popen[bytes]] = {}
    cmd = controller_command(env.kubeconfig, lease_s)

    logs: list[Path] = []

    def spawn() -> None:
        logs.append(tmp / f"controller-{len(logs)}.log")
        with logs[-1].open("wb") as fh:
            p = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT)
        procs[p.pid] = p

    def standby_up() -> bool:
        """The newest replica printed its start line and had a retry period to read the Lease: a
        kill before that measures a cold start (two replicas down at once), not a takeover."""
        if not _until(lambda: logs[-1].stat().st_size > 0, 60):
            return False
        time.sleep(2 * lease_s / 5)
        return True

    out: dict[str, Any] = {"seed": seed, "takeovers": [], "violations": []}
    try:
        env.create_ready(lws_manifest("m", replicas=4, partition=4))
        env.kube.create(ROLLOUT_POLICY, NS, policy("p", "m", [
            {"groups": 1, "bake": "10m"}, {"groups": "50%", "bake": "10m"}, {"groups": "100%", "pause": {}}]))
        spawn()
        spawn()
        wait_policy(env, "p", lambda s: bool(s.get("stableRevision")), timeout=60)
        sync(env, "m", "vllm:2")
        rid = wait_policy(env, "p", lambda s: bool(s.get("rolloutId")) and s.get("phase") == "Progressing",
                          timeout=60)["status"]["rolloutId"]
        for i in range(kills):
            if not standby_up():
                out["violations"].append("standby did not start")
                break
            if i == kills - 1:  # the last kill while the rollout waits at the manual gate
                wait_policy(env, "p", lambda s: s.get("phase") == "WaitingForPromotion", timeout=120)
            time.sleep(rng.uniform(0.0, 2.5))
            if not _until(lambda: _holder(env), 4 * lease_s):
                out["violations"].append("no leader")
                break
            leader = _holder(env)
            pid = int(leader.split("-")[-2])
            procs[pid].send_signal(signal.SIGKILL)
            procs[pid].wait(10)
            killed = time.monotonic()
            phase = (env.kube.get(ROLLOUT_POLICY, NS, "p").get("status") or {}).get("phase")
            spawn()  # the Deployment replaces the killed pod
            if not _until(lambda leader=leader: _holder(env) not in ("", leader), 6 * lease_s):
                out["violations"].append("no takeover")
                break
            out["takeovers"].append({"seconds": round(time.monotonic() - killed, 3), "phase": phase})
            if out["takeovers"][-1]["seconds"] > lease_s + 2 * lease_s / 5 + 0.5:
                out["violations"].append(f"slow takeover {out['takeovers'][-1]['seconds']}s")
        standby_up()
        time.sleep(2 * lease_s)  # the new leader has reconciled: the gate must still hold
        st = wait_policy(env, "p", lambda s: s.get("phase") == "WaitingForPromotion", timeout=120)["status"]
        lws = env.kube.get(LWS, NS, "m")
        if st["rolloutId"] != rid:
            out["violations"].append(f"rollout restarted: {rid} -> {st['rolloutId']}")
        if gate.partition(lws) != 2 or state.RolloutState.from_object(lws).passed != 2:
            out["violations"].append(f"at the gate with partition {gate.partition(lws)}")
        kc = str(env.kubeconfig)
        if kubectl_plugin.main(["promote", "p", "-n", NS, "--kubeconfig", kc]) != 0:
            out["violations"].append("promote refused")
        final = ("Succeeded", "RolledBack", "Failed", "Aborted")
        st = wait_policy(env, "p", lambda s: s.get("phase") in final, timeout=120)["status"]
        if st["phase"] != "Succeeded" or [h["outcome"] for h in st["history"]] != ["Succeeded"]:
            out["violations"].append(f"ended {st['phase']}: {st.get('message')}")
        if env.rec.partitions["m"] != [4, 3, 2, 0, 4]:
            out["violations"].append(f"partitions {env.rec.partitions['m']}")
        out["partitions"] = env.rec.partitions["m"]
    finally:
        for p in procs.values():
            if p.poll() is None:
                os.kill(p.pid, signal.SIGTERM)
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()
        env.close()
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=4)
    ap.add_argument("--kills", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--lease", type=float, default=3.0)
    ap.add_argument("--json", default="")
    args = ap.parse_args(argv)
    results = []
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="lwsflow-leader-kill-") as tmp:
        for i in range(args.trials):
            d = Path(tmp) / f"t{i}"
            d.mkdir()
            results.append(trial(args.seed + i, args.kills, args.lease, d))
            r = results[-1]
            secs = [t["seconds"] for t in r["takeovers"]]
            print(f"trial seed {r['seed']}: {len(secs)} kills, takeovers {secs}, violations "
                  f"{r['violations'] or 'none'}", flush=True)
    takeovers = [t["seconds"] for r in results for t in r["takeovers"]]
    violations = [v for r in results for v in r["violations"]]
    phases = sorted({t["phase"] for r in results for t in r["takeovers"]})
    print(f"leader kills: {len(takeovers)} in {args.trials} trials ({time.monotonic() - t0:.0f}s wall)")
    if takeovers:
        print(f"takeover after SIGKILL (lease {args.lease:g}s): median {statistics.median(takeovers):.2f}s, "
              f"max {max(takeovers):.2f}s; killed during phases {', '.join(phases)}")
    print(f"rollouts resumed at the right stage, gate held, Succeeded: "
          f"{sum(not r['violations'] for r in results)}/{len(results)}; violations: {len(violations)}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return 1 if violations else 0


if __name__ == "__main__":
    raise SystemExit(main())
