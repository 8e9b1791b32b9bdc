"""GPU sizing: the reference cases, the preference order, and clear failures when nothing fits."""

from __future__ import annotations

import pytest

from lwsflow.components.sizing import memory_needs, size_model
from lwsflow.controller.errors import InvalidInput
from tests.render.render_helpers import H100, LLAMA_8B, LLAMA_70B, LLAMA_405B, build, model


def test_405b_bf16_reference_needs_two_h100_nodes() -> None:
    rs = size_model(build(LLAMA_405B), "llama-405b").roles["aggregated"]
    assert (rs.tp, rs.pp, rs.size, rs.gpus_per_pod, rs.gpus_per_replica) == (8, 2, 2, 8, 16)
    assert (rs.replicas, rs.gpus_total, rs.nodes_total) == (2, 32, 4)
    assert rs.weights_gib == pytest.approx(405e9 * 2 / 2**30, abs=0.1)  # 754.4 GiB
    # 2 x 126 layers x 8 kv heads x 128 x 2 bytes x 8192 tokens x 8 sequences
    assert rs.kv_reserve_gib == pytest.approx(2 * 126 * 8 * 128 * 2 * 8192 * 8 / 2**30, abs=0.1)
    assert rs.memory_usable_gib == pytest.approx(16 * 80 * 0.9)
    assert rs.memory_headroom_gib == pytest.approx(rs.memory_usable_gib - rs.memory_needed_gib, abs=0.2)
    assert rs.pool == "h100x8" and rs.fits_with_surge


def test_8b_is_one_pod_on_one_gpu_and_groups_share_a_node() -> None:
    rs = size_model(build(LLAMA_8B), "llama-8b").roles["aggregated"]
    assert (rs.tp, rs.pp, rs.size, rs.gpus_per_pod, rs.gpus_per_replica, rs.gpus_total) == (1, 1, 1, 1, 1, 3)
    assert rs.nodes_total == 1 and rs.nodes_per_replica == 0.125


def test_70b_takes_the_smallest_tp_that_fits_within_one_node() -> None:
    rs = size_model(build(LLAMA_70B), "llama-70b").roles["aggregated"]
    assert (rs.tp, rs.pp, rs.size, rs.gpus_per_pod) == (4, 1, 1, 4)  # TP=2 offers 144 GiB < 151.5 needed
    short = size_model(build(model(LLAMA_70B, maxModelLen=1024)), "llama-70b").roles["aggregated"]
    assert (short.tp, short.size) == (2, 1)  # a small KV reserve lets TP=2 fit


def test_fp8_405b_fits_one_node() -> None:
    rs = size_model(build(model(LLAMA_405B, dtype="fp8")), "llama-405b").roles["aggregated"]
    assert (rs.tp, rs.pp, rs.size, rs.gpus_per_replica) == (8, 1, 1, 8)


def test_kv_reserve_grows_when_tp_exceeds_kv_heads() -> None:
    spec = build(model(LLAMA_70B, architecture={"layers": 80, "attentionHeads": 64, "kvHeads": 2,
                                                 "headDim": 128})).model("llama-70b")
    _, kv1 = memory_needs(spec, 8192, 1)
    _, kv8 = memory_needs(spec, 8192, 8)
    assert kv8 == pytest.approx(kv1 * 4)  # 8 ranks share 2 KV heads: each head kept 4 times



def _fail(catalog_doc_model: dict, **kw: object) -> InvalidInput:
    with pytest.raises(InvalidInput) as info:
        cat = build(catalog_doc_model, **kw)  # type: ignore[arg-type]
        size_model(cat, catalog_doc_model["name"])
    return info.value


def test_pool_too_small_for_one_group_says_by_how_much() -> None:
    err = _fail(LLAMA_405B, pools=[{**H100, "nodes": 1}])
    assert err.field == "models[llama-405b].nodePool"
    msg = str(err)
    assert "754.4 GiB of weights + 31.5 GiB KV = 785.9 GiB" in msg
    assert "1 nodes x 8 x 80 GiB x 0.9) offers 576.0 GiB" in msg
    assert "short by 209.9 GiB" in msg and "2 nodes" in msg


