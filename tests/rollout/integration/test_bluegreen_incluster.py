"""The in-cluster controller drives a ``strategy: blue-green`` RolloutPolicy (issue 18), GitOps style.

Git syncs the new template onto the blue pair's two LWS in place (the overlay keeps each partition at
replicas, so no group moves); the controller runs the new template as a green pair in its own
InferencePool, shifts the HTTPRoute weights stage by stage (traffic observed through the stand-in llm-d
router), then folds back: the idle blue pair rolls in place to the new template, the route moves back
to the blue pool in one write, green is deleted, and the pool, the route and the partitions are what Git
has. Argo Rollouts' blue-green ends with the active service on the new ReplicaSet; here the Git-named
pair must survive (Argo CD would recreate a deleted one), so the new revision ends in it.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from lwsflow.controller.api import labels as L
from lwsflow.controller.bluegreen import plan as P
from lwsflow.controller.kube.resources import EVENT, HTTP_ROUTE, INFERENCE_POOL, LWS, ROLLOUT_POLICY
from lwsflow.controller.policy.wait import verdict
from lwsflow.controller.rollout import gate, session, state
from lwsflow.sim.router import Router
from reliability.incluster_env import RequestLog, install_rbac, running
from tests.rollout.bluegreen_kit import (
    BLUE,
    GREEN,
    NS,
    ROUTES,
    SLOWER,
    SPEC,
    Env,
    Seen,
    assert_shares,
    env_fixture,
    load,
    share_hook,
)

BLUE_GREEN_RBAC = Path(__file__).resolve().parents[3] / "overlays" / "rbac" / "bluegreen"

env = env_fixture("pair")


def frozen_blue(env: Env) -> None:
    """The blue pair as the GitOps overlay ships it: the partition at replicas."""
    env.deploy_blue()
    for r in P.ROLES:
        env.kube.merge_patch(LWS, NS, f"chat-{r}",
                             {"spec": {"rolloutStrategy": {"rollingUpdateConfiguration": {"partition": 2}}}})


def sync(env: Env, digest: str) -> None:
    """What Argo CD does with a new overlay: the new template on both LWS, the partition at replicas."""
    for r in P.ROLES:
        lwt = env.kube.get(LWS, NS, f"chat-{r}")["spec"]["leaderWorkerTemplate"]
        lwt["workerTemplate"]["spec"]["containers"][0]["image"] = f"r.example/vllm@{digest}"
        env.kube.merge_patch(LWS, NS, f"chat-{r}", {"spec": {
            "leaderWorkerTemplate": lwt,
            "rolloutStrategy": {"rollingUpdateConfiguration": {"partition": 2}}}})


def bg_policy(stages: list[dict[str, Any]], **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "lwsflow.io/v1alpha1", "kind": "RolloutPolicy",
            "metadata": {"name": "chat", "namespace": NS},
            "spec": {"targetRef": {"kind": "LeaderWorkerSetPair", "name": "chat"}, "strategy": "blue-green",
                     "stages": stages, "progressDeadline": "10m", **spec}}


def wait_status(env: Env, pred: Callable[[dict[str, Any]], bool], timeout: float = 120.0,
                log: Path | None = None) -> dict[str, Any]:
    end = time.monotonic() + timeout
    status: dict[str, Any] = {}
    while time.monotonic() < end:
        status = env.kube.get(ROLLOUT_POLICY, NS, "chat").get("status") or {}
        if pred(status):
            return status
        time.sleep(0.05)
    raise AssertionError(f"policy status {status}" + (f"\ncontroller log:\n{log.read_text()}" if log else ""))


def settled(env: Env, ctl: Any, timeout: float = 60.0) -> None:
    """Until the controller has acted on everything there is: its caches hold the policy and the blue
    pair as the API has them now, no rollout runs, and no policy is queued, being reconciled or
    scheduled for a later look (a settle window). An absence ("nothing starts again") is then
    established by the controller's own state, not hoped for after a fixed sleep."""
    end = time.monotonic() + timeout
    cached = [(ctl.cache.policies, ROLLOUT_POLICY, "chat"),
              *((ctl.cache.lws, LWS, f"chat-{r}") for r in P.ROLES)]

    def rv(obj: dict[str, Any] | None) -> int:
        return int(((obj or {}).get("metadata") or {}).get("resourceVersion") or 0)

    def running() -> bool:
        return any(w.thread.is_alive() for w in list(ctl.workers.values()))
    while True:
        seen = all(rv(inf.get(NS, name)) >= rv(env.kube.get(res, NS, name)) for inf, res, name in cached)
        if seen and not running():
            q = ctl.loop.queue
            with q._cond:  # the queue's own lock: its queued, scheduled and in-progress keys at one instant
                pending = bool(q._queue or q._delayed or q._processing)
            if not pending and not running():  # (a reconcile that started a rollout meanwhile shows here)
                return
        assert time.monotonic() < end, f"never settled: caches current {seen}, a rollout running {running()}"
        time.sleep(0.02)


