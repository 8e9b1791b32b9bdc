"""Check 4: the rollout controller SIGKILLed at seeded random points, each kill followed by
`lwsflow rollout resume` (docs/rollout.md "Crash safety": all state lives on the object), with only the
shipped ServiceAccount's token, on both clusters with the same seeds.

One LWS (3 groups, maxUnavailable 1, so a floor of 2 ready groups) takes one release per seed until
ten kills have landed. Each release's `rollout run` is killed a seeded delay after its start write is on
the object; the `resume` that follows is killed the same way after its own first write, up to four
times a release, and the last `resume` runs to the end. Every release must end at the equality on its
image (lws-semantics §c), the partitions a watch observes must only ever step down the stage plan (a
passed stage is never rewritten), and the ready groups it observes must never fall below the floor.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from clusters import Target, wait_for
from rolloutkit import LWSFLOW, Watch, apply, equal, get, image, lws, partition, sa_kubeconfig, status

from lwsflow.controller.api.labels import ROLLOUT_PREFIX
from lwsflow.controller.yamlio import dump_yaml

# one release each, until KILLS have landed (a kill misses when the process ends first: on a fast embedded
# cluster, often)
SEEDS = (11, 23, 37, 41, 59, 67, 73, 89, 97, 101, 103, 107, 109, 113, 127, 131)
KILLS = 10
KILLS_PER_RELEASE = 4  # a kill lands unless the process finished first; each is followed by a resume
REPLICAS = 3
STAGES = "1,100%"
PLAN = [3, 2, 0]  # frozen, then the stages' partitions
FLOOR = 2
# the seeded delay after the process's first write, short against a rollout's wall time on each cluster
# (~10 s on the reference cluster with a 1 s ready delay; well under a second of the embedded cluster's
# x600 clock after the first write), so that most kills land mid-rollout
WINDOW_S = {"reference": 2.0, "embedded": 0.2}


def _annotation(obj: dict[str, Any], key: str) -> str:
    return str((obj["metadata"].get("annotations") or {}).get(ROLLOUT_PREFIX + key, ""))


def _wait_first_write(watch: Watch, t0: float, new: str, stamp: str | None, proc: subprocess.Popen[str],
                      timeout_s: float = 60) -> None:
    """Until the process's first write shows: ``new`` on the object (`run`), or a stage-started
    stamp other than ``stamp`` (`resume`)."""
    def done(o: dict[str, Any]) -> bool:
        return image(o) == new if stamp is None else _annotation(o, "stage-started") != stamp

    end = time.monotonic() + timeout_s
    while not any(done(o) for o in watch.since(t0)) and proc.poll() is None and time.monotonic() < end:
        time.sleep(0.01)


def _release(t: Target, ns: str, kc: Path, watch: Watch, new: str, manifest: Path, seed: int
             ) -> dict[str, Any]:
    rng = random.Random(seed)
    window = WINDOW_S[t.name]
    common = ["lws/k", "-n", ns, "--kubeconfig", str(kc)]
    cmd = [LWSFLOW, "rollout", "run", *common, "--manifest", str(manifest), "--stages", STAGES,
           "--deadline", "2m" if t.name == "reference" else "30m"]
    kills, landed, runs = 0, [], 0
    t_release = time.monotonic()
    while True:
        runs += 1
        before = _annotation(get(t, "lws", ns, "k"), "stage-started")
        t0 = time.monotonic()
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env={**os.environ, "PYTHONUNBUFFERED": "1"})
        if kills < KILLS_PER_RELEASE:
            # the first write of `run` puts the new template on the object; of `resume`, a fresh
            # stage-started stamp (its progress deadline restarts); the seeded delay counts from there
            _wait_first_write(watch, t0, new, before if runs > 1 else None, proc)
            try:
                proc.wait(rng.uniform(0, window))
            except subprocess.TimeoutExpired:
                os.kill(proc.pid, signal.SIGKILL)
                proc.communicate(timeout=30)
                kills += 1
                obj = get(t, "lws", ns, "k")
                landed.append(f"{_annotation(obj, 'phase')}/passed={_annotation(obj, 'passed')}/"
                              f"partition={partition(obj)}")
                cmd = [LWSFLOW, "rollout", "resume", *common]
                continue
        out, err = proc.communicate(timeout=300)
        phase = _annotation(get(t, "lws", ns, "k"), "phase")
        # a kill right after the last write leaves nothing to resume: `resume` says so (exit 2)
        finished_already = proc.returncode == 2 and "no rollout in progress (last: Succeeded)" in err
        assert proc.returncode == 0 or finished_already, f"[{t.name}] {new} run {runs}: exit " \
            f"{proc.returncode}: {(err or out).strip()[-1500:]}"
        assert phase == "Succeeded", f"[{t.name}] {new}: phase {phase}"
        break
    wait_for(f"[{t.name}] equality on {new}", lambda: equal(t, ns, "k", REPLICAS, new))
    return {"kills": kills, "runs": runs, "landed": landed, "seconds": time.monotonic() - t_release}


def _partitions(seen: list[dict[str, Any]], new: str) -> list[int]:
    out: list[int] = []
    for o in seen:
        if image(o) == new and (not out or out[-1] != partition(o)):
            out.append(partition(o))
    return out


def _trials(t: Target, tmp: Path) -> dict[str, Any]:
    kc = sa_kubeconfig(t, tmp / f"{t.name}-sa.kubeconfig")
    ns = t.namespace("kill")
    apply(t, ns, [lws("k", "engine:v1", REPLICAS)])
    wait_for(f"[{t.name}] v1 ready", lambda: equal(t, ns, "k", REPLICAS))
    watch = Watch(t, "lws", ns, name="k")
    releases: list[dict[str, Any]] = []
    try:
        for i, seed in enumerate(SEEDS):
            if sum(r["kills"] for r in releases) >= KILLS:
                break
            new = f"engine:v{i + 2}"
            manifest = tmp / f"{t.name}-k-{i}.yaml"
            manifest.write_text(dump_yaml(lws("k", new, REPLICAS)))
            releases.append({"image": new, **_release(t, ns, kc, watch, new, manifest, seed)})
    finally:
        seen = watch.stop()
    for r in releases:
        r["partitions"] = _partitions(seen, r["image"])
    ready = [int(status(o).get("readyReplicas") or 0) for o in seen]
    return {"releases": releases, "min_ready": min(ready), "observations": len(seen)}


@pytest.mark.timeout(900)
def test_sigkill_then_resume_seeded(reference: Target, embedded: Target, tmp_path: Path) -> None:
    ref, emb = _trials(reference, tmp_path), _trials(embedded, tmp_path)
    for name, run in (("reference", ref), ("embedded", emb)):
        kills = sum(r["kills"] for r in run["releases"])
        print(f"[{name}] {kills} kills, {run['observations']} observations, min ready {run['min_ready']}; "
              + "; ".join(f"{r['image']}: {r['landed']} {r['seconds']:.1f}s" for r in run["releases"]))
        assert kills >= KILLS, f"[{name}] only {kills} kills landed: {[r['landed'] for r in run['releases']]}"
        assert run["min_ready"] >= FLOOR, f"[{name}] ready groups fell to {run['min_ready']} (floor {FLOOR})"
        for r in run["releases"]:
            assert r["partitions"] == PLAN, f"[{name}] {r['image']}: partitions {r['partitions']}"
    # the same seeds on both; where one cluster needed more releases for its kills, the shared ones compare
    shared = min(len(ref["releases"]), len(emb["releases"]))
    assert [(r["image"], r["partitions"]) for r in ref["releases"][:shared]] == \
        [(r["image"], r["partitions"]) for r in emb["releases"][:shared]]
