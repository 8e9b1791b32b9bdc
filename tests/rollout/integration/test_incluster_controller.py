"""The in-cluster controller (``lwsflow controller run``'s loop) over HTTP against the embedded cluster.

GitOps path: Argo CD applies the new template with the partition frozen at replicas; nothing calls
``lwsflow rollout``; the controller stages it per its RolloutPolicy and mirrors the state into the
policy's status. The rollout state stays on the LWS (lws-semantics §b: partition semantics).
"""

from __future__ import annotations

import base64
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from lwsflow.cli import kubectl_plugin
from lwsflow.controller.errors import ApiError
from lwsflow.controller.incluster.manager import Controller
from lwsflow.controller.incluster.metrics import Endpoints, Metrics
from lwsflow.controller.incluster.notify import Notifier
from lwsflow.controller.kube.resources import EVENT, LWS, ROLLOUT_POLICY, SECRET
from lwsflow.controller.rollout import gate, state
from reliability.incluster_env import policy, running, sync, wait_policy
from reliability.rollout_env import NS, Env, lws_manifest, new_release
from reliability.skip_clock import SkipClock


def _controller(env: Env, **kw: object) -> Controller:
    return Controller(env.kube, env.clock(), namespace=NS, **kw)  # type: ignore[arg-type]


def _events(env: Env, kind: str, name: str) -> list[str]:
    items, _ = env.kube.list(EVENT, NS)
    return [e["reason"] for e in items if e["involvedObject"]["kind"] == kind
            and e["involvedObject"]["name"] == name]


def test_synced_template_is_staged_without_a_rollout_call(env: Env) -> None:
    """A new template synced frozen is rolled in stages 1 then 100%; status mirrors the target's
    annotations; events on the policy and the LWS; metrics count the outcome."""
    env.create_ready(lws_manifest("m", replicas=4, partition=4))
    env.kube.create(ROLLOUT_POLICY, NS, policy("p", "m", [{"groups": 1}, {"groups": "100%"}]))
    metrics = Metrics()
    ctl = _controller(env, metrics=metrics)
    ep = Endpoints(0, metrics, ready=ctl.is_ready, healthy=lambda: True).start()
    try:
        with running(ctl):
            idle = wait_policy(env, "p", lambda s: s.get("stableRevision") != "" and s.get("phase") == "Idle")
            stable = idle["status"]["stableRevision"]
            sync(env, "m", "vllm:2")
            p = wait_policy(env, "p", lambda s: s.get("phase") == "Succeeded")
            base = f"http://127.0.0.1:{ep.port}"
            assert httpx.get(f"{base}/readyz").status_code == 200
            assert httpx.get(f"{base}/healthz").status_code == 200
            text = httpx.get(f"{base}/metrics").text
    finally:
        ep.stop()
    st = p["status"]
    assert st["stableRevision"] != stable and st["canaryRevision"] == ""
    assert st["history"][-1]["outcome"] == "Succeeded" and st["history"][-1]["id"] == st["rolloutId"]
    lws = env.kube.get(LWS, NS, "m")
    assert state.RolloutState.from_object(lws).phase == state.SUCCEEDED
    assert gate.partition(lws) == 4  # refrozen for the next sync
    assert env.rec.partitions["m"] == [4, 3, 0, 4]  # stage 1 (one group), then all: never skipped
    assert "RolloutSucceeded" in _events(env, "RolloutPolicy", "p")
    assert "StagePassed" in _events(env, "LeaderWorkerSet", "m")
    assert 'lwsflow_rollouts_total{outcome="succeeded"} 1.0' in text
    assert "lwsflow_reconcile_duration_seconds_count" in text


