"""Blue-green of a single LeaderWorkerSet (issue 18, "and optionally for any LWS"): a second LWS
``<name>-<rev>`` in its own InferencePool, HTTPRoute weights shifted stage by stage through the stand-in
router, the old LWS and pool deleted at the end; a failing check shifts back and deletes green.

The pools tell the two LWS's pods apart by ``leaderworkerset.sigs.k8s.io/name``, which the LWS
controller puts on every pod (lws-semantics §a), so nothing is added to the pod templates.
"""

from __future__ import annotations

from lwsflow.controller.api import labels as L
from lwsflow.controller.bluegreen import kinds as K
from lwsflow.controller.kube.resources import INFERENCE_POOL, LWS
from lwsflow.controller.rollout import session
from lwsflow.controller.rollout.hooks import HookContext
from lwsflow.controller.rollout.options import RolloutOptions
from tests.rollout.bluegreen_kit import (
    NS,
    Env,
    assert_blue_pool_narrowed,
    assert_shares,
    env_fixture,
    only,
    shift_with_traffic,
)

env = env_fixture("lws")


def test_lws_blue_green_shifts_weights_stage_by_stage_and_deletes_blue(env: Env) -> None:
    def compared_with_blue(ctx: HookContext) -> None:
        assert ctx.kind == L.LWS_KIND and ctx.compare == {"aggregated": (ctx.name, "chat")}

    out, seen, _lines = shift_with_traffic(env, "vllm:2", blue="vllm:1", check=compared_with_blue)
    assert out.result == "succeeded", out.message
    assert_blue_pool_narrowed(env, L.NAME)  # the LWS controller's name label on every pod (§a)
    assert env.green_weights() == [None, 0, 10, 50, 100]
    assert_shares(seen, [10, 50, 100], env)
    green = f"chat-{K.LwsBlueGreen(env.kube, NS).revision({'': env.docs('vllm:2')[0]})}"
    assert env.names(LWS) == [green]
    pools = env.kube.list(INFERENCE_POOL, NS)[0]
    assert [p["metadata"]["name"] for p in pools] == [green]
    assert pools[0]["spec"]["selector"]["matchLabels"] == {L.MODEL: "chat", L.WORKER_INDEX: "0",
                                                           L.NAME: green}
    assert env.backend_refs() == only(green)
    assert out.message.endswith(f"traffic on lws/{green}")


def test_lws_blue_green_failing_check_shifts_back_and_deletes_green(env: Env) -> None:
    env.deploy_blue("vllm:1")
    opts = RolloutOptions(deadline_s=600, hooks=[lambda _ctx: False])
    out = session.run(env.kube, session.clock_for(env.kube), session.parse_target("lws/chat", NS), opts,
                      manifest=env.manifest("vllm:2"), strategy="blue-green", weights=[50, 100])
    assert out.result == "rolled-back", out.message
    assert "stage 1 (green 50%): readiness gate passed (green ready" in out.message  # issue 23
    assert env.green_weights() == [None, 0, 50, None]
    assert env.backend_refs() == only("chat")
    assert env.names(LWS) == ["chat"]
    assert env.names(INFERENCE_POOL) == ["chat"]
    blue = env.kube.get(LWS, NS, "chat")
    image = blue["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]["image"]
    assert image == "vllm:1"
