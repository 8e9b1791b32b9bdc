"""Rollout fault trials over HTTP against the embedded cluster: flaky API, SIGKILLed controller,
cluster faults mid-stage. Each trial returns a :class:`Trial` whose ``problems`` list is empty when
every invariant held; the tests assert on single trials, ``reliability/fault_campaign.py`` runs many.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lwsflow.controller.api import labels as L
from lwsflow.controller.kube.resources import LWS
from lwsflow.controller.rollout import state
from lwsflow.controller.rollout.engine import LwsRollout, RolloutOptions
from lwsflow.controller.rollout.gate import partition
from lwsflow.controller.rollout.gate import replicas as gate_replicas
from lwsflow.controller.rollout.session import clock_for
from lwsflow.controller.yamlio import dump_yaml
from lwsflow.sim.faults import Fault, inject
from reliability.fault_helpers import (
    NEW_IMAGE,
    NS,
    OLD_IMAGE,
    FaultEnv,
    Trial,
    decode_first_problems,
    final_problems,
    history_problems,
    image_of,
    lws_manifest,
    release,
)

STAGES = "1,2,3,100%"
TARGETS = [1, 2, 3, 4]
REPLICAS = 4
LWSFLOW = str(Path(sys.executable).parent / "lwsflow")
FINAL = {state.SUCCEEDED: "succeeded", state.ROLLED_BACK: "rolled-back", state.ABORTED: "aborted",
         state.FAILED: "failed"}
NEVER_READY = {"sim.lwsflow.io/never-ready": "true"}


def _judge(env: FaultEnv, trial: Trial, *, new: str = NEW_IMAGE, at_rest: bool = False) -> Trial:
    with env.faults_paused():
        final = env.kube.get(LWS, NS, trial.name)
    trial.problems += history_problems(env.history.of(trial.name), replicas=REPLICAS, targets=TARGETS,
                                       result=trial.result, new=new, at_rest=at_rest)
    trial.problems += final_problems(final, trial.result, new=new, at_rest=at_rest)
    return trial


def _in_process(env: FaultEnv, name: str, manifest: dict, *, deadline_s: float = 600) -> str:
    """Run one rollout with the library (real client over HTTPS); the outcome's result."""
    opts = RolloutOptions(stages=STAGES, deadline_s=deadline_s)
    return LwsRollout(env.kube, NS, name, opts, clock_for(env.kube), manifest=manifest).run().result


# -- API faults ----------------------------------------------------------------------------------------


def api_fault_trial(env: FaultEnv, seed: int) -> Trial:
    """A whole staged rollout while the server answers errors/conflicts and cuts watches (``env.faults``)."""
    t0 = time.monotonic()
    trial = Trial("api-errors", f"api{seed}")
    base = lws_manifest(trial.name, load_s=40)  # ~1 s of watching: many cuts and resumes
    env.create_ready(base)
    before, verbs = dict(env.faults.injected), dict(env.verbs)
    try:
        trial.result = _in_process(env, trial.name, release(base))
    except Exception as exc:  # a trial that raises did not survive; the campaign keeps going
        trial.result, trial.problems = "raised", [f"{type(exc).__name__}: {exc}"]
        return trial
    trial.detail["injected"] = {s: n - before.get(s, 0) for s, n in env.faults.injected.items()
                                if n - before.get(s, 0)}
    trial.detail["requests"] = {v: n - verbs.get(v, 0) for v, n in env.verbs.items() if n - verbs.get(v, 0)}
    if trial.result != "succeeded":
        trial.problems.append(f"ended {trial.result} under API faults")
    _judge(env, trial)
    trial.seconds = time.monotonic() - t0
    env.delete(trial.name)
    return trial


# -- SIGKILL of the CLI --------------------------------------------------------------------------------


