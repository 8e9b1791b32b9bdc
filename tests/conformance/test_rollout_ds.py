"""Check 4: a DisaggregatedSet rollout through the DS gate (docs/rollout.md "DisaggregatedSet"), with only
the shipped ServiceAccount's token, on both clusters.

The DS has no partition: `lwsflow rollout ds/NAME` applies the new roles in one stage and gates on
``status.roleStatuses`` (lws-semantics §f "Status"). The DS controller's replacement is compared by
behaviour, not names (v0.9.0 names child LWS ``<ds>-<rev>-<role>``, v0.10+ ``<ds>-<slice>-<rev>-<role>``):
per role, the spec replicas over all revisions stay within ``[target - maxUnavailable, target + maxSurge]``
at every point a watch observes (DS planner defaults surge 1, unavailable 0), and each role ends as
one LWS on the new template at its equality. The gate's verdict is compared too: upstream v0.9.0's DS
controller writes no DS status at all (status is main-only after v0.10.0), so there the gate reads the
child LWS (``status.ds_children_checks``) and must pass as it does on the embedded cluster, which
writes the v0.10+ status and is gated on it.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from clusters import Target, allowlist, wait_for
from rolloutkit import Watch, apply, ds, get, image, rollout, sa_kubeconfig, status

from lwsflow.controller.api import labels as L
from lwsflow.controller.rollout.gate import CHILDREN_SOURCE
from lwsflow.controller.yamlio import dump_yaml

TARGET = {"prefill": 2, "decode": 1}
SURGE, UNAVAILABLE = 1, 0  # the DS planner's defaults for a role without rollingUpdateConfiguration
# reference: wall time (the replacement and the gate took 6 s on a loaded 2-core machine); embedded:
# cluster time
DEADLINE = {"reference": "180s", "embedded": "30m"}


def _children(t: Target, ns: str) -> list[dict[str, Any]]:
    return [o for o in t.items("lws", ns) if (o["metadata"].get("labels") or {}).get(L.DS_NAME) == "d"]


def _settled(t: Target, ns: str, want_image: str) -> bool:
    """Each role is one child LWS on ``want_image`` with ``replicas == ready == updated == target``."""
    kids = _children(t, ns)
    by_role: dict[str, list[dict[str, Any]]] = {}
    for o in kids:
        by_role.setdefault(o["metadata"]["labels"][L.DS_ROLE], []).append(o)
    if set(by_role) != set(TARGET):
        return False
    for role, objs in by_role.items():
        if len(objs) != 1 or image(objs[0]) != want_image:
            return False
        st = status(objs[0])
        if not (objs[0]["spec"]["replicas"] == st.get("replicas") == st.get("readyReplicas")
                == st.get("updatedReplicas") == TARGET[role]):
            return False
    return True


def _bounds(seen: list[tuple[str, dict[str, Any]]]) -> list[str]:
    """Per role, Σ spec.replicas over the child LWS of every revision at each observation, outside
    ``[target - maxUnavailable, target + maxSurge]`` (lws-semantics §f "What DS guarantees")."""
    live: dict[str, dict[str, Any]] = {}
    problems = []
    for kind, o in seen:
        if kind == "DELETED":
            live.pop(o["metadata"]["name"], None)
            continue
        live[o["metadata"]["name"]] = o
        roles = {x["metadata"]["labels"].get(L.DS_ROLE) for x in live.values()}
        if not set(TARGET) <= roles:
            continue  # the watch's initial list arrives one object at a time
        for role, target in TARGET.items():
            total = sum(int(x["spec"]["replicas"]) for x in live.values()
                        if x["metadata"]["labels"].get(L.DS_ROLE) == role and not x["metadata"].get(
                            "deletionTimestamp"))
            if not target - UNAVAILABLE <= total <= target + SURGE:
                problems.append(f"{role}: {total} groups in spec at {o['metadata']['name']} "
                                f"rv {o['metadata']['resourceVersion']}")
    return problems


def _roll(t: Target, tmp: Path) -> dict[str, Any]:
    t0 = time.monotonic()
    kc = sa_kubeconfig(t, tmp / f"{t.name}-sa.kubeconfig")
    ns = t.namespace("dsroll")
    apply(t, ns, [ds("d", "engine:v1")])
    wait_for(f"[{t.name}] v1 roles ready", lambda: _settled(t, ns, "engine:v1"))
    watch = Watch(t, "lws", ns, selector=f"{L.DS_NAME}=d")
    t1 = time.monotonic()
    manifest, report = tmp / f"{t.name}-ds.yaml", tmp / f"{t.name}-ds.json"
    manifest.write_text(dump_yaml(ds("d", "engine:v2")))
    # --no-rollback: a gate that does not pass pauses instead of re-applying v1, so the DS controller's
    # own replacement is still compared to its end
    proc = rollout("ds/d", "-n", ns, "--kubeconfig", str(kc), "--manifest", str(manifest),
                   "--deadline", DEADLINE[t.name], "--no-rollback", "--report", str(report))
    assert "orbidden" not in proc.stderr, proc.stderr[-2000:]
    wait_for(f"[{t.name}] each role one LWS on v2 at its equality", lambda: _settled(t, ns, "engine:v2"))
    watch.stop()
    print(f"[{t.name}] ds: set-up {t1 - t0:.1f}s, rollout {time.monotonic() - t1:.1f}s, rc {proc.returncode}")
    seen = watch.typed()
    obj = get(t, "disaggregatedsets", ns, "d")
    return {"rc": proc.returncode, "report": json.loads(report.read_text()), "seen": seen,
            "revisions": {o["metadata"]["labels"].get(L.DS_REVISION) for _e, o in seen},
            "ds_status": status(obj), "stderr": proc.stderr}


@pytest.mark.timeout(600)
def test_ds_rollout_through_the_gate(reference: Target, embedded: Target, tmp_path: Path) -> None:
    ref, emb = _roll(reference, tmp_path), _roll(embedded, tmp_path)
    for name, run in (("reference", ref), ("embedded", emb)):
        assert not _bounds(run["seen"]), f"[{name}] " + "; ".join(_bounds(run["seen"])[:5])
        assert len(run["revisions"]) == 2, f"[{name}] revisions seen {run['revisions']}"
        assert [s["index"] for s in run["report"]["stages"]] == [1]  # one stage: a DS has no partition
    for name, run in (("reference", ref), ("embedded", emb)):
        assert run["rc"] == 0 and run["report"]["result"] == "succeeded", \
            f"[{name}] {run['report']['message']} {run['report']['stages'][0]['gate_detail']}"
        assert all(run["report"]["stages"][0]["gate"].values()), (name, run["report"]["stages"][0]["gate"])
    assert emb["ds_status"].get("roleStatuses"), "the embedded cluster writes the v0.10+ DS status"
    assert not emb["report"]["stages"][0]["gate_detail"].startswith(CHILDREN_SOURCE)
    # v0.9.0 writes no DS status at all: the gate read the child LWS there, and says so
    assert not ref["ds_status"].get("observedGeneration") and not ref["ds_status"].get("roleStatuses")
    assert ref["report"]["stages"][0]["gate_detail"].startswith(CHILDREN_SOURCE), ref["report"]["stages"]
    assert "rollout/ds-gate" not in allowlist(), "the DS gate passes on both clusters: no allow-list entry"
