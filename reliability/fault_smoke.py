"""Smoke fault trials: a stand-in engine that hangs, resets connections, answers garbage or stops a
stream half-way must end as failed checks, each within its own time bound (the per-request timeout
times the attempts, plus the backoff between them), never as a pass and never as an open-ended wait."""

from __future__ import annotations

import time

from lwsflow.components.smoke import SmokeConfig, run_smoke
from lwsflow.controller.api import labels as L
from lwsflow.controller.kube.resources import LWS
from lwsflow.controller.rollout.engine import LwsRollout, RolloutOptions
from lwsflow.controller.rollout.hooks import HookContext, HookResult
from lwsflow.controller.rollout.session import clock_for
from lwsflow.sim.engine import ENGINE_MODE_ANNOTATION, start_engine
from reliability.fault_helpers import (
    NS,
    FaultEnv,
    Trial,
    final_problems,
    history_problems,
    lws_manifest,
    release,
)
from reliability.ports import ReservedPort

GENERATION = {"completions", "chat", "completions-stream", "chat-stream"}
# engine mode (its natural scope) -> the checks that must fail
EXPECTED_FAILS = {"hang": GENERATION, "reset": GENERATION, "garbage": GENERATION,
                  "half-stream": {"completions-stream", "chat-stream"}}
MODEL = "fault-model"


def check_bound_s(cfg: SmokeConfig) -> float:
    """The longest one check may take: every attempt timing out, with the backoff between attempts."""
    backoff = sum(cfg.backoff_s * 2**k for k in range(cfg.retries - 1))
    return cfg.retries * cfg.request_timeout_s + backoff + 0.25  # 0.25 s: scheduling slack on 2 cores


def smoke_trial(mode: str, request_timeout_s: float, retries: int = 2) -> Trial:
    trial = Trial(f"smoke-{mode}", f"{mode}@{request_timeout_s:g}s")
    cfg = SmokeConfig(urls=[], model=MODEL, request_timeout_s=request_timeout_s, warmup_s=0.5,
                      retries=retries, backoff_s=0.05, deadline_s=60.0, max_tokens=4)
    engine = start_engine(model=MODEL, modes=mode)
    try:
        t0 = time.monotonic()
        report = run_smoke(cfg.model_copy(update={"urls": [engine.url]}))
        elapsed = time.monotonic() - t0
    finally:
        engine.stop()
    p = trial.problems
    failed = {c.name: c for c in report.failed()}
    trial.result = "failed" if not report.passed else "passed"
    if report.passed:
        p.append(f"smoke passed against an engine in mode {mode}")
    if set(failed) != EXPECTED_FAILS[mode]:
        p.append(f"failed checks {sorted(failed)}, expected {sorted(EXPECTED_FAILS[mode])}")
    bound = check_bound_s(cfg)
    for c in failed.values():
        if c.duration_s > bound:
            p.append(f"{c.name} took {c.duration_s:.2f}s, over its bound {bound:.2f}s")
        if not c.detail:
            p.append(f"{c.name} failed without saying why")
    total = bound * len(EXPECTED_FAILS[mode]) + 1.0  # the passing checks are quick against a stub
    if elapsed > total:
        p.append(f"the run took {elapsed:.2f}s, over {total:.2f}s")
    trial.detail.update(elapsed_s=round(elapsed, 2), slowest_check_s=max(
        (c.duration_s for c in failed.values()), default=0.0), bound_s=round(bound, 2))
    trial.seconds = elapsed
    return trial


def smoke_gate_trial(env: FaultEnv, mode: str, seed: int) -> Trial:
    """A release whose engines answer in ``mode`` (pods Ready, serving badly) is caught by the smoke
    test run as the stage hook: stage 1 fails within the smoke's bounds and the LWS is rolled back.
    ``env`` must serve engines (``start_env(engines=True)``)."""
    with ReservedPort() as reserved:  # pod IPs repeat across embedded clusters: a port of its own
        return _smoke_gate_trial(env, mode, seed, reserved.port)


def _smoke_gate_trial(env: FaultEnv, mode: str, seed: int, port: int) -> Trial:
    t0 = time.monotonic()
    name = f"sg{mode[:4]}{seed}"
    trial = Trial(f"smoke-gate-{mode}", name)
    base = lws_manifest(name, replicas=2, size=1, load_s=10,
                        annotations={L.SERVING_PORT: str(port), L.SERVED_MODEL: MODEL})
    env.create_ready(base)
    cfg = SmokeConfig(targets=[f"lws/{name}"], namespace=NS, kubeconfig=str(env.kubeconfig),
                      revision_only=True, placement=False, request_timeout_s=0.3, warmup_s=1.0,
                      retries=2, backoff_s=0.05, deadline_s=30.0, max_tokens=4)
    spent: list[float] = []

    def smoke(_ctx: HookContext) -> HookResult:
        t = time.monotonic()
        rep = run_smoke(cfg)
        spent.append(time.monotonic() - t)
        return HookResult(rep.passed, "smoke passed" if rep.passed else
                          "smoke failed: " + ", ".join(sorted({c.name for c in rep.failed()})))
    out = LwsRollout(env.kube, NS, name, RolloutOptions(stages="1,100%", deadline_s=600, hooks=[smoke]),
                     clock_for(env.kube), manifest=release(base, **{ENGINE_MODE_ANNOTATION: mode})).run()
    trial.result = out.result
    p = trial.problems
    if out.result != "rolled-back":
        p.append(f"ended {out.result}, expected rolled-back: {out.message}")
    # the stage's failure line ends with the readiness gate it had passed: "... (after its readiness ...)"
    checks = out.message.partition("smoke failed: ")[2].partition(" (after its readiness gate passed")[0]
    failed = set(checks.split(", ")) - {""}
    if failed != EXPECTED_FAILS[mode]:
        p.append(f"stage failed on {sorted(failed)}, expected {sorted(EXPECTED_FAILS[mode])}")
    bound = check_bound_s(cfg) * len(EXPECTED_FAILS[mode]) + 1.0
    if not spent or max(spent) > bound:
        p.append(f"the smoke hook took {spent}s, over {bound:.2f}s")
    with env.faults_paused():
        final = env.kube.get(LWS, NS, name)
    p += history_problems(env.history.of(name), replicas=2, targets=[1, 2], result=out.result)
    p += final_problems(final, out.result)
    trial.detail.update(smoke_s=round(max(spent, default=0.0), 2), bound_s=round(bound, 2))
    trial.seconds = time.monotonic() - t0
    env.delete(name)
    return trial