def test_manual_gate_waits_for_promote(env: Env) -> None:
    """``pause: {}`` before stage 2: the partition stays at stage 1's until `kubectl lwsflow promote`."""
    env.create_ready(lws_manifest("g", replicas=4, partition=4))
    env.kube.create(ROLLOUT_POLICY, NS, policy("pg", "g", [{"groups": 1}, {"groups": "100%", "pause": {}}]))
    with running(Controller(env.kube, env.clock(), namespace=None)):  # --all-namespaces
        wait_policy(env, "pg", lambda s: bool(s.get("stableRevision")))
        sync(env, "g", "vllm:2")
        p = wait_policy(env, "pg", lambda s: s.get("phase") == "WaitingForPromotion")
        assert p["status"]["currentStage"] == 2 and "promote" in p["status"]["message"]
        clock = env.clock()
        t0 = clock.now()
        while clock.now() < t0 + 300:  # five virtual minutes: nothing moves without a human
            assert gate.partition(env.kube.get(LWS, NS, "g")) == 3
        assert kubectl_plugin.main(["promote", "pg", "-n", NS, "--kubeconfig", str(env.kubeconfig)]) == 0
        wait_policy(env, "pg", lambda s: s.get("phase") == "Succeeded")
        # nothing to promote any more: bad input, exit 2
        assert kubectl_plugin.main(["promote", "pg", "-n", NS, "--kubeconfig", str(env.kubeconfig)]) == 2
    assert env.rec.partitions["g"] == [4, 3, 0, 4]


def test_newer_template_supersedes_a_rollout_in_progress(env: Env) -> None:
    """A template synced mid-rollout aborts the running one (nothing overwritten) and a new rollout
    of the newest template starts from where the groups are; the floor holds throughout."""
    env.create_ready(lws_manifest("s", replicas=4, partition=4))
    env.kube.create(ROLLOUT_POLICY, NS, policy("ps", "s", [{"groups": 1, "bake": "10m"}, {"groups": "100%"}]))
    with running(_controller(env)):
        wait_policy(env, "ps", lambda s: bool(s.get("stableRevision")))
        sync(env, "s", "vllm:2")
        first = wait_policy(env, "ps",
                            lambda s: s.get("phase") == "Progressing" and s.get("currentStage") == 1)
        sync(env, "s", "vllm:3")
        env.rec.new_image = "vllm:3"
        p = wait_policy(env, "ps", lambda s: s.get("phase") == "Succeeded", timeout=90)
    outcomes = [h["outcome"] for h in p["status"]["history"]]
    assert outcomes == ["Aborted", "Succeeded"], outcomes
    assert p["status"]["history"][0]["id"] == first["status"]["rolloutId"]
    lws = env.kube.get(LWS, NS, "s")
    assert lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]["image"] == "vllm:3"
    assert env.rec.min_ready["s"] >= 3  # floor: replicas - maxUnavailable


class _Hook(BaseHTTPRequestHandler):
    got: list[dict] = []
    fail_first = 1

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if _Hook.fail_first > 0:  # the first delivery fails: the notifier retries
            _Hook.fail_first -= 1
            self.send_response(503)
        else:
            _Hook.got.append(body)
            self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *_a: object) -> None:
        return


def test_bad_release_rolls_back_and_notifies(env: Env) -> None:
    """A release that never gets Ready fails its stage and is rolled back; the webhook (URL from a
    Secret) receives Slack-compatible JSON, retried after a 503; the URL is in no status or event."""
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Hook)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{srv.server_address[1]}/hooks/secret-token"
    env.kube.create(SECRET, NS, {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "slack"},
                                 "data": {"url": base64.b64encode(url.encode()).decode()}})
    env.create_ready(lws_manifest("b", replicas=2, partition=2))
    env.kube.create(ROLLOUT_POLICY, NS, policy(
        "pb", "b", [{"groups": 1}, {"groups": "100%"}], progressDeadline="2m",
        notifications={"webhooks": [{"secretKeyRef": {"name": "slack", "key": "url"}}]}))
    try:
        with running(_controller(env, notifier=Notifier(env.kube, base_s=0.05))):
            wait_policy(env, "pb", lambda s: bool(s.get("stableRevision")))
            sync(env, "b", "vllm:bad", **{"sim.lwsflow.io/never-ready": "true"})
            p = wait_policy(env, "pb", lambda s: s.get("phase") == "RolledBack", timeout=90)
            deadline = threading.Event()
            for _ in range(100):
                if any("RolledBack" in g["text"] for g in _Hook.got):
                    break
                deadline.wait(0.05)
    finally:
        srv.shutdown()
    texts = [g["text"] for g in _Hook.got]
    assert any("RolledBack" in t for t in texts), texts
    assert set(_Hook.got[0]) == {"text"}
    items, _ = env.kube.list(EVENT, NS)
    assert "secret-token" not in json.dumps(p) + json.dumps(items)
    assert "RolloutRolledBack" in _events(env, "RolloutPolicy", "pb")
    assert p["status"]["stableRevision"] == p["status"]["observedTemplateHash"]  # back on stable


