"""``kubectl lwsflow`` against a running in-cluster controller: get, status, pause, resume, abort, retry."""

from __future__ import annotations

import httpx
import pytest

from lwsflow.cli import kubectl_plugin
from lwsflow.controller.incluster.manager import Controller
from lwsflow.controller.kube.resources import EVENT, LWS, ROLLOUT_POLICY
from lwsflow.controller.rollout import gate, state
from reliability.incluster_env import policy, running, sync, wait_passes, wait_policy
from reliability.rollout_env import NS, Env, lws_manifest
from reliability.skip_clock import SkipClock


def k(env: Env, *args: str) -> int:
    return kubectl_plugin.main([*args, "-n", NS, "--kubeconfig", str(env.kubeconfig)])


def test_pause_resume_abort_retry(env: Env, capsys: pytest.CaptureFixture[str]) -> None:
    env.create_ready(lws_manifest("m", replicas=4, partition=4))
    env.kube.create(ROLLOUT_POLICY, NS, policy("p", "m", [{"groups": 1, "bake": "5m"}, {"groups": "50%"},
                                                         {"groups": "100%", "pause": {}}],
                                               progressDeadline="60m"))  # outlasts the skips below
    ctl = Controller(env.kube, SkipClock(env.cluster, env.sim.speed), namespace=NS, resync_s=0.2)
    with running(ctl):
        wait_policy(env, "p", lambda s: bool(s.get("stableRevision")))
        assert k(env, "retry", "p") == 2  # nothing failed yet: bad input
        sync(env, "m", "vllm:2")
        wait_policy(env, "p", lambda s: s.get("phase") == "Progressing" and s.get("currentStage") == 1)
        assert k(env, "pause", "p") == 0
        wait_policy(env, "p", lambda s: s.get("phase") == "Paused")
        part, held = gate.partition(env.kube.get(LWS, NS, "m")), env.rec.partitions["m"]
        for _ in ("gate", "bake"):  # paused through what would have been stage 1's gate, then its bake
            env.cluster.advance(600)  # (each skipped at once), and the controller's next passes after
            wait_passes(ctl, 3)  # each: no stage starts
        assert env.rec.partitions["m"] == held and gate.partition(env.kube.get(LWS, NS, "m")) == part
        assert k(env, "resume", "p") == 0
        wait_policy(env, "p", lambda s: s.get("phase") == "WaitingForPromotion")
        capsys.readouterr()
        assert k(env, "status", "p") == 0
        out = capsys.readouterr().out
        assert "WaitingForPromotion" in out and "manual gate" in out and "stage 3" in out
        assert "gate on m: holds" in out
        assert k(env, "get") == 0
        row = capsys.readouterr().out.splitlines()[1].split()
        assert row[:5] == [NS, "p", "LeaderWorkerSet/m", "WaitingForPromotion", "3/3"]
        assert k(env, "abort", "p") == 0
        p = wait_policy(env, "p", lambda s: s.get("phase") == "RolledBack", timeout=90)
        assert p["status"]["observedTemplateHash"] == p["status"]["stableRevision"]
        failed = p["status"]["rolloutId"]
        # the bad template comes back with the next sync (Argo CD self-heal): not retried on its own
        sync(env, "m", "vllm:2")
        env.cluster.advance(120)
        wait_passes(ctl, 3)
        assert state.RolloutState.from_object(env.kube.get(LWS, NS, "m")).id == failed
        assert k(env, "retry", "p") == 0
        wait_policy(env, "p", lambda s: s.get("phase") == "Progressing" and s.get("rolloutId") != failed)
        capsys.readouterr()
        assert k(env, "status", "p", "--watch") == 0  # live until it waits for a human (stage 1 bakes 5m)
        live = capsys.readouterr().out
        assert "Progressing" in live and live.rstrip().splitlines()[-1].startswith("  gate on m")
        assert "WaitingForPromotion" in live
        p = wait_policy(env, "p", lambda s: s.get("phase") == "WaitingForPromotion" and
                        s.get("rolloutId") != failed, timeout=90)
        assert k(env, "promote", "p") == 0
        p = wait_policy(env, "p", lambda s: s.get("phase") == "Succeeded", timeout=90)
    assert [h["outcome"] for h in p["status"]["history"]] == ["RolledBack", "Succeeded"]
    assert k(env, "promote", "nope") == 2