def kill_trial(env: FaultEnv, tmp: Path, seed: int, scenario: str, **kw: Any) -> Trial:
    """`lwsflow rollout lws/NAME` as a subprocess, SIGKILLed after seeded random delays and restarted
    until the rollout has an outcome. ``scenario``: "succeed" (a good release from ``--manifest``),
    "rollback" (the new pods never become Ready); "gitops" / "gitops-rollback": the same, but the
    release was applied by GitOps with the partition frozen, as the rendered overlay does, and the
    controller runs without ``--manifest`` (rolling back to the last template it saw succeed)."""
    t0 = time.monotonic()
    gitops, bad = scenario.startswith("gitops"), scenario.endswith("rollback")
    trial = Trial(f"kill-{scenario}", f"k{scenario[0]}{scenario[-1]}{seed}")
    base = lws_manifest(trial.name, load_s=40)  # ~0.25 s wall a stage: kills land across all stages
    env.create_ready(base)
    new = release(base, **(NEVER_READY if bad else {}))
    target = ["--manifest", str(tmp / f"{trial.name}.yaml")]
    if gitops:
        # a first rollout records the last good template, which GitOps mode rolls back to
        _run_to_end(env, trial, [LWSFLOW, "rollout", f"lws/{trial.name}", "-n", NS, "--stages", "100%",
                                 "--kubeconfig", str(env.kubeconfig)])
        env.history.restart(trial.name)  # the GitOps rollout's history starts at the object as it is
        new["spec"]["rolloutStrategy"]["rollingUpdateConfiguration"]["partition"] = REPLICAS
        with env.faults_paused():
            env.kube.apply(LWS, new, field_manager="argocd-controller")
        target = []
    else:
        Path(target[1]).write_text(dump_yaml(new))
    cmd = [LWSFLOW, "rollout", f"lws/{trial.name}", "-n", NS, *target, "--stages", STAGES,
           # rollback: stage 1 fails after 2 virtual minutes (0.6 s wall); the rollback's budget (deadline x
           # stages) also pays for the controller's restarts, ~200 virtual s each at this speed
           "--deadline", "2m" if bad else "10m", "--kubeconfig", str(env.kubeconfig)]
    _kill_loop(env, trial, cmd, [trial.name], random.Random(seed), **kw)
    expected = "rolled-back" if bad else "succeeded"
    if trial.result != expected:
        trial.problems.append(f"ended {trial.result}, expected {expected}")
    _judge(env, trial, at_rest=gitops)
    trial.seconds = time.monotonic() - t0
    env.delete(trial.name)
    return trial


def _run_to_end(env: FaultEnv, trial: Trial, cmd: list[str]) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    if proc.returncode != 0:
        trial.problems.append(f"set-up rollout failed: {proc.stderr.strip()[-200:]}")


def kill_pair_trial(env: FaultEnv, tmp: Path, seed: int, **kw: Any) -> Trial:
    """`lwsflow rollout pair/NAME` (prefill 4 groups, decode 2) SIGKILLed and restarted: each role's
    history is clean, and decode passed stage k before prefill's partition moved for stage k."""
    t0 = time.monotonic()
    trial = Trial("kill-pair", f"kp{seed}")
    docs = {role: lws_manifest(f"{trial.name}-{role}", replicas=reps, load_s=40)
            for role, reps in (("prefill", REPLICAS), ("decode", 2))}
    for role, doc in docs.items():
        doc["metadata"]["labels"] = {L.PD_PAIR: trial.name, L.ROLE: role}
        env.create_ready(doc)
    mf = tmp / f"{trial.name}.yaml"
    mf.write_text("---\n".join(dump_yaml(release(d)) for d in docs.values()))
    cmd = [LWSFLOW, "rollout", f"pair/{trial.name}", "-n", NS, "--manifest", str(mf), "--stages", STAGES,
           "--deadline", "10m", "--kubeconfig", str(env.kubeconfig)]
    names = [f"{trial.name}-decode", f"{trial.name}-prefill"]  # the order each stage moves in
    _kill_loop(env, trial, cmd, names, random.Random(seed), **kw)
    if trial.result != "succeeded":
        trial.problems.append(f"ended {trial.result}, expected succeeded")
    with env.faults_paused():
        finals = {n: env.kube.get(LWS, NS, n) for n in names}
    for n, obj in finals.items():
        targets = state.RolloutState.from_object(obj).targets
        want_role = TARGETS if n.endswith("prefill") else targets
        if n.endswith("prefill") and targets != TARGETS:
            trial.problems.append(f"{n}: targets {targets}, expected {TARGETS}")
        trial.problems += [f"{n}: {p}" for p in history_problems(
            env.history.of(n), replicas=gate_replicas(obj), targets=want_role, result=trial.result)]
        trial.problems += [f"{n}: {p}" for p in final_problems(obj, trial.result)]
    trial.problems += decode_first_problems(env.history.passes_of(names[0]), env.history.of(names[1]),
                                            replicas=REPLICAS, targets=TARGETS)
    trial.seconds = time.monotonic() - t0
    for n in names:
        env.delete(n)
    return trial


