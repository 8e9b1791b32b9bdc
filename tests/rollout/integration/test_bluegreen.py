"""Blue-green of a P/D pair on the embedded cluster (issue 18): a second LWS pair in its own
InferencePool, HTTPRoute weights shifted stage by stage, traffic observed through the stand-in llm-d
router, the old pool deleted at the end; a slower green caught by analysis and shifted back; a capacity
refusal that names the missing GPUs; a controller SIGKILLed mid-shift and resumed.

The shared kit (cluster, blue, green's manifest, the traffic share) is bluegreen_kit.py.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from lwsflow.cli import main
from lwsflow.controller.bluegreen import plan as P
from lwsflow.controller.kube.resources import INFERENCE_POOL, LWS
from tests.rollout.bluegreen_kit import (
    GREEN,
    KILL_AT_STAGE_2,
    NS,
    ROUTES,
    SLOWER,
    Env,
    analysed,
    assert_shares,
    env_fixture,
    lwsflow,
    only,
    shift_with_traffic,
)

env = env_fixture("pair")


def test_blue_green_shifts_weights_stage_by_stage_and_deletes_blue(env: Env) -> None:
    out, seen, lines = shift_with_traffic(env)
    assert out.result == "succeeded", out.message
    assert any(line.startswith("capacity blue-green: both revisions fit") for line in lines), lines
    # the route was written stage by stage: green added at 0, then 10, 50, 100 (blue dropped)
    assert env.green_weights() == [None, 0, 10, 50, 100]
    assert_shares(seen, [10, 50, 100], env)
    assert seen[-1][1] == 1.0
    assert all(p.startswith("chat-") and "-decode-" in p for _w, _s, pods in seen for p in pods), seen
    st = env.route_state()
    assert st.phase == P.SUCCEEDED and st.green is not None
    assert env.backend_refs() == only(st.green.pool)
    # the old pair and pool are gone; green serves under its own names
    assert set(env.names(LWS)) == set(st.green.lws.values())
    assert set(env.names(INFERENCE_POOL)) == {st.green.pool}
    assert out.message.endswith(f"traffic on pair/{st.green.pair}")


def test_green_as_fast_as_blue_passes_analysis_at_each_stage(tmp_path: Path) -> None:
    with Env(tmp_path, speed=20.0) as env:  # analysis measures in wall time (Prometheus's clock)
        rc, report = analysed(env, GREEN)
        assert rc == 0 and report["result"] == "succeeded", report["stages"][0]["analysis"]
        first, last = report["stages"]
        assert {m["role"] for m in first["analysis"]} == {"decode", "prefill"}
        phases = [m["phase"] for m in first["analysis"]]
        assert "failed" not in phases and phases.count("successful") >= 4, first["analysis"]
        assert "analysis skipped at green 100%" in last["hooks"][0]


def test_slower_green_is_caught_at_the_first_weight_stage_and_shifted_back(tmp_path: Path) -> None:
    with Env(tmp_path, speed=20.0) as env:
        rc, report = analysed(env, SLOWER)
        assert rc == 1 and report["result"] == "rolled-back", report
        first = report["stages"][0]
        assert first["result"] == "failed" and first["target_groups"] == 50
        failed = [m for m in first["analysis"] if m["phase"] == "failed"]
        assert failed and all(m["value"] > m["baseline"] * 1.1 for m in failed), first["analysis"]
        assert len(report["stages"]) == 1  # never went past the first weight stage
        # weights shifted back (green's backendRef removed), green deleted, blue untouched
        assert env.green_weights() == [None, 0, 50, None]
        assert env.backend_refs() == only("chat")
        assert set(env.names(LWS)) == {"chat-decode", "chat-prefill"}
        assert set(env.names(INFERENCE_POOL)) == {"chat"}
        # the same manifest again reports the recorded outcome and writes nothing (--retry starts over)
        rv = env.route()["metadata"]["resourceVersion"]
        assert main(env.bg_args(env.manifest(SLOWER), "--weights", "50,100")) == 1
        assert env.route()["metadata"]["resourceVersion"] == rv


def test_capacity_refusal_names_missing_gpus_and_writes_nothing(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    with Env(tmp_path, gpus_per_node=8) as env:
        env.deploy_blue(gpus=2)  # 2 roles x 2 groups x 2 GPUs: 8 of 8 GPUs in use
        route_before = env.route()
        pool_before = env.kube.get(INFERENCE_POOL, NS, "chat")
        rc = main(env.bg_args(env.manifest(GREEN)))
        err = capsys.readouterr().err
        assert rc == 2
        assert "strategy" in err and "missing 4 GPUs in pool h100" in err, err  # green wants 1 GPU per pod
        assert env.route()["metadata"]["resourceVersion"] == route_before["metadata"]["resourceVersion"]
        assert env.kube.get(INFERENCE_POOL, NS, "chat")["spec"] == pool_before["spec"]
        assert len(env.names(LWS)) == 2


def test_cli_refuses_blue_green_misuse(env: Env, capsys: pytest.CaptureFixture[str]) -> None:
    kc = ["--kubeconfig", str(env.sim.kubeconfig)]
    cases = [(["lws/x", "--strategy", "blue-green"], "--manifest"),
             (["pair/x", "--strategy", "canary"], "strategy"),
             (["pair/x", "--weights", "10,100"], "--weights"),
             (["pair/x", "--strategy", "blue-green", "--manifest", "m", "--weights", "60,40"], "weights"),
             (["pair/x", "--strategy", "blue-green", "--manifest", "m", "--stages", "1,100%"], "--stages"),
             (["pair/x", "--strategy", "blue-green"], "--manifest")]
    for args, field in cases:
        assert main(["rollout", "run", *args, *kc]) == 2, args
        assert field in capsys.readouterr().err, args


def test_sigkill_mid_shift_then_resume(env: Env, capsys: pytest.CaptureFixture[str]) -> None:
    """The controller is killed (SIGKILL) while checking the 50% stage; a rerun re-checks that stage
    and goes on; no weight is written twice (docs/rollout.md "Crash safety")."""
    env.deploy_blue()
    mf = env.manifest(GREEN)
    base = env.bg_args(mf, "--weights", "10,50,100", "--bake", "20s")
    first = lwsflow(base + KILL_AT_STAGE_2, timeout=120)
    assert first.returncode == -9, first.stdout + first.stderr
    st = env.route_state()
    assert (st.phase, st.stage, st.passed) == (P.SHIFTING, 1, 1)
    assert env.green_weights() == [None, 0, 10, 50]
    kc = ["-n", NS, "--kubeconfig", str(env.sim.kubeconfig)]
    assert main(["rollout", "status", "pair/chat", *kc]) == 0
    row = json.loads(capsys.readouterr().out.splitlines()[0])
    assert (row["strategy"], row["phase"], row["stage"], row["passed"], row["weights"]) == \
        ("blue-green", P.SHIFTING, 2, 1, [10, 50, 100])
    # a partition rollout of the blue pair is refused while the blue-green is in progress
    assert main(["rollout", "run", "pair/chat", *kc, "--manifest", str(mf)]) == 2
    assert "--strategy blue-green to resume it" in capsys.readouterr().err
    second = lwsflow(base, timeout=120)
    assert second.returncode == 0, second.stdout + second.stderr
    assert "succeeded" in second.stdout and "stage-2-passed" in second.stdout
    assert "stage-2-shifted" not in second.stdout  # the 50% weights were not written again
    assert env.green_weights() == [None, 0, 10, 50, 100]
    assert st.green is not None
    writes = [P.green_weight_of(r.object, st.green.pool) for r in env.rec.entries(ROUTES, "chat")]
    assert writes.count(50) >= 1 and Counter(w for w in writes)[10] >= 1
    assert env.route_state().phase == P.SUCCEEDED
    # a rerun after the end reports the recorded outcome and writes nothing
    rv = env.route()["metadata"]["resourceVersion"]
    third = lwsflow(base, timeout=60)
    assert third.returncode == 0 and "succeeded" in third.stdout, third.stdout + third.stderr
    assert env.route()["metadata"]["resourceVersion"] == rv
