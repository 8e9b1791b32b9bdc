"""Check 4: a P/D pair (two LWS, ``pdMode: lws-pair``) rolled out by `lwsflow rollout pair/NAME` with
only the shipped ServiceAccount's token, on both clusters (docs/rollout.md "Prefill/decode pairs"):
decode moves first at every stage, the prefill:decode skew of updated groups stays within one group at
every point a watch observes, both roles end at the equality (lws-semantics §c); the stage results,
partitions written and order of the roles' steps are the same on both clusters.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from clusters import Target, wait_for
from rolloutkit import Watch, apply, equal, image, pair, partition, rollout, sa_kubeconfig, status, steps

from lwsflow.controller.api import labels as L
from lwsflow.controller.api.status import observed_current
from lwsflow.controller.pd.pair import skew
from lwsflow.controller.yamlio import dump_yaml

REPLICAS = {"prefill": 4, "decode": 2}
STAGES = "1,50%,100%"  # prefill (the larger role) 1, 2, 4 groups; decode scaled: 1, 1, 2
TARGETS = {"prefill": [1, 2, 4], "decode": [1, 1, 2]}
DEADLINE = {"reference": "2m", "embedded": "30m"}  # wall time on one, cluster time on the other


def _roll(t: Target, tmp: Path) -> dict[str, Any]:
    t0 = time.monotonic()
    kc = sa_kubeconfig(t, tmp / f"{t.name}-sa.kubeconfig")
    ns = t.namespace("pair")
    apply(t, ns, pair("p", "engine:v1"))
    wait_for(f"[{t.name}] v1 ready", lambda: all(equal(t, ns, f"p-{r}", n) for r, n in REPLICAS.items()))
    watch = Watch(t, "lws", ns, selector=f"{L.PD_PAIR}=p")
    t1 = time.monotonic()
    manifest, report = tmp / f"{t.name}-pair.yaml", tmp / f"{t.name}-pair.json"
    manifest.write_text("---\n".join(dump_yaml(d) for d in pair("p", "engine:v2")))
    proc = rollout("pair/p", "-n", ns, "--kubeconfig", str(kc), "--manifest", str(manifest),
                   "--stages", STAGES, "--deadline", DEADLINE[t.name], "--report", str(report))
    assert proc.returncode == 0, f"[{t.name}] exit {proc.returncode}: {proc.stderr.strip()[-2000:]}"
    wait_for(f"[{t.name}] both roles at the equality on v2",
             lambda: all(equal(t, ns, f"p-{r}", n, "engine:v2") for r, n in REPLICAS.items()))
    print(f"[{t.name}] pair: set-up {t1 - t0:.1f}s, rollout {time.monotonic() - t1:.1f}s")
    return {"report": json.loads(report.read_text()), "steps": steps(proc.stdout), "seen": watch.stop()}


def _observed(name: str, seen: list[dict[str, Any]]) -> list[tuple[str, int, int, int]]:
    """(role, partition, updated, ready) at every observation after the new template landed whose status
    describes the current spec (``observedGeneration``): until the LWS controller has seen the new
    template, ``updatedReplicas`` still counts the groups of the old one."""
    out = []
    for o in seen:
        role = o["metadata"]["labels"][L.ROLE]
        if image(o) == "engine:v2" and observed_current(o):
            st = status(o)
            out.append((role, partition(o), int(st.get("updatedReplicas") or 0),
                        int(st.get("readyReplicas") or 0)))
    assert out, f"[{name}] the watch saw no object on the new template"
    return out


def _check_one(name: str, run: dict[str, Any]) -> None:
    rep = run["report"]
    assert rep["result"] == "succeeded", rep["message"]
    assert rep["max_pd_skew"] is not None and rep["max_pd_skew"] <= 1, rep["max_pd_skew"]
    latest = {"prefill": (REPLICAS["prefill"], 0, 0), "decode": (REPLICAS["decode"], 0, 0)}
    worst = 0.0
    for role, part, upd, ready in _observed(name, run["seen"]):
        if role == "prefill" and part < latest["prefill"][0]:
            # prefill's partition moves for stage k only once decode has passed stage k: decode's groups
            # for that stage are updated and the role is at its equality
            k = TARGETS["prefill"].index(REPLICAS["prefill"] - part)
            d_part, d_upd, d_ready = latest["decode"]
            assert d_upd >= TARGETS["decode"][k] and d_ready == REPLICAS["decode"], (
                f"[{name}] prefill moved to partition {part} (stage {k + 1}) while decode had "
                f"{d_upd} updated / {d_ready} ready at partition {d_part}")
        latest[role] = (part, upd, ready)
        s = skew(latest["prefill"][1], latest["decode"][1], REPLICAS["prefill"], REPLICAS["decode"])
        worst = max(worst, s)
        assert s <= 1, f"[{name}] updated prefill:decode skew {s} at {latest}"
    assert latest["prefill"][1:] == (4, 4) and latest["decode"][1:] == (2, 2), latest
    print(f"[{name}] {len(run['seen'])} observations, max updated skew {worst:g}, "
          f"controller max_pd_skew {rep['max_pd_skew']}")


def _stages(rep: dict[str, Any]) -> list[tuple[Any, ...]]:
    return [(s["role"], s["index"], s["target_groups"], s["partition"], s["result"]) for s in rep["stages"]]


@pytest.mark.timeout(600)
def test_pair_rollout_decode_first_with_skew_at_most_one(reference: Target, embedded: Target,
                                                         tmp_path: Path) -> None:
    ref, emb = _roll(reference, tmp_path), _roll(embedded, tmp_path)
    for name, run in (("reference", ref), ("embedded", emb)):
        _check_one(name, run)
    assert _stages(ref["report"]) == _stages(emb["report"])
    assert ref["report"]["partitions_written"] == emb["report"]["partitions_written"]
    assert ref["steps"] == emb["steps"], (ref["steps"], emb["steps"])