def _kill_loop(env: FaultEnv, trial: Trial, cmd: list[str], names: list[str], rng: random.Random, *,
               max_kills: int = 3, window_s: tuple[float, float] = (0.0, 0.7),
               budget_s: float = 120.0) -> None:
    """Run ``cmd``, SIGKILL it 1..``max_kills`` times at random moments after it first touches
    ``names``, restart it each time, until the rollout of every LWS in ``names`` has an outcome."""
    kills_left = rng.randint(1, max_kills)
    with env.faults_paused():  # a rollout recorded before this one (GitOps set-up) is not its outcome
        old_ids = [state.RolloutState.from_object(env.kube.get(LWS, NS, n)).id for n in names]
    landed: list[str] = []  # where each kill landed: phase/stages passed/partition (per LWS, "+")
    runs = 0
    end = time.monotonic() + budget_s
    while time.monotonic() < end:
        runs += 1
        seen = sum(env.requests_for(n) for n in names)
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env={**os.environ, "PYTHONUNBUFFERED": "1"})
        killed = False
        try:
            if kills_left:
                # the kill moment is random within the controller's work, not its interpreter start-up:
                # count from its first request for the target
                _wait_for_contact(env, names, seen, proc)
                proc.wait(rng.uniform(*window_s))
            else:
                proc.wait(max(1.0, end - time.monotonic()))
        except subprocess.TimeoutExpired:
            if kills_left:
                os.kill(proc.pid, signal.SIGKILL)
                killed, kills_left = True, kills_left - 1
            else:
                proc.kill()
        out, err = proc.communicate(timeout=30)
        if "Traceback" in err:
            trial.problems.append(f"run {runs} printed a traceback: {err.strip().splitlines()[-1]}")
        with env.faults_paused():
            objs = [env.kube.get(LWS, NS, n) for n in names]
        states = [state.RolloutState.from_object(o) for o in objs]
        results = {FINAL.get(st.phase, st.phase or "not-started") if st.id and st.id != old else
                   "not-started" for st, old in zip(states, old_ids, strict=True)}
        result = results.pop() if len(results) == 1 else "mixed:" + ",".join(sorted(results))
        if killed:
            phase = next((st.phase for st, old in zip(states, old_ids, strict=True)
                          if st.phase and st.id != old), "not-started")
            landed.append(f"{phase}/passed={'+'.join(str(st.passed) for st in states)}/partition="
                          f"{'+'.join(str(partition(o)) for o in objs)}")
            if result in FINAL.values():  # killed after its last write: it had finished
                trial.result = result
                break
            continue
        trial.result = result
        want = {"succeeded": 0, "rolled-back": 1}
        if proc.returncode != want.get(result, -1):
            trial.problems.append(f"run {runs} exited {proc.returncode} with the rollout {result}: "
                                  f"{(err or out).strip().splitlines()[-1:]}")
        break
    else:
        trial.problems.append(f"no outcome within {budget_s:g}s ({runs} runs)")
    trial.detail.update(runs=runs, kills=len(landed), landed=landed)


def _wait_for_contact(env: FaultEnv, names: list[str], seen: int, proc: subprocess.Popen[str],
                      timeout_s: float = 30.0) -> None:
    end = time.monotonic() + timeout_s
    while sum(env.requests_for(n) for n in names) == seen and proc.poll() is None and \
            time.monotonic() < end:
        time.sleep(0.005)


# -- cluster faults during a stage ---------------------------------------------------------------------


def _when_partition(env: FaultEnv, name: str, partition: int, fn: Callable[[], None],
                    timeout_s: float = 60.0) -> threading.Thread:
    """Run ``fn`` on a thread as soon as the store has seen ``name`` at ``partition`` (new image)."""
    def wait() -> None:
        end = time.monotonic() + timeout_s
        while time.monotonic() < end:
            if any(c.partition == partition and c.image != OLD_IMAGE for c in env.history.of(name)):
                fn()
                return
            time.sleep(0.001)
    t = threading.Thread(target=wait, daemon=True)
    t.start()
    return t


def _in_loop(env: FaultEnv, fault: Fault, seen: dict[str, object]) -> None:
    """Inject on the cluster's own loop thread at the current virtual time (not from a foreign thread);
    ``seen["rv"]``: the store's resourceVersion right after it, to prove when it landed."""
    def fire() -> None:
        inject(env.cluster, fault)
        seen["rv"] = env.cluster.store.resource_version
    env.cluster.at(env.cluster.now(), fire)


def _leader(env: FaultEnv, name: str, group: int) -> dict:
    """Read from the store, not through the API: the fault must land while stage 2 waits for its
    groups (0.2 wall s at 200x), and a GET through a loaded server could take longer."""
    return env.cluster.store.get("pods", NS, f"{name}-{group}")


