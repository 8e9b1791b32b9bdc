"""The access layer under a flaky control plane: retries honour Retry-After, watches survive cuts
and 410 Gone, injected 409s are re-read, and a whole staged rollout still completes exactly once."""

from __future__ import annotations

from pathlib import Path

import pytest
from kubernetes.client.exceptions import ApiException

from lwsflow.controller.errors import NotFound, Unauthorized
from lwsflow.controller.kube.client import Kube
from lwsflow.controller.kube.resources import LWS
from lwsflow.controller.rollout import gate, state
from lwsflow.controller.rollout.engine import LwsRollout, RolloutOptions
from lwsflow.sim.apiserver import ApiFaults
from lwsflow.sim.kubeconfig import write_kubeconfig
from reliability.rollout_env import NS, TOKEN, lws_manifest, make_env, new_release


def test_retry_after_is_honoured_and_bounded(tmp_path: Path) -> None:
    faults = ApiFaults(seed=3, error_rate=0.6, error_statuses=(429, 503), retry_after_s=2)
    env = make_env(tmp_path, faults=faults)
    try:
        sleeps: list[float] = []
        kube = Kube(env.kube.api, sleep=sleeps.append, attempts=30)
        for _ in range(10):
            with pytest.raises(NotFound):  # errors retried; the real answer (404) is not
                kube.get(LWS, NS, "absent")
        assert faults.injected and sleeps and min(sleeps) >= 2.0  # never sooner than Retry-After
        assert kube.retries == len(sleeps) == sum(faults.injected.values())
        few = Kube(env.kube.api, sleep=lambda _s: None, attempts=1)
        faults.error_rate = 1.0
        with pytest.raises(Exception) as exc:  # bounded: the last error surfaces, translated
            few.get(LWS, NS, "absent")
        assert type(exc.value).__module__ == "lwsflow.controller.errors"
    finally:
        env.close()


def test_wrong_token_is_translated_to_unauthorized(tmp_path: Path) -> None:
    env = make_env(tmp_path)
    try:
        bad = write_kubeconfig(tmp_path / "bad", env.server.base_url, "not-" + TOKEN,
                               ca_pem=env.server.ca_pem)
        with pytest.raises(Unauthorized) as exc:  # lwsflow.controller.errors, never the client's ApiException
            Kube.connect(str(bad)).get(LWS, NS, "x")
        assert isinstance(exc.value.__cause__, ApiException)
    finally:
        env.close()


def test_rollout_completes_under_api_faults_and_watch_cuts(tmp_path: Path) -> None:
    faults = ApiFaults(seed=11, error_rate=0.08, error_statuses=(500, 503, 429), retry_after_s=0,
                       conflict_rate=0.15, watch_cut_mean_s=0.2, gone_on_resume_rate=0.4,
                       gone_on_first_resumes=1)  # a fast run may resume only a few watches: one 410 for sure
    env = make_env(tmp_path, faults=faults)
    try:
        faults_rates = (faults.error_rate, faults.conflict_rate)
        faults.error_rate = faults.conflict_rate = 0.0  # set up cleanly
        base = lws_manifest("f", replicas=4)
        env.create_ready(base)
        faults.error_rate, faults.conflict_rate = faults_rates
        out = LwsRollout(env.kube, NS, "f", RolloutOptions(stages="1,2,3,100%", deadline_s=900),
                         env.clock(), manifest=new_release(base)).run()
        assert out.result == "succeeded", out.message
        assert env.rec.partitions["f"] == [0, 4, 3, 2, 1, 0]  # no stage applied twice or skipped
        passes = [v for (_rv, n, w, v) in sorted(env.rec.order) if n == "f" and w == "passed"]
        assert passes == [1, 2, 3, 4]
        for k, target in enumerate([1, 2, 3, 4], start=1):
            assert set(range(4 - target, 4)) <= env.rec.at_pass[("f", k)]
        faults.error_rate = faults.conflict_rate = 0.0
        final = env.kube.get(LWS, NS, "f")
        assert gate.lws_fully_rolled(final).passed
        assert state.RolloutState.from_object(final).phase == state.SUCCEEDED
        assert {409, 410} <= set(faults.injected) and out.report.api_retries > 0
    finally:
        env.close()
