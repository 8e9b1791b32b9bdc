"""The stand-in EPP's choices: pool membership, decode by load, P/D by prompt length (docs/llm-d.md).

llm-d's defaults (reference: ../shared/docs/smoke-reference.md §4.2): decode chosen by queue depth and
KV-cache use scraped from vLLM's /metrics; the prefix-based P/D decider disaggregates when the uncached
prompt, estimated as characters / 4, reaches ``nonCachedTokens`` (0 disables it).
"""

from __future__ import annotations

from lwsflow.sim.router import epp
from tests.router.router_helpers import LONG_PROMPT, SHORT_PROMPT, Pods, add_pod, pool


def _set_load(pods: Pods, name: str, *, waiting: float = 0, kv: float = 0) -> None:
    m = pods.engines[name].engine.metrics
    m.waiting.labels(**m.lv()).set(waiting)
    m.kv_usage.labels(**m.lv()).set(kv)


def test_pool_members_follow_selector_phase_and_target_port(pods: Pods) -> None:
    pods.start("p0", "prefill")
    pods.start("d0", "decode")
    add_pod(pods.store, "pending", "decode", "127.9.9.9", phase="Pending")
    pods.store.create("pods", {"metadata": {"name": "other", "namespace": "default", "labels": {"app": "x"}},
                               "status": {"phase": "Running", "podIP": "127.9.9.8"}})
    members = epp.pool_endpoints(pods.store, pool(pods.port))
    assert [(m.pod, m.role, m.port) for m in members] == [("d0", "decode", pods.port),
                                                         ("p0", "prefill", pods.port)]


def test_metrics_parse_queue_and_kv_usage() -> None:
    text = ('vllm:num_requests_waiting{engine="0",model_name="m"} 3.0\n'
            'vllm:num_requests_running{engine="0",model_name="m"} 2.0\n'
            'vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.25\n')
    assert epp.parse_load(text) == epp.Load(queue=5.0, kv_usage=0.25)
    # older vLLM: gpu_cache_usage_perc instead of kv_cache_usage_perc
    assert epp.parse_load('vllm:gpu_cache_usage_perc{engine="0"} 0.5\n').kv_usage == 0.5


def test_decode_is_the_least_loaded_by_scraped_metrics(pods: Pods) -> None:
    for n in ("d0", "d1", "d2"):
        pods.start(n, "decode")
    _set_load(pods, "d0", waiting=4)
    _set_load(pods, "d1", waiting=1, kv=0.9)
    _set_load(pods, "d2", waiting=1, kv=0.2)
    members = epp.pool_endpoints(pods.store, pool(pods.port))
    body = {"model": "m", "prompt": SHORT_PROMPT}
    assert epp.decide(members, body, 16).decode.pod == "d2"  # same queue as d1, less KV used
    _set_load(pods, "d2", waiting=6)
    _set_load(pods, "d0", waiting=0)
    assert epp.decide(members, body, 16).decode.pod == "d0"  # the choice follows the load


def test_unreachable_decode_is_not_picked(pods: Pods) -> None:
    pods.start("d0", "decode")
    pods.start("d1", "decode")
    _set_load(pods, "d1", waiting=9)
    pods.engines.pop("d0").stop()
    members = epp.pool_endpoints(pods.store, pool(pods.port))
    assert epp.decide(members, {"prompt": "x"}, 16).decode.pod == "d1"


def test_disaggregates_by_prompt_length_threshold(pods: Pods) -> None:
    pods.start("p0", "prefill")
    pods.start("d0", "decode")
    members = epp.pool_endpoints(pods.store, pool(pods.port))
    assert epp.estimated_tokens({"prompt": "x" * 64}) == 16
    assert epp.decide(members, {"prompt": "x" * 64}, 16).prefill.pod == "p0"  # at the threshold
    assert epp.decide(members, {"prompt": "x" * 63}, 16).prefill is None  # 15 tokens: below it
    assert epp.decide(members, {"prompt": LONG_PROMPT}, 0).prefill is None  # 0 turns P/D off
    chat = {"messages": [{"role": "user", "content": "y" * 80}]}
    assert epp.should_disaggregate(chat, 20) and not epp.should_disaggregate(chat, 21)


def test_no_prefill_pod_means_decode_only(pods: Pods) -> None:
    pods.start("d0", "decode")
    members = epp.pool_endpoints(pods.store, pool(pods.port))
    d = epp.decide(members, {"prompt": LONG_PROMPT}, 16)
    assert (d.decode.pod, d.prefill) == ("d0", None)


def test_equally_loaded_pods_share_the_traffic_by_a_seeded_draw(pods: Pods) -> None:
    """llm-d's max-score picker picks at random among the best-scored pods; by name, idle pods would
    never get a request while the first one answers quickly (and an analysis would see no data)."""
    import random

    for n in ("d0", "d1", "d2"):
        pods.start(n, "decode")
    members = epp.pool_endpoints(pods.store, pool(pods.port))
    body = {"model": "m", "prompt": SHORT_PROMPT}
    rng = random.Random(7)
    picks = [epp.decide(members, body, 16, rng=rng).decode.pod for _ in range(60)]
    assert all(10 <= picks.count(p) <= 30 for p in ("d0", "d1", "d2")), picks
    rng = random.Random(7)
    assert [epp.decide(members, body, 16, rng=rng).decode.pod for _ in range(60)] == picks  # reproducible
    _set_load(pods, "d1", waiting=1)
    assert "d1" not in {epp.decide(members, body, 16, rng=rng).decode.pod for _ in range(20)}  # load first