def git_shape(env: Env) -> tuple[Any, Any, list[str]]:
    """The route's rules, the pool's selector and the LWS names: what Git holds."""
    return (env.kube.get(HTTP_ROUTE, NS, "chat")["spec"]["rules"],
            env.kube.get(INFERENCE_POOL, NS, "chat")["spec"]["selector"],
            sorted(o["metadata"]["name"] for o in env.kube.list(LWS, NS)[0]))


def images(env: Env) -> set[str]:
    return {env.kube.get(LWS, NS, f"chat-{r}")["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]
            ["containers"][0]["image"] for r in P.ROLES}


def controller(env: Env, **kw: Any) -> Any:
    from lwsflow.controller.incluster.manager import Controller

    return Controller(env.kube, session.clock_for(env.kube), namespace=NS, **kw)


def test_synced_template_runs_green_shifts_weights_and_folds_back_into_the_git_pair(env: Env) -> None:
    """Stage by stage 10/50/100 with the share served by green within the tolerance of each weight,
    then the fold-back: one pair under its Git names on the new template, route and pool as Git has
    them, the partitions frozen at replicas and the new template the stable one."""
    frozen_blue(env)
    before = git_shape(env)
    env.kube.create(ROLLOUT_POLICY, NS, bg_policy([
        {"weight": 10, "bake": "10s", "checks": [{"smoke": {}}]},
        {"weight": 50, "bake": "10s", "checks": [{"smoke": {}}]},
        {"weight": 100, "checks": [{"smoke": {}}]}]))
    seen: Seen = []
    with Router(env.sim.store, seed=11) as router:
        share = share_hook(router, seen)
        with running(controller(env, smoke=lambda _check: share)):
            stable = wait_status(env, lambda s: bool(s.get("stableRevision")))["stableRevision"]
            sync(env, GREEN)
            progressing = wait_status(env, lambda s: s.get("phase") == "Progressing")
            assert progressing["blueGreen"]["bluePair"] == "chat", progressing
            assert progressing["message"].startswith(f"green {progressing['blueGreen']['greenPair']} at ")
            done = wait_status(env, lambda s: s.get("phase") in ("Succeeded", "RolledBack", "Failed"), 180)
            # the routing of the folded-back pair, while the controller still runs (nothing else moves)
            router.routes.clear()
    assert done["phase"] == "Succeeded", done
    assert_shares(seen, [10, 50, 100], env)
    assert all("-decode-" in p for _w, _s, pods in seen for p in pods), seen
    green = progressing["blueGreen"]["greenPair"]
    assert seen[-1][2] and all(p.startswith(green) for p in seen[-1][2])  # 100%: green pods only
    # the route: green added at 0, then 10, 50, 100, then every request back on the blue pool (Git's rules)
    assert env.green_weights() == [None, 0, 10, 50, 100, None]
    assert git_shape(env) == before  # one pair, original names; route and pool as Git has them
    assert images(env) == {f"r.example/vllm@{GREEN}"}
    for r in P.ROLES:
        live = env.kube.get(LWS, NS, f"chat-{r}")
        assert gate.partition(live) == 2 and gate.lws_fully_rolled(live).passed, live["status"]
    assert {p["metadata"]["name"] for p in env.kube.list(INFERENCE_POOL, NS)[0]} == {"chat"}
    st = P.BlueGreenState.from_route(env.kube.get(HTTP_ROUTE, NS, "chat"))
    assert st.phase == P.SUCCEEDED and st.id == done["rolloutId"]
    assert done["stableRevision"] != stable  # the synced template is the stable one now
    decode = env.kube.get(LWS, NS, "chat-decode")
    assert done["stableRevision"] == state.template_hash(state.template_of(decode))
    assert done["blueGreen"] == {**done["blueGreen"], "phase": P.SUCCEEDED, "blueWeight": 100,
                                 "greenWeight": 0, "weights": [10, 50, 100]}
    assert [h["outcome"] for h in done["history"]] == ["Succeeded"]
    assert verdict(done, state.template_hash(state.template_of(decode))) == "Succeeded"
    reasons = [e["reason"] for e in env.kube.list(EVENT, NS)[0]
               if e["involvedObject"].get("kind") == "RolloutPolicy"]
    assert reasons.count("StagePassed") == 2 and "RolloutStarted" in reasons and "RolloutSucceeded" in reasons


def test_slower_green_is_caught_by_analysis_at_the_first_stage_and_git_shape_restored(
        tmp_path: Path) -> None:
    """A release Ready but 40% slower at p95 TTFT fails the policy's analysis (green vs blue) at the 50%
    stage: every request back on blue in one write, green deleted, the blue pair's template back to the
    stable one (as a partition rollback restores it), the policy RolledBack with the failed verdict."""
    from lwsflow.cli.controller import _analysis, _local_prometheus

    with Env(tmp_path, speed=20.0) as env:  # analysis measures in wall time (Prometheus's clock)
        frozen_blue(env)
        before = git_shape(env)
        env.kube.create(ROLLOUT_POLICY, NS, bg_policy([{"weight": 50}, {"weight": 100}], analysis=SPEC))
        local = _local_prometheus(env.kube, NS)
        try:
            with Router(env.sim.store, seed=5) as router, load(router), \
                    running(controller(env, analysis=_analysis(env.kube, str(env.sim.kubeconfig), local.url,
                                                               local))) as ctl:
                wait_status(env, lambda s: bool(s.get("stableRevision")))
                sync(env, SLOWER)
                release = state.template_hash(state.template_of(env.kube.get(LWS, NS, "chat-decode")))
                done = wait_status(env, lambda s: s.get("phase") in ("Succeeded", "RolledBack", "Failed"),
                                   240)
                settled(env, ctl)  # every pass the rollback's writes wake has run: nothing starts again
        finally:
            local.stop()
        assert done["phase"] == "RolledBack", done
        # the pipeline's controller mode reads this verdict on the release's decode template
        assert verdict(done, release) == "RolledBack", done["history"]
        assert "stage 1" in done["message"] and "green 50%" in done["message"], done["message"]
        assert [(v["stage"], v["phase"]) for v in done["analysis"]["verdicts"]] == [(1, "Failed")], done
        assert done["analysis"]["rolloutId"] == done["rolloutId"]
        assert env.green_weights() == [None, 0, 50, None]
        assert git_shape(env) == before
        assert images(env) == {f"r.example/vllm@{BLUE}"}  # restored to the stable template
        assert {p["metadata"]["name"] for p in env.kube.list(INFERENCE_POOL, NS)[0]} == {"chat"}
        assert all(gate.partition(env.kube.get(LWS, NS, f"chat-{r}")) == 2 for r in P.ROLES)
        st = P.BlueGreenState.from_route(env.kube.get(HTTP_ROUTE, NS, "chat"))
        assert st.phase == P.ROLLED_BACK and len(env.green_weights()) == 4


@contextlib.contextmanager
def controller_process(kubeconfig: Path, log: Path) -> Iterator[subprocess.Popen[bytes]]:
    lwsflow = Path(sys.executable).parent / "lwsflow"
    penv = {**os.environ, "LWSFLOW_LOG": "text"}
    penv.pop("KUBECONFIG", None)
    with log.open("ab") as sink:
        proc = subprocess.Popen([str(lwsflow), "controller", "run", "-n", NS, "--resync=1s",
                                 "--cluster-clock",
                                 "--metrics-addr=127.0.0.1:0", "--health-addr=127.0.0.1:0",
                                 f"--kubeconfig={kubeconfig}"],
                                stdout=sink, stderr=subprocess.STDOUT, env=penv)
        try:
            yield proc
        finally:
            if proc.poll() is None:
                proc.terminate()
                proc.wait(timeout=20)


class _Admin:
    """What install_rbac needs of an environment: the admin client and kubeconfig."""

    def __init__(self, env: Env) -> None:
        self.kube, self.kubeconfig = env.kube, env.sim.kubeconfig


def test_controller_killed_mid_shift_resumes_with_only_base_and_bluegreen_roles(env: Env,
                                                                                 tmp_path: Path) -> None:
    """`lwsflow controller run` as its own process with the controller ServiceAccount bound to exactly
    overlays/controller's role and overlays/rbac/bluegreen's: SIGKILLed while baking the 50% stage, a
    new process resumes from the route's persisted state, writes no weight twice and folds back."""
    frozen_blue(env)
    before = git_shape(env)
    env.kube.create(ROLLOUT_POLICY, NS, bg_policy([{"weight": 10, "bake": "20s"},
                                                   {"weight": 50, "bake": "120s"}, {"weight": 100}]))
    sa = install_rbac(_Admin(env), tmp_path)
    kubectl = Path(sys.executable).parent / "kubectl"
    proc = subprocess.run([str(kubectl), "--kubeconfig", str(env.sim.kubeconfig), "apply", "-k",
                           str(BLUE_GREEN_RBAC)], capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    log = tmp_path / "controller.log"
    with controller_process(sa, log) as first:
        wait_status(env, lambda s: bool(s.get("stableRevision")), log=log)
        sync(env, GREEN)
        end = time.monotonic() + 120
        while P.BlueGreenState.from_route(env.kube.get(HTTP_ROUTE, NS, "chat")).stage != 1:
            assert time.monotonic() < end and first.poll() is None, log.read_text()
            time.sleep(0.02)
        first.kill()
        first.wait()
    st = P.BlueGreenState.from_route(env.kube.get(HTTP_ROUTE, NS, "chat"))
    assert (st.phase, st.stage, st.passed) == (P.SHIFTING, 1, 1)
    with controller_process(sa, log) as second:
        done = wait_status(env, lambda s: s.get("phase") in ("Succeeded", "RolledBack", "Failed"), 180, log)
        assert second.poll() is None, log.read_text()
    text = log.read_text()
    assert done["phase"] == "Succeeded", text
    assert "orbidden" not in text and "Traceback" not in text, text
    assert env.green_weights() == [None, 0, 10, 50, 100, None]
    # the 50% weights were written once: every recorded state of stage 2 has the one start it was given
    states = [P.BlueGreenState.from_route(r.object) for r in env.rec.entries(ROUTES, "chat")]
    assert len({s.stage_started for s in states if s.stage == 1}) == 1, states
    assert text.count("stage-3: weights") == 1, text  # (stage 2's line may die with the first process)
    assert git_shape(env) == before
    assert images(env) == {f"r.example/vllm@{GREEN}"}
    assert (env.kube.get(INFERENCE_POOL, NS, "chat")["spec"]["selector"]["matchLabels"]
            == {L.MODEL: "chat", L.WORKER_INDEX: "0"})


def test_abort_shifts_back_deletes_green_and_retry_starts_again(env: Env) -> None:
    """`kubectl lwsflow abort` mid-bake: every request back on blue in one write, green deleted, the
    blue template restored, phase Aborted (no wait for the bake to end). Git syncing the same template
    again starts nothing until `kubectl lwsflow retry` (as for partition rollouts)."""
    from lwsflow.cli import kubectl_plugin

    frozen_blue(env)
    before = git_shape(env)
    env.kube.create(ROLLOUT_POLICY, NS, bg_policy([{"weight": 50, "bake": "1h"}, {"weight": 100}]))
    kc = ["-n", NS, "--kubeconfig", str(env.sim.kubeconfig)]
    with running(controller(env)) as ctl:
        wait_status(env, lambda s: bool(s.get("stableRevision")))
        sync(env, GREEN)
        first = wait_status(env, lambda s: (s.get("blueGreen") or {}).get("greenWeight") == 50)
        assert kubectl_plugin.main(["abort", "chat", *kc]) == 0
        done = wait_status(env, lambda s: s.get("phase") in ("Succeeded", "RolledBack", "Failed", "Aborted"))
        assert done["phase"] == "Aborted" and done["rolloutId"] == first["rolloutId"], done
        assert env.green_weights() == [None, 0, 50, None]
        assert git_shape(env) == before and images(env) == {f"r.example/vllm@{BLUE}"}
        sync(env, GREEN)  # Argo CD's self-heal puts Git's template back
        rv = env.kube.get(HTTP_ROUTE, NS, "chat")["metadata"]["resourceVersion"]
        settled(env, ctl)  # the sync seen, its settle window over and decided on: nothing starts
        assert env.kube.get(HTTP_ROUTE, NS, "chat")["metadata"]["resourceVersion"] == rv
        assert kubectl_plugin.main(["abort", "chat", *kc]) == 2  # nothing in progress
        assert kubectl_plugin.main(["retry", "chat", *kc]) == 0
        again = wait_status(env, lambda s: s.get("rolloutId") not in ("", first["rolloutId"])
                            and (s.get("blueGreen") or {}).get("greenWeight") == 50)
        assert again["phase"] == "Progressing", again


class Sent(RequestLog):
    """The controller's requests as the server saw them, and a wait for its quiet after a status write."""

    def reconciled(self, timeout: float = 30.0) -> None:
        """Until the controller has looked at the policy once more after its last status write (that
        write's own event wakes a reconcile, which lists the routes and writes nothing): quiet then."""
        end = time.monotonic() + timeout
        while True:
            with self.lock:
                log = list(self.log)
            wrote = max((i for i, r in enumerate(log) if r[2].startswith("rolloutpolicies")
                         and r[1] in ("patch", "update")), default=-1)
            if any(r[1:3] == ("list", "httproutes") for r in log[wrote + 1:]):
                return
            assert time.monotonic() < end, log[wrote:]
            time.sleep(0.02)


def test_waits_follow_the_informer_cache_not_a_get_loop(env: Env) -> None:
    """While green bakes, the controller sends no request at all: green's readiness, the blue pair's
    template and the route's abort/pause asks come from its informers (the LWS cache, and one watch of
    the HTTPRoutes for the controller's life), not a GET of each every poll nor a watch per wait; the
    abort reaches the bake through that route informer at once."""
    from lwsflow.cli import kubectl_plugin
    from lwsflow.controller.incluster.manager import Controller
    from lwsflow.controller.kube.client import Kube

    agent = "lwsflow-controller/bluegreen-cache"
    sent = Sent(env, agent)
    frozen_blue(env)
    env.kube.create(ROLLOUT_POLICY, NS, bg_policy([{"weight": 50, "bake": "1h"}, {"weight": 100}]))
    kube = Kube.connect(str(env.sim.kubeconfig))
    kube.api.user_agent = agent
    clock = session.clock_for(env.kube)
    with running(Controller(kube, session.clock_for(kube), namespace=NS)):
        wait_status(env, lambda s: bool(s.get("stableRevision")))
        sync(env, GREEN)
        wait_status(env, lambda s: (s.get("blueGreen") or {}).get("greenWeight") == 50)
        wait_event(env, "WeightsShifted")  # the 50% shift, announced after its route write
        sent.reconciled()  # the status of that step written and looked at again: the bake goes on alone
        t0 = time.monotonic()
        clock.sleep(60)  # 60 cluster seconds of bake: a dozen of the executor's polls (5 cluster s each)
        baking = sent.since(t0, watches=True)
        assert baking == [], baking
        assert kubectl_plugin.main(["abort", "chat", "-n", NS, "--kubeconfig", str(env.sim.kubeconfig)]) == 0
        done = wait_status(env, lambda s: s.get("phase") in ("Succeeded", "RolledBack", "Failed", "Aborted"))
    assert done["phase"] == "Aborted", done
    assert env.green_weights() == [None, 0, 50, None]
    watches = Counter(r[2] for r in sent.log if r[1] == "watch")
    # one watch of each for the controller's life (its informers), none per wait
    assert watches["httproutes"] == 1 and watches["leaderworkersets"] == 1, watches


def wait_event(env: Env, reason: str, count: int = 1, timeout: float = 60.0) -> None:
    """Until ``count`` events of ``reason`` are recorded (the executor's steps announce themselves)."""
    end = time.monotonic() + timeout
    while [e["reason"] for e in env.kube.list(EVENT, NS)[0]].count(reason) < count:
        assert time.monotonic() < end, [e["reason"] for e in env.kube.list(EVENT, NS)[0]]
        time.sleep(0.05)


def test_pause_holds_the_weights_until_resume(env: Env) -> None:
    """`kubectl lwsflow pause` holds a blue-green at its weights once the current stage passes (phase
    Paused, no further shift however long); `resume` goes on to the fold-back."""
    from lwsflow.cli import kubectl_plugin

    frozen_blue(env)
    env.kube.create(ROLLOUT_POLICY, NS, bg_policy([{"weight": 50, "bake": "100s"}, {"weight": 100}]))
    kc = ["-n", NS, "--kubeconfig", str(env.sim.kubeconfig)]
    with running(controller(env)):
        wait_status(env, lambda s: bool(s.get("stableRevision")))
        sync(env, GREEN)
        wait_status(env, lambda s: s.get("phase") == "Progressing")
        assert kubectl_plugin.main(["pause", "chat", *kc]) == 0
        wait_status(env, lambda s: s.get("phase") == "Paused")
        end = time.monotonic() + 60  # the 50% stage bakes and passes, then holds
        while "BlueGreenPaused" not in [e["reason"] for e in env.kube.list(EVENT, NS)[0]]:
            assert time.monotonic() < end, env.kube.get(ROLLOUT_POLICY, NS, "chat")["status"]
            time.sleep(0.05)
        clock = session.clock_for(env.kube)
        clock.sleep(75)  # 75 cluster seconds held (15 of the executor's looks at the route): nothing moves
        assert env.green_weights() == [None, 0, 50]
        held = env.kube.get(ROLLOUT_POLICY, NS, "chat")["status"]
        assert held["phase"] == "Paused" and held["blueGreen"]["greenWeight"] == 50, held
        assert kubectl_plugin.main(["resume", "chat", *kc]) == 0
        done = wait_status(env, lambda s: s.get("phase") in ("Succeeded", "RolledBack", "Failed"))
    assert done["phase"] == "Succeeded", done
    assert env.green_weights() == [None, 0, 50, 100, None]
    assert images(env) == {f"r.example/vllm@{GREEN}"}


def test_blue_green_policy_uses_only_the_base_and_bluegreen_roles(env: Env, tmp_path: Path) -> None:
    """The RBAC of `strategy: blue-green`, derived (issue 31.1): a blue-green policy with the smoke
    check (as `lwsflow controller run` wires it: green's pair, `pair/<green>`) and an analysis, run to
    Succeeded, makes only requests overlays/controller's roles and overlays/rbac/bluegreen's grant, and
    uses every verb of the latter a LeaderWorkerSetPair needs (the DisaggregatedSet verbs are the CLI's
    `ds/NAME --strategy blue-green`, tests/rollout/integration/test_rbac.py), the controller's own watch
    of the HTTPRoutes (controller.yaml: its waits follow them from an informer) included."""
    from lwsflow.cli.controller import _analysis, _smoke
    from lwsflow.controller.incluster.manager import Controller
    from lwsflow.controller.kube.client import Kube
    from lwsflow.controller.yamlio import load_yaml_documents
    from lwsflow.sim.apiserver import ApiServer

    def granted(*files: Path) -> set[tuple[str, str, str]]:
        return {(g, r, v) for f in files for d in load_yaml_documents(f) for rule in d.get("rules") or []
                for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]}

    frozen_blue(env)
    analysis = {"metrics": [{"name": "smoke", "provider": {"smoke": {}}, "successCondition": "result >= 1"}]}
    stages = [{"weight": 50, "checks": [{"smoke": {}}]}, {"weight": 100}]
    env.kube.create(ROLLOUT_POLICY, NS, bg_policy(stages, analysis=analysis))
    api = ApiServer(env.sim.cluster.store, token="bg-rbac", clock=env.sim.cluster.now, speed=env.sim.speed)
    api.start()
    try:
        kcfg = str(api.write_kubeconfig(tmp_path / "controller.kubeconfig"))
        kube = Kube.connect(kcfg)
        ctl = Controller(kube, session.clock_for(kube), namespace=NS, smoke=_smoke(kcfg),
                         analysis=_analysis(kube, kcfg, None, None))
        with running(ctl):
            wait_status(env, lambda s: bool(s.get("stableRevision")))
            sync(env, GREEN)
            done = wait_status(env, lambda s: s.get("phase") in ("Succeeded", "RolledBack", "Failed"), 180)
    finally:
        api.stop()
    assert done["phase"] == "Succeeded", done
    controller_rbac = BLUE_GREEN_RBAC.parents[1] / "controller"
    base = granted(controller_rbac / "clusterrole.yaml", controller_rbac / "role.yaml")
    bg = granted(BLUE_GREEN_RBAC / "clusterrole.yaml", BLUE_GREEN_RBAC / "controller.yaml")
    used = {(g, r, v) for g, r, v in api.verbs_used() if not r.startswith("/")}
    assert used <= base | bg, f"used but not granted: {used - base - bg}"
    pair_only = {t for t in bg if t[1] != "disaggregatedsets"}
    assert pair_only <= used, f"granted for a pair, unused: {pair_only - used}"
