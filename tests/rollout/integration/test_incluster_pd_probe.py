"""A RolloutPolicy's ``pdProbe`` (issue 17): the in-cluster controller runs the cross-revision P/D
compatibility probe before a GitOps-synced pair's rollout mixes revisions, with the stand-in engines'
KV layouts (an incompatible layout fails the hand-off at the NIXL handshake, as vLLM's compatibility
check does: vllm PR #29503). Refused: nothing written to the pair (lws-semantics §d: the synced
partition stays at replicas, so no group moves), the policy's status and a Warning Event say why and
recommend blue-green, and the template is not probed again until Git syncs another. All-at-once: each
role moves in one step (``maxSurge = replicas``), capacity checked. llm-d's advice for the same risk
(docs/operations/disaggregation/vllm.md "Rollouts"): a new InferencePool per upgrade."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import ValidationError

from lwsflow.components.pd_probe import PROBE_LABEL, pd_probe
from lwsflow.controller.api import labels as L
from lwsflow.controller.incluster.manager import Controller
from lwsflow.controller.kube.client import Kube
from lwsflow.controller.kube.resources import EVENT, LWS, POD, ROLLOUT_POLICY
from lwsflow.controller.pd import incluster as pd_gate
from lwsflow.controller.policy.model import RolloutPolicySpec
from lwsflow.controller.rollout import gate, session, state
from lwsflow.controller.yamlio import load_yaml_documents
from lwsflow.sim.apiserver import ApiServer
from reliability.incluster_env import OVERLAY, install_rbac, policy, running, sync, wait_passes, wait_policy
from reliability.ports import ReservedPort
from reliability.rollout_env import (
    LAYOUTS,
    NEW_LAYOUT,
    NS,
    OLD,
    SAME_LAYOUT,
    SPEED,
    TOKEN,
    Env,
    lws_manifest,
    make_env,
)

# the stand-in engines' port: from the kernel, held while this test process runs (reliability/ports.py)
_ENGINE_PORT = ReservedPort()
PORT = _ENGINE_PORT.port
REPLICAS = {"prefill": 2, "decode": 1}


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Env]:
    e = make_env(tmp_path, images=LAYOUTS)
    try:
        yield e
    finally:
        e.close()


def _pair(env: Env) -> None:
    """A pair ``chat`` whose pods run stand-in engines of their role serving model ``chat``."""
    for role, n in REPLICAS.items():
        m = lws_manifest(f"chat-{role}", replicas=n, size=1, load_s=15, image=OLD,
                         labels={L.PD_PAIR: "chat", L.ROLE: role})
        tmpl = m["spec"]["leaderWorkerTemplate"]["workerTemplate"]
        tmpl["metadata"]["labels"] = {L.ROLE: role, L.MODEL: "chat"}
        tmpl["metadata"]["annotations"][L.SERVING_PORT] = str(PORT)
        env.create_ready(m)


def _policy(env: Env, **probe: str) -> None:
    p = policy("pp", "chat", [{"groups": 1}, {"groups": "100%"}], pdProbe=dict(probe))
    p["spec"]["targetRef"]["kind"] = "LeaderWorkerSetPair"
    env.kube.create(ROLLOUT_POLICY, NS, p)


def _sync_pair(env: Env, image: str) -> None:
    for role in REPLICAS:
        sync(env, f"chat-{role}", image)


def _image(obj: dict) -> str:
    return str(obj["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]["image"])


def _events(env: Env) -> list[dict]:
    items, _ = env.kube.list(EVENT, NS)
    return [e for e in items if e["involvedObject"]["kind"] == "RolloutPolicy"
            and e["involvedObject"]["name"] == "pp"]


def _no_canary_left(env: Env) -> None:
    names = [o["metadata"]["name"] for o in env.kube.list(LWS, NS)[0]]
    assert not [n for n in names if n.endswith("-pdp")], names
    assert not env.kube.list(POD, NS, label_selector=f"{PROBE_LABEL}=true")[0]


def _granted(*files: Path) -> set[tuple[str, str, str]]:
    out = set()
    for path in files:
        for doc in load_yaml_documents(path):
            for rule in doc["rules"]:
                out |= {(g, r, v) for g in rule["apiGroups"] for r in rule["resources"]
                        for v in rule["verbs"]}
    return out


def test_incompatible_sync_is_refused_held_then_a_compatible_one_rolls(env: Env, tmp_path: Path) -> None:
    """An incompatible release synced by GitOps: refused, no group moved, status and a Warning Event
    name the failed directions and recommend `strategy: blue-green`; the loop does not probe it again.
    The next template from Git (same KV layout) is probed again, passes and rolls in stages. The
    requests made are exactly the base role's plus the opt-in pdprobe role's (least privilege)."""
    _pair(env)
    _policy(env)
    api = ApiServer(env.cluster.store, token=TOKEN, clock=env.cluster.now, speed=SPEED)
    api.start()
    kube = Kube.connect(str(api.write_kubeconfig(tmp_path / "controller.kubeconfig")))
    ctl = Controller(kube, session.clock_for(kube), namespace=NS, pd_probe=pd_probe(kube), resync_s=0.1)
    try:
        with running(ctl):
            wait_policy(env, "pp", lambda s: bool(s.get("stableRevision")))
            _sync_pair(env, NEW_LAYOUT)
            p = wait_policy(env, "pp", lambda s: s.get("phase") == "Failed", timeout=90)
            st = p["status"]
            rec = st["pdProbe"]
            assert rec["verdict"] == "Refused", rec
            assert rec["failed"] == ["new prefill -> old decode", "old prefill -> new decode"]
            for text in ("refused, nothing changed", "new prefill -> old decode; old prefill -> new decode",
                         "`strategy: blue-green`", "spec.pdProbe.onIncompatible: all-at-once"):
                assert text in st["message"], st["message"]
            assert "NIXL compatibility hash mismatch" in rec["message"]  # vLLM's own words
            ready = next(c for c in st["conditions"] if c["type"] == "Ready")
            assert (ready["status"], ready["reason"]) == ("False", "PDProbeRefused")
            wait_passes(ctl, 6)  # six resync passes: the held template is neither probed nor rolled again
            again = env.kube.get(ROLLOUT_POLICY, NS, "pp")["status"]
            assert again["pdProbe"] == rec and again["phase"] == "Failed"
            refusals = [e for e in _events(env) if e["reason"] == "PDProbeRefused"]
            assert len(refusals) == 1 and refusals[0]["type"] == "Warning"
            assert "new prefill -> old decode" in refusals[0]["message"]
            assert not [e for e in _events(env) if e["reason"] == "RolloutFailed"]
            for role, n in REPLICAS.items():
                obj = env.kube.get(LWS, NS, f"chat-{role}")
                assert env.rec.partitions[f"chat-{role}"] == [0, n]  # only the sync's freeze
                assert not state.RolloutState.from_object(obj).id
                pods = env.kube.list(POD, NS, label_selector=f"{L.NAME}=chat-{role}")[0]
                assert len(pods) == n and all(p["spec"]["containers"][0]["image"] == OLD for p in pods)
            _no_canary_left(env)

            _sync_pair(env, SAME_LAYOUT)  # a new template from Git: probed again
            p = wait_policy(env, "pp", lambda s: s.get("phase") == "Succeeded", timeout=120)
    finally:
        api.stop()
    assert p["status"]["pdProbe"]["verdict"] == "Compatible"
    assert "KV hand-off passed new prefill -> old decode, old prefill -> new decode" in \
        p["status"]["pdProbe"]["message"]
    assert {"PDProbeCompatible", "RolloutStarted", "RolloutSucceeded"} <= {e["reason"] for e in _events(env)}
    assert all(_image(env.kube.get(LWS, NS, f"chat-{r}")) == SAME_LAYOUT for r in REPLICAS)
    assert 1 in env.rec.partitions["chat-prefill"]  # staged as before: one group first
    _no_canary_left(env)
    base = _granted(OVERLAY / "clusterrole.yaml", OVERLAY / "role.yaml")
    probe_role = _granted(OVERLAY / "pdprobe" / "clusterrole.yaml")
    used = {(g, r, v) for g, r, v in api.verbs_used() if not r.startswith("/")}
    assert used <= base | probe_role, f"used but not granted: {used - base - probe_role}"
    assert probe_role <= used and not probe_role & base, (probe_role, used)


def test_all_at_once_moves_each_role_in_one_step(env: Env) -> None:
    """``onIncompatible: all-at-once``: capacity checked, both roles get a full surge and move in one
    stage (no partition between replicas and 0), both lowered before either role's stage passes."""
    _pair(env)
    _policy(env, onIncompatible="all-at-once")
    with running(Controller(env.kube, env.clock(), namespace=NS, pd_probe=pd_probe(env.kube))):
        wait_policy(env, "pp", lambda s: bool(s.get("stableRevision")))
        _sync_pair(env, NEW_LAYOUT)
        p = wait_policy(env, "pp", lambda s: s.get("phase") == "Succeeded", timeout=120)
    rec = p["status"]["pdProbe"]
    assert rec["verdict"] == "AllAtOnce" and "fit" in rec["message"], rec
    assert rec["failed"] == ["new prefill -> old decode", "old prefill -> new decode"]
    assert "PDProbeAllAtOnce" in {e["reason"] for e in _events(env)}
    for role, n in REPLICAS.items():
        obj = env.kube.get(LWS, NS, f"chat-{role}")
        ruc = obj["spec"]["rolloutStrategy"]["rollingUpdateConfiguration"]
        assert (ruc["maxSurge"], ruc["maxUnavailable"]) == (n, 0) and _image(obj) == NEW_LAYOUT
        assert env.rec.partitions[f"chat-{role}"] == [0, n, 0, n], role  # freeze, switch, refreeze
    events = sorted(e for e in env.rec.order if e[1] in ("chat-prefill", "chat-decode"))
    frozen = {n: min(rv for rv, m, w, v in events if m == n and w == "partition" and v > 0) for n in
              ("chat-prefill", "chat-decode")}
    lowered = [rv for rv, n, w, v in events if w == "partition" and v == 0 and rv > frozen[n]]
    passed = [rv for rv, _n, w, v in events if w == "passed" and v == 1]
    assert len(passed) == 2 and sum(1 for rv in lowered if rv < min(passed)) == 2, events
    _no_canary_left(env)