def cluster_fault_trial(env: FaultEnv, kind: str, seed: int = 0) -> Trial:
    """One rollout with ``kind`` happening in stage 2 (partition 2: groups 2 and 3 on the new image):

    * ``pod-crash``: a worker of group 3 (updated in stage 1) crashes -> the group is recreated and
      stage 2's gate waits for it; the rollout succeeds.
    * ``node-lost``: the node of group 3's leader fails -> its pods are lost and recreated elsewhere.
    * ``never-ready``: the new image never becomes Ready (a cluster-wide image fault) -> rollback.
    * ``foreign-change``: someone else applies another template -> abort, their template stays.
    """
    t0 = time.monotonic()
    trial = Trial(kind, f"c{kind[:4]}{seed}")
    name = trial.name
    base = lws_manifest(name, load_s=40)
    env.create_ready(base)
    new_image = NEW_IMAGE if kind != "never-ready" else f"vllm:2-nr{seed}"
    new = release(base, image=new_image)
    seen: dict[str, object] = {}
    if kind == "pod-crash":
        def crash() -> None:
            seen["uid"] = _leader(env, name, 3)["metadata"]["uid"]
            _in_loop(env, Fault(kind="crash", pod=f"{name}-3-1"), seen)
        waiter = _when_partition(env, name, 2, crash)
    elif kind == "node-lost":
        def lose() -> None:
            leader = _leader(env, name, 3)
            seen["uid"], seen["node"] = leader["metadata"]["uid"], leader["spec"]["nodeName"]
            _in_loop(env, Fault(kind="node-failure", node=str(seen["node"])), seen)
        waiter = _when_partition(env, name, 2, lose)
    elif kind == "never-ready":
        inject(env.cluster, Fault(kind="never-ready", image=new_image))
        waiter = None
    elif kind == "foreign-change":
        theirs = release(base, image="vllm:3")
        theirs["spec"]["rolloutStrategy"]["rollingUpdateConfiguration"]["partition"] = 0

        def overwrite() -> None:
            with env.faults_paused():
                env.kube.apply(LWS, theirs, field_manager="someone-else")
            seen["done"] = True
        waiter = _when_partition(env, name, 2, overwrite)
    else:
        raise ValueError(kind)
    try:
        trial.result = _in_process(env, name, new, deadline_s=120 if kind == "never-ready" else 600)
    except Exception as exc:
        trial.result, trial.problems = "raised", [f"{type(exc).__name__}: {exc}"]
        return trial
    if waiter is not None:
        waiter.join(5)
    expected = {"never-ready": "rolled-back", "foreign-change": "aborted"}.get(kind, "succeeded")
    if trial.result != expected:
        trial.problems.append(f"ended {trial.result}, expected {expected}")
    if kind == "foreign-change":
        trial.problems += _foreign_problems(env, name, bool(seen.get("done")))
    else:
        _judge(env, trial, new=new_image)
    if kind in ("pod-crash", "node-lost"):
        if "uid" not in seen:
            trial.problems.append(f"the {kind} was never injected (stage 2 not observed)")
        elif _leader(env, name, 3)["metadata"]["uid"] == seen["uid"]:
            trial.problems.append("group 3 was not recreated after the fault")
        passed_2 = [c.rv for c in env.history.of(name) if c.partition == 1 and c.image == new_image]
        if "rv" in seen and passed_2 and passed_2[0] < int(seen["rv"]):  # type: ignore[call-overload]
            trial.problems.append("the fault landed after stage 2 had passed: the trial tested nothing")
        trial.detail.update({k: v for k, v in seen.items() if k == "node"})
    if kind == "node-lost" and "node" in seen:
        inject(env.cluster, Fault(kind="node-recovery", node=str(seen["node"])))
    trial.seconds = time.monotonic() - t0
    env.delete(name)
    return trial


def _foreign_problems(env: FaultEnv, name: str, written: bool) -> list[str]:
    """After an abort: their template and partition stand, and the controller wrote no spec after them."""
    if not written:
        return ["the other writer's change was never made"]
    with env.faults_paused():
        final = env.kube.get(LWS, NS, name)
    problems = []
    if image_of(final) != "vllm:3":
        problems.append(f"their template was overwritten: image {image_of(final)}")
    part = partition(final)
    if part != 0:
        problems.append(f"their partition 0 was overwritten with {part}")
    hist = env.history.of(name)
    theirs = [i for i, c in enumerate(hist) if c.image == "vllm:3"]
    if not theirs or hist[theirs[0]:] != hist[theirs[0]:theirs[0] + 1]:
        problems.append("the spec changed again after the other writer's change: "
                        + ", ".join(f"{c.partition}@{c.image}" for c in hist))
    if state.RolloutState.from_object(final).phase != state.ABORTED:
        problems.append(f"phase {state.RolloutState.from_object(final).phase}, expected Aborted")
    return problems
