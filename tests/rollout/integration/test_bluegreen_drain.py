"""Blue-green's drain waits for the requests green already took (issue 23): the route write stops new
requests, and green is deleted only once its engines report none in flight, so a request sent to
green just before a rollback still gets its answer. The fixed drain alone (30 cluster seconds, 0.6 s
of wall time at this cluster's speed) cut them off: each answer here takes 5 s."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import httpx

from lwsflow.controller.api import labels as L
from lwsflow.controller.kube.resources import POD
from lwsflow.controller.rollout import drain, session
from lwsflow.controller.rollout.hooks import HookContext, HookResult
from lwsflow.controller.rollout.options import RolloutOptions
from lwsflow.sim.router import Router
from tests.rollout.bluegreen_kit import BLUE, LONG, MODEL, NS, Env

N = 12


def test_rollback_deletes_green_only_after_its_in_flight_requests_finished(tmp_path: Path) -> None:
    with Env(tmp_path, "lws") as env, Router(env.sim.store, seed=7) as router:
        env.deploy_blue(BLUE)
        answers: list[tuple[int, bool]] = []

        def send() -> None:
            """A streamed request: (status, whether the stream ended with [DONE]); a stopped engine
            ends its streams without it."""
            try:
                r = httpx.post(f"{router.url}/v1/completions", timeout=60,
                               json={"model": MODEL, "prompt": "hi", "max_tokens": 2, "stream": True})
                answers.append((r.status_code, "data: [DONE]" in r.text))
            except httpx.HTTPError:
                answers.append((0, False))

        threads = [threading.Thread(target=send) for _ in range(N)]

        def check(ctx: HookContext) -> HookResult:
            for t in threads:
                t.start()
            pods, _ = env.kube.list(POD, NS, label_selector=f"{L.NAME}={ctx.name}")
            urls = [f"http://{p['status']['podIP']}:{env.port}" for p in pods]
            deadline = time.monotonic() + 30
            while (busy := sum(drain.in_flight(u) or 0 for u in urls)) == 0:
                assert time.monotonic() < deadline, "no request reached green"
                time.sleep(0.02)
            return HookResult(False, f"failing on purpose with {busy:g} request(s) in green's engines")

        opts = RolloutOptions(bake_s=30, deadline_s=600, hooks=[check])
        out = session.run(env.kube, session.clock_for(env.kube), session.parse_target(env.target, NS), opts,
                          manifest=env.manifest(LONG), strategy="blue-green", weights=[50, 100])
        for t in threads:
            t.join(timeout=60)
        assert out.result == "rolled-back", out.message
        assert "request(s) in green's engines" in out.message
        assert answers == [(200, True)] * N, answers