def test_a_controller_without_the_probe_wired_holds_the_template(env: Env) -> None:
    """A policy asks for the probe but this controller has none: never roll unprobed (NotRun)."""
    for role, n in REPLICAS.items():
        env.create_ready(lws_manifest(f"chat-{role}", replicas=n, size=1, labels={L.PD_PAIR: "chat",
                                                                                   L.ROLE: role}))
    _policy(env)
    with running(Controller(env.kube, env.clock(), namespace=NS)):
        wait_policy(env, "pp", lambda s: bool(s.get("stableRevision")))
        _sync_pair(env, "vllm:2")
        p = wait_policy(env, "pp", lambda s: s.get("phase") == "Failed")
    assert p["status"]["pdProbe"]["verdict"] == "NotRun"
    assert "no P/D probe is wired into this controller" in p["status"]["message"]
    assert all(gate.partition(env.kube.get(LWS, NS, f"chat-{r}")) == n for r, n in REPLICAS.items())


def _spec(kind: str, **extra: object) -> dict:
    stages = [{"groups": "100%"}] if kind == "DisaggregatedSet" else [{"groups": 1}, {"groups": "100%"}]
    return {"targetRef": {"kind": kind, "name": "m"}, "stages": stages, **extra}


def test_pd_probe_is_refused_where_nothing_can_mix_or_it_comes_too_late() -> None:
    """A plain LWS has no P/D roles; a DS has no partition, so its controller mixes revisions as soon
    as Git applies the roles (lws-semantics §f); blue-green never mixes. Each says so in one message."""
    for kind, extra, text in (
            ("LeaderWorkerSet", {}, "a LeaderWorkerSet has no prefill and decode roles"),
            ("DisaggregatedSet", {}, "probe it before the sync"),
            ("LeaderWorkerSetPair", {"strategy": "blue-green", "stages": [{"weight": 100}]},
             "blue-green never mixes revisions")):
        with pytest.raises(ValidationError, match=text):
            RolloutPolicySpec.model_validate(_spec(kind, pdProbe={}, **extra))
        RolloutPolicySpec.model_validate(_spec(kind, pdProbe={"enabled": False}, **extra))
    spec = RolloutPolicySpec.model_validate(_spec("LeaderWorkerSetPair", pdProbe={}))
    assert spec.pdProbe is not None and spec.pdProbe.onIncompatible == "refuse" and pd_gate.enabled(spec)
    assert not pd_gate.enabled(RolloutPolicySpec.model_validate(_spec("LeaderWorkerSetPair")))
    with pytest.raises(ValidationError, match="onIncompatible"):
        RolloutPolicySpec.model_validate(_spec("LeaderWorkerSetPair", pdProbe={"onIncompatible": "often"}))


