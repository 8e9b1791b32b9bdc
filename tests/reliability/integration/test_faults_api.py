"""A staged rollout over a flaky control plane: seeded 500/503/429 (with Retry-After) on any request,
409 on writes, watch streams cut at random and resumed, 410 Gone forcing a relist. The store's own
history proves no stage was applied twice or skipped and no gate was bypassed."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from lwsflow.controller.kube.client import Kube
from lwsflow.controller.kube.resources import LWS
from lwsflow.controller.rollout import state
from lwsflow.controller.rollout.engine import LwsRollout, RolloutOptions
from lwsflow.controller.rollout.session import clock_for
from lwsflow.sim.apiserver import ApiFaults
from reliability.fault_helpers import NS, lws_manifest, release, served
from reliability.fault_trials import api_fault_trial


@pytest.mark.parametrize("seed", [101, 202])
def test_rollout_completes_once_under_errors_conflicts_cuts_and_gone(tmp_path: Path, seed: int) -> None:
    faults = ApiFaults(seed=seed, error_rate=0.15, error_statuses=(500, 503, 429), retry_after_s=0,
                       conflict_rate=0.35, watch_cut_mean_s=0.05, gone_on_resume_rate=0.4)
    with served(tmp_path, faults=faults) as env:
        trial = api_fault_trial(env, seed)
    assert trial.survived, trial.problems
    injected = trial.detail["injected"]
    assert isinstance(injected, dict)
    # the faults were really exercised in this rollout, not just configured
    assert {409, 410} <= set(injected) and len({500, 503, 429} & set(injected)) >= 2, injected


def test_backoff_honours_retry_after_and_jitters(tmp_path: Path) -> None:
    """429/503 carry Retry-After: 1 and no retry of those comes sooner; 500s back off with full
    jitter (random, below the exponential cap). The sleeps are recorded, not taken in full."""
    sleeps: list[float] = []

    def sleep(s: float) -> None:
        sleeps.append(s)
        time.sleep(min(s, 0.05))  # keep the test fast; the asked-for delay is what is checked

    # 500 listed twice: half the injected errors carry no Retry-After and show the jitter
    faults = ApiFaults(seed=7, error_rate=0.2, error_statuses=(500, 500, 429, 503), retry_after_s=1)
    with served(tmp_path, faults=faults) as env:
        base = lws_manifest("ra", replicas=2)
        env.create_ready(base)
        before = dict(faults.injected)
        kube = Kube(env.kube.api, sleep=sleep, attempts=30, base_delay=0.05)
        out = LwsRollout(kube, NS, "ra", RolloutOptions(stages="1,100%", deadline_s=600), clock_for(kube),
                         manifest=release(base)).run()
        assert out.result == "succeeded", out.message
        got = {k: v - before.get(k, 0) for k, v in faults.injected.items()}
        with env.faults_paused():
            final = env.kube.get(LWS, NS, "ra")
    assert state.RolloutState.from_object(final).phase == state.SUCCEEDED
    assert kube.retries == sum(got.values()) == len(sleeps) > 0
    honoured = [s for s in sleeps if s >= 1.0]
    jittered = [s for s in sleeps if s < 1.0]
    assert len(honoured) == got.get(429, 0) + got.get(503, 0)  # never sooner than the server asked
    assert len(jittered) == got.get(500, 0) >= 2, got
    assert len(set(jittered)) == len(jittered)  # random, not a fixed schedule
    assert max(jittered) <= 0.05 * 2**4  # under the exponential cap of the attempts seen
