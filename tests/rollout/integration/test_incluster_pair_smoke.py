"""A P/D pair policy's smoke check is of the pair, as `lwsflow rollout pair/NAME --smoke` does: both
roles and the prefill→decode KV hand-off (``pd-prefill``, ``pd-decode``, ``pd-metrics``), not only
the LWS of the role whose engine ran the stage. The in-cluster controller runs with only the
ServiceAccount's token bound to overlays/controller's roles, on pods that serve (stand-in engines)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from lwsflow.cli.controller import _smoke
from lwsflow.controller.api import labels as L
from lwsflow.controller.incluster.manager import Controller
from lwsflow.controller.kube.client import Kube
from lwsflow.controller.kube.resources import EVENT, ROLLOUT_POLICY
from lwsflow.controller.policy.model import SmokeCheck
from lwsflow.controller.rollout import session
from lwsflow.controller.rollout.hooks import Hook, HookContext, HookResult, run_hook
from lwsflow.sim.engine import ENGINE_MODE_ANNOTATION
from reliability.incluster_env import install_rbac, policy, running, sync, wait_policy
from reliability.ports import ReservedPort
from reliability.rollout_env import NS, Env
from tests.rollout.rbac_kit import served, serving

# the stand-in engines' port: from the kernel, held while this test process runs (reliability/ports.py)
_ENGINE_PORT = ReservedPort()
__all__ = ["served"]  # the fixture, from rbac_kit

HANDOFF = {"pd-prefill", "pd-decode", "pd-metrics"}
ENDED = ("Succeeded", "RolledBack", "Failed")


def _pair(env: Env) -> None:
    """Pair ``c``: 2 prefill and 1 decode groups, each pod's engine serving its role (the role label
    on the pod template, which the stand-in engine reads, as llm-d's would its flags)."""
    port = _ENGINE_PORT.port
    for role, n in (("prefill", 2), ("decode", 1)):
        doc = serving(f"c-{role}", port, replicas=n, partition=n, labels={L.PD_PAIR: "c", L.ROLE: role})
        doc["spec"]["leaderWorkerTemplate"]["workerTemplate"]["metadata"]["labels"] = {L.ROLE: role}
        env.create_ready(doc)
    smoke = [{"smoke": {}}]
    p = policy("c", "c", [{"groups": 1, "checks": smoke}, {"groups": "100%", "checks": smoke}])
    p["spec"]["targetRef"]["kind"] = "LeaderWorkerSetPair"
    env.kube.create(ROLLOUT_POLICY, NS, p)


def _recorded(factory: Callable[[SmokeCheck], Hook], seen: list[tuple[HookContext, HookResult]]) -> \
        Callable[[SmokeCheck], Hook]:
    """The controller's smoke factory, each result kept with the context it was given."""
    def make(check: SmokeCheck) -> Hook:
        hook = factory(check)

        def smoke(ctx: HookContext) -> HookResult:
            res = run_hook(hook, ctx)
            seen.append((ctx, res))
            return res
        return smoke
    return make


def _run(env: Env, tmp_path: Path, prefill_ann: dict[str, str]) -> tuple[dict, list[tuple[HookContext,
                                                                                          HookResult]]]:
    """Sync both roles to a new image (prefill's template with ``prefill_ann``) under the controller
    with only the ServiceAccount's token and the real smoke hook; the policy's status once it ends."""
    _pair(env)
    sa = install_rbac(env, tmp_path)
    kube = Kube.connect(str(sa))
    seen: list[tuple[HookContext, HookResult]] = []
    ctl = Controller(kube, session.clock_for(kube), namespace=NS, smoke=_recorded(_smoke(str(sa)), seen),
                     resync_s=0.5)
    with running(ctl):
        wait_policy(env, "c", lambda s: bool(s.get("stableRevision")))
        sync(env, "c-decode", "vllm:2")
        sync(env, "c-prefill", "vllm:2", **prefill_ann)
        status = wait_policy(env, "c", lambda s: s.get("phase") in ENDED, timeout=120)["status"]
    return status, seen


def test_pair_policy_smoke_runs_the_handoff_and_succeeds(served: Env, tmp_path: Path) -> None:
    status, seen = _run(served, tmp_path, {})
    assert status["phase"] == "Succeeded", status
    details = [r.detail for _c, r in seen]
    assert seen and all(r.ok for _c, r in seen), details
    # each stage: decode (first to move) smokes its LWS after its gate; after prefill's, both roles
    # are on the stage's revision and the pair is smoked, hand-off included
    assert [(c.stage, c.kind, c.name) for c, _r in seen] == [
        (1, "LeaderWorkerSet", "c-decode"), (1, "LeaderWorkerSetPair", "c"),
        (2, "LeaderWorkerSet", "c-decode"), (2, "LeaderWorkerSetPair", "c")], details
    for ctx, res in seen:
        ran = {part.split(" x")[0] for part in res.detail.split("(", 1)[1].rstrip(")").split(", ")}
        assert (ran >= HANDOFF) == (ctx.kind == "LeaderWorkerSetPair"), (ctx, res.detail)


def test_a_broken_handoff_in_the_new_prefill_rolls_the_pair_back(served: Env, tmp_path: Path) -> None:
    """The new prefill hands out KV transfer parameters its side channel does not know: every role's
    own endpoint checks pass, only the hand-off shows it. The pair is rolled back, and the status, the
    Events and the hook's result say which check failed and why."""
    env = served
    status, seen = _run(env, tmp_path, {ENGINE_MODE_ANNOTATION: "broken-handoff"})
    assert status["phase"] == "RolledBack", status
    message = status["message"]
    assert "smoke failed: pd-" in message and "@pair/c " in message, message
    failed = [r.detail for _c, r in seen if not r.ok]
    assert failed and all(d.startswith("smoke failed: pd-") for d in failed), failed
    events = {e["reason"]: e["message"] for e in env.kube.list(EVENT, NS)[0]
              if e["involvedObject"].get("kind") == "RolloutPolicy"}
    assert "smoke failed: pd-" in events["CheckFailed"], events
