"""Check 4: pause and resume (docs/rollout.md "Pause, resume, status, abort") with only the shipped
ServiceAccount's token, on both clusters. A stage hook runs `lwsflow rollout pause` after stage 1, so
the pause lands at a known point; the cluster then holds the partition (the groups stage 2 released
finish updating, no further group is released), `rollout status` says so, and `rollout resume` takes
the rollout to the equality (lws-semantics §c). Partitions, status and stage results match.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from clusters import Target, wait_for
from rolloutkit import LWSFLOW, Watch, apply, equal, get, lws, partition, rollout, sa_kubeconfig, status

from lwsflow.controller.yamlio import dump_yaml

REPLICAS = 3
STAGES = "1,2,100%"  # 3 groups: 1, 2, 3 -> partitions 2, 1, 0
HOLD_S = 2.0  # wall seconds the paused partition must hold (20 cluster minutes on the embedded cluster)


def _collapsed(values: list[Any]) -> list[Any]:
    out: list[Any] = []
    for v in values:
        if not out or out[-1] != v:
            out.append(v)
    return out


def _pause_resume(t: Target, tmp: Path) -> dict[str, Any]:
    kc = sa_kubeconfig(t, tmp / f"{t.name}-sa.kubeconfig")
    ns = t.namespace("pause")
    t0 = time.monotonic()
    apply(t, ns, [lws("m", "engine:v1", REPLICAS)])
    wait_for(f"[{t.name}] v1 ready", lambda: equal(t, ns, "m", REPLICAS))
    watch = Watch(t, "lws", ns, name="m")
    manifest = tmp / f"{t.name}-pause.yaml"
    t1 = time.monotonic()
    manifest.write_text(dump_yaml(lws("m", "engine:v2", REPLICAS)))
    common = ("lws/m", "-n", ns, "--kubeconfig", str(kc))
    pause_hook = f"{LWSFLOW} rollout pause lws/m -n {ns} --kubeconfig {kc}"
    first = rollout(*common, "--manifest", str(manifest), "--stages", STAGES, "--deadline", "30m",
                    "--hook", pause_hook)
    assert first.returncode == 1 and ": paused: " in first.stdout, (first.stdout, first.stderr[-2000:])
    # the groups the current stage released keep updating; then nothing moves until resume
    wait_for(f"[{t.name}] stage 2's groups updated while paused", lambda: (lambda st: (
        st.get("updatedReplicas"), st.get("readyReplicas")) == (2, 3))(status(get(t, "lws", ns, "m"))))
    held_from = time.monotonic()
    time.sleep(HOLD_S)
    held = [(partition(o), status(o).get("updatedReplicas")) for o in watch.since(held_from)]
    held.append((partition(get(t, "lws", ns, "m")), status(get(t, "lws", ns, "m")).get("updatedReplicas")))
    st_out = rollout("status", *common)
    assert st_out.returncode == 0, st_out.stderr
    row = json.loads(st_out.stdout.strip().splitlines()[-1])
    report = tmp / f"{t.name}-resume.json"
    resumed = rollout("resume", *common, "--report", str(report))
    assert resumed.returncode == 0, (resumed.stdout, resumed.stderr[-2000:])
    wait_for(f"[{t.name}] equality on v2", lambda: equal(t, ns, "m", REPLICAS, "engine:v2"))
    seen = watch.stop()
    print(f"[{t.name}] pause: set-up {t1 - t0:.1f}s, pause/hold/resume {time.monotonic() - t1:.1f}s")
    return {"held": held, "status": {k: row[k] for k in ("paused", "passed", "partition", "phase")},
            "partitions": _collapsed([partition(o) for o in seen if
                                      o["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"][
                                          "containers"][0]["image"] == "engine:v2"]),
            "report": json.loads(report.read_text()),
            "ready": [int(status(o).get("readyReplicas") or 0) for o in seen]}


@pytest.mark.timeout(600)
def test_pause_holds_the_partition_and_resume_completes(reference: Target, embedded: Target,
                                                        tmp_path: Path) -> None:
    ref, emb = _pause_resume(reference, tmp_path), _pause_resume(embedded, tmp_path)
    for name, run in (("reference", ref), ("embedded", emb)):
        assert run["status"] == {"paused": True, "passed": 1, "partition": 1, "phase": "Running"}, (
            name, run["status"])
        assert set(run["held"]) == {(1, 2)}, f"[{name}] partition/updated moved while paused: {run['held']}"
        assert run["partitions"] == [3, 2, 1, 0], f"[{name}] partitions {run['partitions']}"
        assert run["report"]["result"] == "succeeded"
        assert min(run["ready"]) >= 2, f"[{name}] ready groups below the floor 2: {run['ready']}"
    assert ref["status"] == emb["status"] and ref["partitions"] == emb["partitions"]
    assert [(s["index"], s["result"]) for s in ref["report"]["stages"]] == \
        [(s["index"], s["result"]) for s in emb["report"]["stages"]]
    assert ref["report"]["partitions_written"] == emb["report"]["partitions_written"]