def test_no_tensor_parallel_size_divides_the_heads() -> None:
    arch = {"layers": 126, "attentionHeads": 12, "kvHeads": 4, "headDim": 128}
    err = _fail(model(LLAMA_405B, architecture=arch))
    assert err.field == "models[llama-405b].architecture.attentionHeads"
    assert "largest tensor-parallel size dividing attentionHeads=12" in str(err) and "is 4" in str(err)
    assert "short by" in str(err)


def test_more_pipeline_stages_than_layers() -> None:
    err = _fail(model(LLAMA_405B, architecture={"layers": 1, "attentionHeads": 128, "kvHeads": 8,
                                                "headDim": 128}))
    assert err.field == "models[llama-405b].architecture.layers"


def test_replicas_times_group_larger_than_pool() -> None:
    err = _fail(model(LLAMA_405B, replicas=9))
    assert err.field == "models[llama-405b].replicas"
    assert "9 replicas x 2 node(s) per group need 18 nodes but pool h100x8 has 16; short by 2" in str(err)


def test_environment_override_is_named_when_it_overflows() -> None:
    cat = build(LLAMA_405B, environments=[{"name": "prod", "overrides": {"llama-405b": {"replicas": 12}}}])
    assert size_model(cat, "llama-405b").roles["aggregated"].replicas == 2
    with pytest.raises(InvalidInput) as info:
        size_model(cat, "llama-405b", "prod")
    assert info.value.field == "environments[prod].overrides.llama-405b.replicas"


def test_rollout_that_can_never_progress_is_refused() -> None:
    err = _fail(model(LLAMA_405B, rollout={"maxUnavailable": "25%", "maxSurge": 0}))
    assert err.field == "models[llama-405b].rollout.maxUnavailable"
    assert "both resolve to 0 for 2 replicas" in str(err)


def test_room_for_surge() -> None:
    full = size_model(build(model(LLAMA_405B, replicas=8, rollout={"maxSurge": 1})), "llama-405b")
    rs = full.roles["aggregated"]
    assert (rs.nodes_total, rs.max_surge, rs.nodes_with_surge, rs.fits_with_surge) == (16, 1, 18, False)
    ok = size_model(build(model(LLAMA_405B, replicas=7, rollout={"maxSurge": "10%"})), "llama-405b")
    assert ok.roles["aggregated"].nodes_with_surge == 16 and ok.roles["aggregated"].fits_with_surge


def test_disaggregated_roles_are_sized_on_their_own_and_share_the_pool() -> None:
    pd = model(LLAMA_70B, prefill={"replicas": 2, "maxModelLen": 65536}, decode={"replicas": 3})
    pd.pop("replicas")
    sizing = size_model(build(pd), "llama-70b")
    assert sizing.mode == "disaggregatedset" and set(sizing.roles) == {"prefill", "decode"}
    prefill, decode = sizing.roles["prefill"], sizing.roles["decode"]
    assert prefill.max_model_len == 65536 and decode.max_model_len == 8192
    assert prefill.kv_reserve_gib == pytest.approx(8 * decode.kv_reserve_gib, abs=0.2)
    assert (prefill.tp, decode.tp, decode.replicas) == (8, 4, 3)  # the long context needs more GPUs

    big = model(LLAMA_405B, prefill={"replicas": 5}, decode={"replicas": 4})
    big.pop("replicas")
    err = _fail(big)
    assert err.field == "models[llama-405b].prefill.replicas"
    assert "need 10 nodes but pool h100x8 has 8 (8 taken by the model's other role)" in str(err)


def test_disaggregatedset_roles_scale_to_zero_together() -> None:
    pd = model(LLAMA_70B, prefill={"replicas": 0}, decode={"replicas": 2})
    pd.pop("replicas")
    err = _fail(pd)
    assert err.field == "models[llama-70b].prefill.replicas" and "every role" in str(err)
    zero = size_model(build(model(pd, decode={"replicas": 0})), "llama-70b")
    assert [r.replicas for r in zero.roles.values()] == [0, 0]
    pair = size_model(build(model(pd, pdMode="lws-pair")), "llama-70b")  # two LWS: no such rule
    assert pair.roles["decode"].replicas == 2
