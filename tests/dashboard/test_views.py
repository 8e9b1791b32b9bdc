"""The dashboard's views and charts as tables: objects in, what the page shows out (no server)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from lwsflow.controller.api import labels as L
from lwsflow.pipelines.dashboard import charts, views
from lwsflow.pipelines.dashboard.cache import Cache
from lwsflow.pipelines.dashboard.pages import Renderer

STAGES = [{"groups": 1, "bake": "5m"}, {"groups": "50%"}, {"groups": "100%", "pause": {}}]


def pol(name: str, phase: str = "", cur: int = 0, ns: str = "default", **status: Any) -> dict[str, Any]:
    s = {"phase": phase, "currentStage": cur, "stages": 3, **status} if phase else {}
    return {"metadata": {"name": name, "namespace": ns, "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"targetRef": {"kind": "LeaderWorkerSet", "name": name}, "stages": STAGES}, "status": s}


def cache_of(**kinds: list[dict[str, Any]]) -> Cache:
    c = Cache("default")
    for plural, items in kinds.items():
        c.seed(plural, items)
    return c


def test_overview_puts_failed_then_paused_first() -> None:
    c = cache_of(rolloutpolicies=[pol("a", "Succeeded"), pol("b", "Progressing", 2), pol("c", "Paused", 1),
                                  pol("d", "Failed"), pol("e"), pol("f", "WaitingForPromotion", 3),
                                  pol("g", "RolledBack")])
    rows = views.overview(c, now=1767225600 + 3 * 3600)
    assert [(r.name, r.phase) for r in rows] == [
        ("d", "Failed"), ("g", "RolledBack"), ("c", "Paused"), ("f", "WaitingForPromotion"),
        ("b", "Progressing"), ("a", "Succeeded"), ("e", "Idle")]
    assert rows[4].stage == "2 of 3" and rows[4].age == "3h" and rows[6].stage == "- of 3"


@pytest.mark.parametrize(("phase", "cur", "verdicts", "states"), [
    ("Progressing", 2, [], ["passed", "current", "planned"]),
    ("WaitingForPromotion", 3, [], ["passed", "passed", "gated"]),
    ("Succeeded", 0, [], ["passed", "passed", "passed"]),
    ("RolledBack", 0, [{"stage": 2, "phase": "Failed"}], ["planned", "failed", "planned"]),
    ("Idle", 0, [], ["planned", "planned", "planned"]),
], ids=["progressing", "gated", "succeeded", "rolled-back-at-2", "idle"])
def test_timeline_states(phase: str, cur: int, verdicts: list[dict[str, Any]], states: list[str]) -> None:
    p = pol("m", phase, cur, rolloutId="r1", analysis={"rolloutId": "r1", "verdicts": verdicts})
    tl = views.timeline(p)
    assert [s.state for s in tl] == states
    assert [s.what for s in tl] == ["1 group", "50%", "100%"]
    assert [s.gated for s in tl] == [False, False, True]


def _pod(lws: str, group: int, worker: int, rev: str, ready: bool, node: str) -> dict[str, Any]:
    return {"metadata": {"name": f"{lws}-{group}" + (f"-{worker}" if worker else ""), "namespace": "default",
                         "labels": {L.NAME: lws, L.GROUP_INDEX: str(group), L.WORKER_INDEX: str(worker),
                                    L.TEMPLATE_REVISION_HASH: rev}},
            "spec": {"nodeName": node},
            "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def test_groups_by_revision_and_readiness_with_nodes_and_pools() -> None:
    lws = {"metadata": {"name": "m", "namespace": "default"}, "spec": {
        "replicas": 3, "rolloutStrategy": {"rollingUpdateConfiguration": {"partition": 2}}}}
    c = cache_of(
        leaderworkersets=[lws],
        statefulsets=[{"metadata": {"name": "m", "namespace": "default",
                                    "labels": {L.TEMPLATE_REVISION_HASH: "new1"}}}],
        nodes=[{"metadata": {"name": "gpu-1", "labels": {L.NODE_POOL: "h100"}}}],
        pods=[_pod("m", 0, 0, "old0", True, "gpu-1"), _pod("m", 0, 1, "old0", True, "gpu-1"),
              _pod("m", 1, 0, "old0", True, "gpu-1"), _pod("m", 2, 0, "new1", True, "gpu-1"),
              _pod("m", 2, 1, "new1", False, ""), _pod("other", 0, 0, "x", True, "gpu-1")])
    row = views.role_row(c, "aggregated", lws)
    assert [(g.index, g.revision, g.new, g.ready) for g in row.groups] == [
        (0, "old0", False, True), (1, "old0", False, True), (2, "new1", True, False)]
    assert (row.updated, row.ready, row.partition, row.replicas) == (1, 2, 2, 3)
    assert [(p.name, p.leader, p.node, p.pool) for p in row.groups[0].pods] == [
        ("m-0", True, "gpu-1", "h100"), ("m-0-1", False, "gpu-1", "h100")]
    assert row.groups[2].pods[1].node == ""  # unscheduled
    other = views.RoleRow("prefill", "p", 4, 0, 1, 4, [])
    assert views.skew([row, other]) == "8 points (aggregated 33% updated, prefill 25%)"


@pytest.mark.parametrize(("compare", "baseline", "limit"), [
    ({"mode": "relative", "tolerance": 10}, 2.0, 2.2),
    ({"mode": "absolute", "tolerance": 4}, 2.0, 6.0),
    ({"mode": "relative", "tolerance": 10, "better": "higher"}, 2.0, 1.8),
    ({"mode": "proportion", "tolerance": 0.5}, 0.01, None),
    (None, 2.0, None),
])
def test_tolerance_band(compare: dict[str, Any] | None, baseline: float, limit: float | None) -> None:
    got = charts.band_limit(compare, baseline)
    assert got == pytest.approx(limit) if limit is not None else got is None


def test_analysis_chart_marks_each_verdict_against_its_limit() -> None:
    p = pol("m", "RolledBack", 0)
    p["spec"]["analysis"] = {"metrics": [{"name": "ttft", "compare": {"mode": "relative", "tolerance": 10}}]}
    p["status"]["analysis"] = {"rolloutId": "r", "metrics": [{"name": "ttft", "phase": "failed", "failed": 2,
                                                              "measurements": [
        {"stage": 1, "index": 1, "phase": "successful", "value": 1.0, "baseline": 1.0, "detail": "<b>ok</b>"},
        {"stage": 1, "index": 2, "phase": "failed", "value": 1.4, "baseline": 1.0}]}]}
    _a, [m] = charts.analysis(p)
    assert m.phase == "failed" and "1 + 10%" in m.band
    assert 'data-verdict="successful">' in m.svg and 'data-value="1.4" data-limit="1.1"' in m.svg
    assert "<b>ok</b>" not in m.svg and "&lt;b&gt;ok&lt;/b&gt;" in m.svg  # the cluster's text, escaped


def test_pages_escape_what_the_cluster_says() -> None:
    c = cache_of(rolloutpolicies=[pol("m", "Failed", 0, message="<script>alert(1)</script>")])
    r = Renderer(c, now=lambda: 0.0)
    assert "<script>alert" not in r.overview_fragment() and "&lt;script&gt;" in r.overview_fragment()
    assert "<script>alert" not in r.rollout_fragment("default", "m")


def _lws(name: str, **labels: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "default", "labels": labels}, "spec": {"replicas": 2}}


def test_rows_per_role_for_pairs_disaggregated_sets_and_blue_green() -> None:
    c = cache_of(leaderworkersets=[
        _lws("chat-prefill", **{L.PD_PAIR: "chat", L.ROLE: "prefill"}),
        _lws("chat-decode", **{L.PD_PAIR: "chat", L.ROLE: "decode"}),
        _lws("chat-g-prefill", **{L.PD_PAIR: "chat-g", L.ROLE: "prefill"}),
        _lws("chat-g-decode", **{L.PD_PAIR: "chat-g", L.ROLE: "decode"}),
        _lws("big-decode-abc", **{L.DS_NAME: "big", L.DS_ROLE: "decode"}),
        _lws("big-prefill-abc", **{L.DS_NAME: "big", L.DS_ROLE: "prefill"}),
        _lws("solo")])

    def rows(kind: str, name: str, **status: Any) -> list[tuple[str, str]]:
        p = pol(name)
        p["spec"]["targetRef"] = {"kind": kind, "name": name}
        p["status"] = status
        return [(role, o["metadata"]["name"]) for role, o in views.targets(c, p)]

    assert rows("LeaderWorkerSetPair", "chat") == [("decode", "chat-decode"), ("prefill", "chat-prefill")]
    assert rows("DisaggregatedSet", "big") == [("decode (big-decode-abc)", "big-decode-abc"),
                                               ("prefill (big-prefill-abc)", "big-prefill-abc")]
    assert rows("LeaderWorkerSetPair", "chat", blueGreen={"bluePair": "chat", "greenPair": "chat-g"}) == [
        ("chat decode", "chat-decode"), ("chat prefill", "chat-prefill"),
        ("chat-g decode", "chat-g-decode"), ("chat-g prefill", "chat-g-prefill")]
    assert rows("LeaderWorkerSet", "solo") == [("aggregated", "solo")]
    assert rows("LeaderWorkerSet", "gone") == []


def test_blue_green_weights_are_kept_as_they_change() -> None:
    c = Cache("default")
    p = pol("chat", "Progressing", 1)
    for blue, green in ((90, 10), (90, 10), (50, 50), (0, 100)):
        p["status"]["blueGreen"] = {"blueWeight": blue, "greenWeight": green}
        c.seed("rolloutpolicies", [p])
    assert [(b, g) for _t, b, g in c.weights[("default", "chat")]] == [(90, 10), (50, 50), (0, 100)]
    svg = charts.weights_chart(c.weights[("default", "chat")])
    assert [int(x) for x in re.findall(r'data-green="(\d+)"', svg)] == [10, 50, 100]


def test_notification_webhooks_are_named_by_their_secret_never_their_url() -> None:
    p = pol("m", "Progressing", 1)
    p["spec"]["notifications"] = {"webhooks": [{"secretKeyRef": {"name": "slack", "key": "url"}}]}
    html = Renderer(cache_of(rolloutpolicies=[p]), now=lambda: 0.0).rollout_fragment("default", "m")
    assert "the webhook in Secret slack, key url" in " ".join(html.split())