def test_pipeline_waits_for_the_controller_verdict(env: Env) -> None:
    """The pipeline step's controller mode: it finds the policy owning the target and waits for the
    controller's verdict on the synced template instead of driving the rollout itself."""
    from lwsflow.components import controller_mode
    from lwsflow.controller.policy import wait
    from lwsflow.controller.rollout import state as rstate

    env.create_ready(lws_manifest("w", replicas=2, partition=2))
    env.kube.create(ROLLOUT_POLICY, NS, policy("pw", "w", [{"groups": 1}, {"groups": "100%"}]))
    assert wait.find_policy(env.kube, NS, "lws", "w")["metadata"]["name"] == "pw"
    assert wait.find_policy(env.kube, NS, "ds", "w") is None
    phases: list[str] = []
    with running(_controller(env)):
        wait_policy(env, "pw", lambda s: bool(s.get("stableRevision")))
        # the step's controller mode: apply as a sync would (frozen), then only wait
        release = new_release(lws_manifest("w", replicas=2, partition=2))
        data = controller_mode.sync_and_wait(env.kube, env.clock(), [release],
                                             wait.find_policy(env.kube, NS, "lws", "w"), 600, phases.append)
        assert data["result"] == "succeeded" and data["mode"] == "controller"
        assert env.rec.partitions["w"] == [2, 1, 0, 2]  # staged by the controller, not by the step
        # the shorter deadline first: a rollout started before the policy edit keeps the 30m it began
        # with (SpecApplied False), past the 900 s wait below (seen beside two CPU hogs)
        gen = env.kube.merge_patch(ROLLOUT_POLICY, NS, "pw", {"spec": {"progressDeadline": "2m"}})[
            "metadata"]["generation"]
        wait_policy(env, "pw", lambda s: s.get("observedGeneration") == gen)
        lws = sync(env, "w", "vllm:bad", **{"sim.lwsflow.io/never-ready": "true"})
        bad = rstate.template_hash(rstate.template_of(lws))
        st = wait.await_verdict(env.kube, env.clock(), NS, "pw", bad, timeout_s=900)
        assert wait.verdict(st, bad) == "RolledBack"
    assert any("Progressing" in p for p in phases)