def test_kubectl_finds_the_plugin(env: Env) -> None:
    """`kubectl lwsflow ...` runs the installed kubectl-lwsflow script (kubectl's plugin lookup on PATH)."""
    import os
    import subprocess
    from pathlib import Path

    venv_bin = Path(__file__).resolve().parents[3] / ".venv" / "bin"
    env.kube.create(ROLLOUT_POLICY, NS, policy("p", "m", [{"groups": "100%"}]))
    out = subprocess.run([str(venv_bin / "kubectl"), "lwsflow", "get", "-n", NS, "--kubeconfig",
                          str(env.kubeconfig)], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PATH": f"{venv_bin}:{os.environ.get('PATH', '')}"})
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[1].split()[:4] == [NS, "p", "LeaderWorkerSet/m", "Idle"]


FAILED_TEMPLATE = "rollout.lwsflow.io/failed-template"


def _retry_on_dashboard(url: str) -> httpx.Response:
    return httpx.post(f"{url}p/{NS}/p/retry", headers={"HX-Request": "true"}, timeout=30)


def test_retry_after_a_rollback_puts_the_failed_template_back(
        env: Env, capsys: pytest.CaptureFixture[str]) -> None:
    """The rollback took the failed template off the target and no Git sync brings it back: retry
    (kubectl lwsflow and the dashboard's button) puts the recorded template back and rolls it out
    again; where nothing recorded it, retry refuses with exit 1 (the dashboard: 409) saying why."""
    from lwsflow.dashboard import serve

    env.create_ready(lws_manifest("m", replicas=4, partition=4))
    env.kube.create(ROLLOUT_POLICY, NS, policy("p", "m", [{"groups": 1}, {"groups": "100%", "pause": {}}]))
    ctl = Controller(env.kube, env.clock(), namespace=NS)
    dash = serve(str(env.kubeconfig), NS)
    try:
        with running(ctl):
            adopted = wait_policy(env, "p", lambda s: bool(s.get("stableRevision")))
            stable = adopted["status"]["stableRevision"]
            sync(env, "m", "vllm:2")

            def roll_back() -> tuple[str, str]:
                p = wait_policy(env, "p", lambda s: s.get("phase") == "WaitingForPromotion", timeout=90)
                assert k(env, "abort", "p") == 0
                wait_policy(env, "p", lambda s: s.get("phase") == "RolledBack", timeout=90)
                lws = env.kube.get(LWS, NS, "m")
                assert state.template_hash(state.template_of(lws)) == stable  # the bad template is gone
                return p["status"]["rolloutId"], p["status"]["canaryRevision"]

            first, bad = roll_back()
            capsys.readouterr()
            assert k(env, "retry", "p") == 0
            assert "puts its template back on m" in capsys.readouterr().out
            p = wait_policy(env, "p", lambda s: s.get("phase") == "WaitingForPromotion"
                            and s.get("rolloutId") not in ("", first), timeout=90)
            assert p["status"]["canaryRevision"] == bad
            second, _ = roll_back()

            # a rollback that recorded nothing (an older controller): refused, nothing requested
            recorded = env.kube.get(LWS, NS, "m")["metadata"]["annotations"][FAILED_TEMPLATE]
            env.kube.merge_patch(LWS, NS, "m", {"metadata": {"annotations": {FAILED_TEMPLATE: None}}})
            capsys.readouterr()
            assert k(env, "retry", "p") == 1
            err = capsys.readouterr().err
            assert f"cannot retry rollout {second}" in err and "did not record it" in err
            assert "apply that template again" in err
            refused = _retry_on_dashboard(dash.url)
            assert refused.status_code == 409 and "did not record it" in refused.text
            assert env.kube.get(ROLLOUT_POLICY, NS, "p")["metadata"]["annotations"][
                "rolloutpolicy.lwsflow.io/retry"] == first
            roll = state.RolloutState.from_object(env.kube.get(LWS, NS, "m"))
            assert (roll.id, roll.phase) == (second, state.ROLLED_BACK)

            # recorded again: the dashboard's Retry restarts it, and it goes through this time
            env.kube.merge_patch(LWS, NS, "m", {"metadata": {"annotations": {FAILED_TEMPLATE: recorded}}})
            ok = _retry_on_dashboard(dash.url)
            assert ok.status_code == 200 and f"retry of rollout {second} requested" in ok.text
            p = wait_policy(env, "p", lambda s: s.get("phase") == "WaitingForPromotion"
                            and s.get("rolloutId") not in ("", first, second), timeout=90)
            assert k(env, "promote", "p") == 0
            p = wait_policy(env, "p", lambda s: s.get("phase") == "Succeeded", timeout=90)
            assert p["status"]["stableRevision"] == bad
    finally:
        dash.stop()
    assert [h["outcome"] for h in p["status"]["history"]] == ["RolledBack", "RolledBack", "Succeeded"]
    assert "RetryReapplied" in {e.get("reason") for e in env.kube.list(EVENT, NS)[0]}