def test_a_held_template_is_released_by_a_new_template_a_policy_change_or_time() -> None:
    """Refused holds (template key, generation); a probe that could not run is tried again after
    RETRY_NOT_RUN_S of cluster time (its canaries may fit later)."""
    objs = [lws_manifest("d"), lws_manifest("p")]
    key = pd_gate.template_key(objs)
    t0 = 1_000_000.0
    refused = {"pdProbe": {"templateKey": key, "observedGeneration": 3, "verdict": "Refused",
                           "time": state.iso(t0)}}
    assert pd_gate.holds(refused, objs, 3, t0 + 10 ** 6) is not None
    assert pd_gate.holds(refused, objs, 4, t0) is None  # the policy changed
    newer = copy.deepcopy(objs)
    newer[1]["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]["image"] = "vllm:9"
    assert pd_gate.holds(refused, newer, 3, t0) is None  # Git synced another template
    not_run = {"pdProbe": {**refused["pdProbe"], "verdict": "NotRun"}}
    assert pd_gate.holds(not_run, objs, 3, t0 + pd_gate.RETRY_NOT_RUN_S - 1) is not None
    assert pd_gate.holds(not_run, objs, 3, t0 + pd_gate.RETRY_NOT_RUN_S) is None
    compatible = {"pdProbe": {**refused["pdProbe"], "verdict": "Compatible"}}
    assert pd_gate.holds(compatible, objs, 3, t0) is None


def test_an_interrupted_all_at_once_switch_resumes_as_one_stage() -> None:
    """A new leader resumes a switch with its persisted single stage, not the policy's stages (whose
    second stage the switch's rollout state does not have)."""
    from lwsflow.controller.rollout.options import RolloutOptions

    live = {r: lws_manifest(f"chat-{r}", replicas=n) for r, n in REPLICAS.items()}
    opts = RolloutOptions(stages="1,100%")
    assert pd_gate.resumed(opts, live) is opts  # no rollout in progress
    for o in live.values():
        o["metadata"]["annotations"] = state.RolloutState(id="r1", phase=state.RUNNING, stages="100%",
                                                          targets=[gate.replicas(o)]).annotations()
    assert pd_gate.resumed(opts, live).stages == "100%"
    for o in live.values():
        o["metadata"]["annotations"] = state.RolloutState(id="r1", phase=state.RUNNING, stages="1,100%",
                                                          targets=[1, gate.replicas(o)]).annotations()
    assert pd_gate.resumed(opts, live) is opts  # a staged rollout resumes with the policy's stages


def test_the_pipeline_step_takes_a_refusal_as_its_verdict() -> None:
    """The rollout step's controller mode waits for a verdict on the template it synced: a refused
    template is one (it is held, not rolled), so the step fails at once instead of timing out."""
    from lwsflow.controller.policy import wait

    status = {"phase": "Failed", "stableRevision": "aaa",
              "pdProbe": {"templateKey": "ddd,ppp", "verdict": "Refused", "observedGeneration": 1}}
    assert wait.verdict(status, "ppp") == wait.verdict(status, "ddd") == "Refused"
    assert wait.verdict(status, "eee") is None
    assert wait.verdict({**status, "pdProbe": {**status["pdProbe"], "verdict": "Probing"}}, "ppp") is None


def test_enforced_rbac_base_role_cannot_probe_the_opt_in_role_can(env: Env, tmp_path: Path) -> None:
    """`lwsflow controller run` as a process with only the ServiceAccount's token (RBAC enforced by the
    embedded API server): with the base role the probe's requests are 403, so the template is held
    (NotRun, naming the opt-in role) and nothing moves; once `overlays/controller/pdprobe` is applied
    the probe is tried again after RETRY_NOT_RUN_S of cluster time, passes and the pair rolls."""
    import subprocess
    import sys

    from tests.rollout.integration.test_incluster_rbac_enforced import controller_process

    _pair(env)
    _policy(env)
    sa = install_rbac(env, tmp_path)
    log = tmp_path / "controller.log"
    with controller_process(sa, log):
        try:
            wait_policy(env, "pp", lambda s: bool(s.get("stableRevision")), timeout=60)
            _sync_pair(env, SAME_LAYOUT)
            p = wait_policy(env, "pp", lambda s: (s.get("pdProbe") or {}).get("verdict") == "NotRun")
            assert "Forbidden" in p["status"]["pdProbe"]["message"]
            assert "kubectl apply -k overlays/controller/pdprobe" in p["status"]["pdProbe"]["message"]
            assert all(env.rec.partitions[f"chat-{r}"] == [0, n] for r, n in REPLICAS.items())
            kubectl = Path(sys.executable).parent / "kubectl"
            proc = subprocess.run([str(kubectl), "--kubeconfig", str(env.kubeconfig), "apply", "-k",
                                   str(OVERLAY / "pdprobe")], capture_output=True, text=True, timeout=60,
                                  check=False)
            assert proc.returncode == 0, proc.stderr
            p = wait_policy(env, "pp", lambda s: s.get("phase") == "Succeeded", timeout=120)
        except AssertionError as exc:
            raise AssertionError(f"{exc}\ncontroller log:\n{log.read_text()}") from None
    assert p["status"]["pdProbe"]["verdict"] == "Compatible"
    assert all(_image(env.kube.get(LWS, NS, f"chat-{r}")) == SAME_LAYOUT for r in REPLICAS)
    _no_canary_left(env)


def test_a_compatible_verdict_is_not_probed_again_for_the_same_templates() -> None:
    """A rollout that failed to start after a Compatible probe (a transient API error) is started again
    on the next pass without a second canary model load; another template or generation is probed."""
    from lwsflow.controller.clock import WallClock
    from lwsflow.controller.rollout.options import RolloutOptions

    live = {r: lws_manifest(f"chat-{r}", replicas=n) for r, n in REPLICAS.items()}
    spec = RolloutPolicySpec.model_validate(_spec("LeaderWorkerSetPair", pdProbe={}))
    key = pd_gate.template_key([live["decode"], live["prefill"]])
    calls: list[object] = []

    def probe(ctx: object) -> object:
        calls.append(ctx)
        raise AssertionError("probed again")

    opts = RolloutOptions(stages="1,100%")
    last = {"templateKey": key, "observedGeneration": 2, "verdict": "Compatible"}
    out = pd_gate.guard(None, WallClock(), NS, spec, opts, probe, live, 2, calls.append,  # type: ignore[arg-type]
                        last)
    assert out is opts and calls == []
    with pytest.raises(AssertionError, match="probed again"):
        pd_gate.guard(None, WallClock(), NS, spec, opts, probe, live, 3, lambda _r: None,  # type: ignore[arg-type]
                      last)