def test_bad_input(env: Env, capsys: pytest.CaptureFixture[str]) -> None:
    """`controller run` refuses bad flags with exit 2 and one line naming the field; a policy the
    controller cannot use gets phase Failed with the field in its message (the target untouched)."""
    from lwsflow.cli import main

    for argv, field in ((["-n", "a", "-A"], "namespace"), (["--lease-duration", "2s"], "lease-duration"),
                        (["--metrics-addr", "0.0.0.0:8080"], "metrics-addr"),
                        (["--lease-duration", "soon"], "lease-duration")):
        assert main(["controller", "run", *argv]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and field in err[0], err
    env.create_ready(lws_manifest("x", replicas=2, partition=2))
    before = env.kube.get(LWS, NS, "x")["metadata"]["resourceVersion"]
    bad = policy("px", "x", [{"groups": 1}, {"groups": "100%"}])
    env.kube.create(ROLLOUT_POLICY, NS, bad)
    with pytest.raises(ApiError) as exc:  # the CRD's CEL rules refuse what a rule can check, at once
        env.kube.merge_patch(ROLLOUT_POLICY, NS, "px", {"spec": {"stages": [{"groups": 1}]}})
    assert exc.value.status == 422 and "the last stage must be groups: 100%" in str(exc.value)
    # a condition's grammar only the controller checks: it says what is wrong in the user's words
    metric = {"name": "errors", "provider": {"prometheus": {"query": "up"}}, "successCondition": "result >"}
    env.kube.merge_patch(ROLLOUT_POLICY, NS, "px", {"spec": {"analysis": {"metrics": [metric]}}})
    with running(_controller(env)):
        p = wait_policy(env, "px", lambda s: s.get("phase") == "Failed")
    assert p["status"]["message"] == ("analysis metric errors: successCondition: 'result >': syntax error at "
                                      "the end: invalid syntax")
    assert env.kube.get(LWS, NS, "x")["metadata"]["resourceVersion"] == before


def test_stage_checks_run_per_stage(env: Env, tmp_path: Path) -> None:
    """Each stage runs its own checks after its gate: stage 1's command check passes (it sees the
    stage in its environment), stage 2's HTTP check fails (nothing listens), so stage 2 fails and
    the release is rolled back; metrics count both results, the policy gets CheckFailed."""
    marker = tmp_path / "stages.txt"
    env.create_ready(lws_manifest("c", replicas=2, partition=2))
    record = {"command": {"command": ["sh", "-c", f'echo "$LWSFLOW_STAGE" >> {marker}']}}
    probe = {"name": "probe", "http": {"url": "http://127.0.0.1:9/ready", "timeoutSeconds": 2}}
    env.kube.create(ROLLOUT_POLICY, NS, policy("pc", "c", [{"groups": 1, "checks": [record]},
                                                          {"groups": "100%", "checks": [probe]}]))
    metrics = Metrics()
    with running(_controller(env, metrics=metrics)):
        wait_policy(env, "pc", lambda s: bool(s.get("stableRevision")))
        sync(env, "c", "vllm:2")
        p = wait_policy(env, "pc", lambda s: s.get("phase") == "RolledBack", timeout=90)
    assert marker.read_text().split() == ["1"]
    assert "stage 2 hook failed" in p["status"]["message"]
    assert "CheckFailed" in _events(env, "RolloutPolicy", "pc")
    text = metrics.render().decode()
    assert 'lwsflow_check_results_total{result="passed"} 1.0' in text
    assert 'lwsflow_check_results_total{result="failed"} 1.0' in text
    assert 'lwsflow_rollouts_total{outcome="rolled-back"} 1.0' in text


def test_on_failure_hold_keeps_the_canary_for_a_human(env: Env) -> None:
    """``onFailure: hold``: a failed stage pauses (canary groups kept, nothing rolled back) until a
    human aborts (then it rolls back) or fixes and resumes."""
    env.create_ready(lws_manifest("h", replicas=2, partition=2))
    env.kube.create(ROLLOUT_POLICY, NS, policy("ph", "h", [{"groups": 1}, {"groups": "100%"}],
                                               progressDeadline="2m", onFailure="hold"))
    with running(_controller(env)):
        wait_policy(env, "ph", lambda s: bool(s.get("stableRevision")))
        sync(env, "h", "vllm:bad", **{"sim.lwsflow.io/never-ready": "true"})
        p = wait_policy(env, "ph", lambda s: s.get("phase") == "Paused", timeout=90)
        assert "deadline" in p["status"]["message"]
        lws = env.kube.get(LWS, NS, "h")
        assert gate.partition(lws) == 1 and state.RolloutState.from_object(lws).active
        assert kubectl_plugin.main(["abort", "ph", "-n", NS, "--kubeconfig", str(env.kubeconfig)]) == 0
        p = wait_policy(env, "ph", lambda s: s.get("phase") == "RolledBack", timeout=90)
    assert p["status"]["observedTemplateHash"] == p["status"]["stableRevision"]


def test_pair_manual_gate(env: Env) -> None:
    """A P/D pair with a manual gate before stage 2: both roles pass stage 1 and hold their
    partitions until promoted (the marks live on the decode LWS, the role each stage moves first)."""
    from lwsflow.controller.api import labels as L

    for role, n in (("prefill", 4), ("decode", 2)):
        env.create_ready(lws_manifest(f"q-{role}", replicas=n, partition=n,
                                      labels={L.PD_PAIR: "q", L.ROLE: role}))
    p = policy("pq", "q", [{"groups": 1}, {"groups": "100%", "pause": {}}])
    p["spec"]["targetRef"]["kind"] = "LeaderWorkerSetPair"
    env.kube.create(ROLLOUT_POLICY, NS, p)
    with running(_controller(env)):
        wait_policy(env, "pq", lambda s: bool(s.get("stableRevision")))
        for role in ("prefill", "decode"):
            sync(env, f"q-{role}", "vllm:2")
        wait_policy(env, "pq", lambda s: s.get("phase") == "WaitingForPromotion", timeout=60)
        held = {r: gate.partition(env.kube.get(LWS, NS, f"q-{r}")) for r in ("prefill", "decode")}
        assert held == {"prefill": 3, "decode": 1}
        clock = env.clock()
        t0 = clock.now()
        while clock.now() < t0 + 300:
            assert {r: gate.partition(env.kube.get(LWS, NS, f"q-{r}")) for r in held} == held
        assert kubectl_plugin.main(["promote", "pq", "-n", NS, "--kubeconfig", str(env.kubeconfig)]) == 0
        wait_policy(env, "pq", lambda s: s.get("phase") == "Succeeded", timeout=90)
    assert env.rec.partitions["q-prefill"] == [4, 3, 0, 4] and env.rec.partitions["q-decode"] == [2, 1, 0, 2]


def test_pipeline_wait_does_not_count_a_manual_gate(env: Env) -> None:
    """The step's wait budget is cluster time; a person at a manual gate is not (the embedded
    cluster runs x200 here): a gate held for longer than the whole budget still ends in the verdict."""
    from lwsflow.components import controller_mode
    from lwsflow.controller.policy import wait

    env.create_ready(lws_manifest("h", replicas=2, partition=2))
    # a stage's own deadline is 30m of cluster time (9 wall s at x200): the default 10m (3 wall s) ran out
    # on a loaded machine while the promoted stage's groups came up; the step's budget is what is tested
    env.kube.create(ROLLOUT_POLICY, NS, policy("ph", "h", [{"groups": 1}, {"groups": "100%", "pause": {}}],
                                               progressDeadline="30m"))
    phases: list[tuple[str, int]] = []  # each line the step logged, with its clock's reads until then
    step_clock = _Counted(SkipClock(env.cluster, env.sim.speed))  # exact: no interpolation to lag a skip
    with running(_controller(env)):
        wait_policy(env, "ph", lambda s: bool(s.get("stableRevision")))

        def person() -> None:
            end = time.monotonic() + 60
            # the step has seen the gate and read its clock since (held from then on): only now look
            while not (phases and phases[-1][0].endswith("phase WaitingForPromotion")
                       and step_clock.reads > phases[-1][1]):
                assert time.monotonic() < end, phases
                time.sleep(0.01)
            env.cluster.advance(900)  # the person looks for 15 virtual minutes (skipped): past the budget
            assert kubectl_plugin.main(["promote", "ph", "-n", NS, "--kubeconfig", str(env.kubeconfig)]) == 0

        helper = threading.Thread(target=person, daemon=True)
        helper.start()
        release = new_release(lws_manifest("h", replicas=2, partition=2))
        data = controller_mode.sync_and_wait(env.kube, step_clock, [release],
                                             wait.find_policy(env.kube, NS, "lws", "h"), 600,
                                             lambda ph: phases.append((ph, step_clock.reads)))
        helper.join(timeout=30)
    assert data["result"] == "succeeded", data
    assert "WaitingForPromotion" in " ".join(ph for ph, _ in phases)
    assert env.rec.partitions["h"] == [2, 1, 0, 2]


class _Counted:
    """A clock that counts its reads (``now``)."""

    def __init__(self, clock: SkipClock) -> None:
        self.clock, self.reads = clock, 0

    def now(self) -> float:
        self.reads += 1
        return self.clock.now()

    def sleep(self, seconds: float) -> None:
        self.clock.sleep(seconds)

    def wall(self, seconds: float) -> float:
        return self.clock.wall(seconds)


def test_pipeline_wait_lasts_through_wall_time_checks(env: Env) -> None:
    """A stage check runs in wall time (an analysis waits on Prometheus's clock); on a cluster faster
    than real time it outlasts the step's cluster-time budget, so the wait also lasts the checks'
    ``timeoutSeconds`` in wall seconds (the demo's analysis at x600 exposed it)."""
    from lwsflow.components import controller_mode
    from lwsflow.controller.policy import wait

    checks = [{"command": {"command": ["sleep", "2"], "timeoutSeconds": 10}}]
    env.create_ready(lws_manifest("c", replicas=2, partition=2))
    env.kube.create(ROLLOUT_POLICY, NS, policy("pc", "c", [{"groups": 1, "checks": checks},
                                                         {"groups": "100%"}]))
    assert wait.check_budget_s(wait.find_policy(env.kube, NS, "lws", "c")) == 10
    with running(_controller(env)):
        wait_policy(env, "pc", lambda s: bool(s.get("stableRevision")))
        release = new_release(lws_manifest("c", replicas=2, partition=2))
        # 2 wall seconds of check are far more than 1 s of cluster time at this cluster's speed
        data = controller_mode.sync_and_wait(env.kube, env.clock(), [release],
                                             wait.find_policy(env.kube, NS, "lws", "c"), 1, lambda _p: None)
        assert data["result"] == "succeeded", data


def test_blue_green_policy_without_a_pool_is_refused_in_the_status(env: Env) -> None:
    """A blue-green policy's pair is adopted like a partition one; a synced template with no
    InferencePool/HTTPRoute to shift is refused in one status message naming what is missing, and
    nothing but the adoption is written to the pair (docs/controller.md "Blue-green")."""
    from lwsflow.controller.api import labels as L

    for role in ("decode", "prefill"):
        env.create_ready(lws_manifest(f"c-{role}", replicas=1, partition=1,
                                      labels={L.PD_PAIR: "c", L.ROLE: role}))
    bg = policy("pbg", "c", [{"weight": 10}, {"weight": 100}], strategy="blue-green")
    bg["spec"]["targetRef"]["kind"] = "LeaderWorkerSetPair"
    env.kube.create(ROLLOUT_POLICY, NS, bg)
    with running(_controller(env)):
        wait_policy(env, "pbg", lambda s: bool(s.get("stableRevision")))
        sync(env, "c-decode", "vllm:2")
        p = wait_policy(env, "pbg", lambda s: "refused" in (s.get("message") or ""))
        before = env.kube.get(LWS, NS, "c-decode")["metadata"]["resourceVersion"]
    assert p["status"]["phase"] == "Idle", p["status"]
    assert "exactly one InferencePool" in p["status"]["message"], p["status"]["message"]
    live = env.kube.get(LWS, NS, "c-decode")
    assert live["metadata"]["resourceVersion"] == before and gate.partition(live) == 1
    assert not state.RolloutState.from_object(live).id
