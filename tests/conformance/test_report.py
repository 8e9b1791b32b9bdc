"""`lwsflow report` on the reference cluster (issue 27): a small staged rollout by `lwsflow rollout` with the
shipped ServiceAccount, then a release that never gets Ready, rolled back; the report draws both from what
the cluster recorded (the stage log on the LWS, its Events), not from the CLI's own report."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import rolloutkit
from clusters import Target, wait_for

from lwsflow import report as pictures
from lwsflow.controller.kube.client import Kube
from lwsflow.controller.yamlio import dump_yaml


def _release(reference: Target, ns: str, kubeconfig: Path, tmp: Path, image: str, deadline: str) -> int:
    manifest = tmp / f"{image.replace(':', '-')}.yaml"
    manifest.write_text(dump_yaml(rolloutkit.lws("m", image)))
    proc = rolloutkit.rollout("lws/m", "-n", ns, "--kubeconfig", str(kubeconfig), "--manifest", str(manifest),
                              "--stages", "1,50%,100%", "--bake", "2s", "--deadline", deadline)
    return proc.returncode


def test_report_draws_a_staged_rollout_and_a_rollback_on_the_reference_cluster(reference: Target,
                                                                                tmp_path: Path) -> None:
    ns = reference.namespace("report")
    sa = rolloutkit.sa_kubeconfig(reference, tmp_path / "sa.kubeconfig")
    rolloutkit.apply(reference, ns, [rolloutkit.lws("m", "engine:v1")])
    wait_for("v1 ready", lambda: rolloutkit.equal(reference, ns, "m", 4), timeout=120)
    assert _release(reference, ns, sa, tmp_path, "engine:v2", "2m") == 0
    assert _release(reference, ns, sa, tmp_path, "engine:never-ready-3", "20s") == 1
    wait_for("back on v2", lambda: rolloutkit.equal(reference, ns, "m", 4, "engine:v2"))

    out = tmp_path / "pictures"
    proc = subprocess.run([rolloutkit.LWSFLOW, "report", "lws/m", "-n", ns, "--kubeconfig",
                           str(reference.kubeconfig), "--out", str(out)], capture_output=True, text=True,
                          timeout=120, check=False, env={**os.environ})
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    events = reference.kubectl("get", "events", "-n", ns, "-o",  # what the first release left
                               "custom-columns=T:.firstTimestamp,R:.reason,M:.message").stdout
    assert any(f"{ns}/m rollout" in ln and "Succeeded, 3/3 stage records passed (from events)" in ln
               for ln in lines), proc.stdout + events
    assert any("RolledBack, 0/1 stage records passed, rolled back (from annotations)" in ln
               for ln in lines), proc.stdout
    for name in ("stages.png", "timeline.png"):
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    # the same records, as drawn: three stages of the good release, the bad one's failed wait and rollback
    traces = pictures.collect(Kube.connect(str(reference.kubeconfig)), ns, ["lws/m"])
    assert [(t.outcome, [s.result for s in t.stages]) for t in traces] == [
        ("Succeeded", ["passed"] * 3), ("RolledBack", ["failed"])]
    bad = traces[1]
    assert bad.stages[0].min_ready is not None and bad.stages[0].min_ready >= 3  # the floor held
    assert bad.rollback is not None and bad.rollback[1] is not None
    fig = pictures.stages_figure(traces)
    drawn = {a.get_gid() for a in fig.findobj(lambda a: bool(a.get_gid()))}
    assert {f"stage:m #1:{k}:bake" for k in (1, 2, 3)} <= drawn, drawn
    assert {"stage:m #2:1:wait", "rollback:m #2", "rollback-mark:m #2"} <= drawn, drawn
    timeline = pictures.timeline_figure(traces)
    marks = {str(a.get_gid()) for a in timeline.findobj(
        lambda a: str(a.get_gid() or "").startswith("mark:m #2"))}
    assert any("rolled back" in m for m in marks), marks
