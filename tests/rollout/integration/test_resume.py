"""A controller killed at any point resumes at the right stage: no gate skipped, no stage redone."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from lwsflow.controller.kube.resources import LWS
from lwsflow.controller.rollout import gate, state
from lwsflow.controller.rollout.engine import Interrupted, LwsRollout, RolloutOptions, Wiring
from lwsflow.controller.yamlio import dump_yaml
from reliability.rollout_env import NS, Env, lws_manifest, new_release

STAGES = "1,2,3,100%"
TARGETS = [1, 2, 3, 4]
CHECKPOINTS = ["started", "running", "stage-1-partition",
               *[f"stage-{k}-gate-passed" for k in range(1, 5)],
               *[f"stage-{k}-passed" for k in range(1, 4)]]


def _killer(at: str) -> Callable[[str], None]:
    def on_step(name: str) -> None:
        if name == at:
            raise Interrupted(name)
    return on_step


def assert_clean_history(env: Env, name: str) -> None:
    """Partitions moved once per stage, stages passed in order, each with its groups truly ready."""
    assert env.rec.partitions[name] == [0, 4, 3, 2, 1, 0]
    passes = [v for (_rv, n, what, v) in sorted(env.rec.order) if n == name and what == "passed"]
    assert passes == [1, 2, 3, 4], passes
    for k, target in enumerate(TARGETS, start=1):
        assert set(range(4 - target, 4)) <= env.rec.at_pass[(name, k)], f"stage {k} passed early"
    final = env.kube.get(LWS, NS, name)
    assert gate.lws_fully_rolled(final).passed
    assert state.RolloutState.from_object(final).phase == state.SUCCEEDED


@pytest.mark.parametrize("at", CHECKPOINTS)
def test_interrupted_between_steps_resumes(env: Env, at: str) -> None:
    base = lws_manifest("k", replicas=4, load_s=10)
    env.create_ready(base)
    new = new_release(base)
    opts = RolloutOptions(stages=STAGES, deadline_s=600)
    with pytest.raises(Interrupted):
        LwsRollout(env.kube, NS, "k", opts, env.clock(), manifest=new,
                   wiring=Wiring(on_step=_killer(at))).run()
    out = LwsRollout(env.kube, NS, "k", RolloutOptions(stages=STAGES, deadline_s=600), env.clock(),
                     manifest=new).run()
    assert out.result == "succeeded", out.message
    assert_clean_history(env, "k")
    # the restarted controller adopted the same rollout instead of starting a new one
    ids = {state.RolloutState.from_object(env.kube.get(LWS, NS, "k")).id}
    assert out.report.rollout_id in ids


def test_sigkill_of_the_cli_mid_rollout_then_rerun(env: Env, tmp_path: Path) -> None:
    base = lws_manifest("cli", replicas=4, load_s=60)  # 0.3 s wall a stage: kill lands mid-rollout
    env.create_ready(base)
    manifest = tmp_path / "new.yaml"
    manifest.write_text(dump_yaml(new_release(base)))
    cmd = [str(Path(sys.executable).parent / "lwsflow"), "rollout", "lws/cli", "-n", NS, "--manifest",
           str(manifest), "--stages", STAGES, "--deadline", "10m", "--kubeconfig", str(env.kubeconfig),
           "--report", str(tmp_path / "report.json")]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    end = time.monotonic() + 60
    while ("cli", 2) not in env.rec.at_pass and time.monotonic() < end and proc.poll() is None:
        time.sleep(0.01)
    assert proc.poll() is None, proc.communicate()
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(10)
    partitions_at_kill = list(env.rec.partitions["cli"])
    assert partitions_at_kill[-1] >= 1  # killed mid-rollout
    rerun = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    assert rerun.returncode == 0, rerun.stderr
    assert "succeeded" in rerun.stdout
    assert_clean_history(env, "cli")
    assert (tmp_path / "report.json").is_file()
