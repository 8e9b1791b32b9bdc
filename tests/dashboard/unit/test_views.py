"""The dashboard's views and charts as tables: objects in, what the page shows out (no server)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from lwsflow.controller.api import labels as L
from lwsflow.dashboard import charts, views
from lwsflow.dashboard.cache import Cache
from lwsflow.dashboard.pages import Renderer

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


CSS = (Path(__file__).resolve().parents[3] / "dashboard" / "static" /
       "dashboard.css").read_text()


def _rolled_back_at_2() -> dict[str, Any]:
    """A policy whose rollout r1 passed stage 1 and failed stage 2 (the history record the controller
    copies from the target's stage log when the rollout ends), rolled back without an analysis."""
    return pol("m", "RolledBack", 0, rolloutId="r1", history=[
        {"id": "r0", "outcome": "Succeeded", "stages": [{"stage": 1, "result": "passed"}]},
        {"id": "r1", "outcome": "RolledBack", "stages": [
            {"stage": 1, "role": "", "result": "passed"}, {"stage": 2, "role": "", "result": "failed"}]}])


def test_after_a_rollback_the_failed_stage_is_marked_and_a_success_counts_every_stage() -> None:
    p = _rolled_back_at_2()
    assert [s.state for s in views.timeline(p)] == ["passed", "failed", "planned"]
    c = cache_of(rolloutpolicies=[p, pol("ok", "Succeeded")])
    html = Renderer(c, now=lambda: 0.0).rollout_fragment("default", "m")
    assert re.search(r'data-stage="2" data-state="failed"', html)
    assert {r.name: r.stage for r in views.overview(c, now=0.0)} == {"m": "failed at 2 of 3", "ok": "3 of 3"}


def test_an_empty_overview_says_how_to_add_a_policy() -> None:
    import html as htmlmod

    import yaml

    from lwsflow.controller.policy.model import RolloutPolicySpec

    page = Renderer(cache_of(rolloutpolicies=[]), now=lambda: 0.0).overview_fragment()
    assert "No RolloutPolicy in namespace default yet" in page
    assert "kubectl apply -n default -f policy.yaml" in page and "docs/controller.md" in page
    example = yaml.safe_load(htmlmod.unescape(re.search(r'<pre class="example">(.*?)</pre>', page, re.S)[1]))
    assert example["kind"] == "RolloutPolicy"
    RolloutPolicySpec.model_validate(example["spec"])  # the example is a policy the controller accepts


def test_broken_policies_look_different_from_healthy_idle_ones() -> None:
    def conds(*cs: tuple[str, str, str]) -> list[dict[str, str]]:
        return [{"type": t, "status": st, "reason": r, "message": "m"} for t, st, r in cs]

    c = cache_of(rolloutpolicies=[
        pol("idle", "Idle", conditions=conds(("Ready", "True", "Idle"), ("TargetFound", "True", "Found"))),
        pol("lost", "Idle", message="LeaderWorkerSet/lost not found",
            conditions=conds(("TargetFound", "False", "TargetNotFound"),
                             ("Ready", "False", "TargetNotFound"))),
        pol("second", "Failed", conditions=conds(("Ready", "False", "TargetOwned"))),
        pol("bad", "Failed", message="spec.stages: the last stage must be 100%"),
        pol("done", "Succeeded", rolloutId="r")])
    rows = views.overview(c, now=0.0)
    assert [(r.name, r.problem) for r in rows] == [
        ("bad", "invalid spec"), ("second", "target owned by another policy"), ("lost", "target missing"),
        ("done", ""), ("idle", "")]
    page = Renderer(c, now=lambda: 0.0).overview_fragment()
    row = {m[1]: m[0] for m in re.findall(r'<tr class="([^"]*)" data-policy="default/(\w+)"', page)}
    assert row["lost"] == "phase-Idle broken" and row["idle"] == "phase-Idle"
    assert 'data-problem="target missing"' in page and re.search(r"tr\.broken \{[^}]*background", CSS)
    assert 'id="problem">target missing<' in Renderer(c, now=lambda: 0.0).rollout_fragment("default", "lost")


def test_group_cells_name_the_policy_revision_and_event_times_do_not_wrap() -> None:
    lws = {"metadata": {"name": "m", "namespace": "default"}, "spec": {"replicas": 2}}
    p = pol("m", "Progressing", 1, observedTemplateHash="canary0123456789", stableRevision="stable0123456789",
            canaryRevision="canary0123456789")
    c = cache_of(rolloutpolicies=[p], leaderworkersets=[lws],
                 statefulsets=[{"metadata": {"name": "m", "namespace": "default",
                                             "labels": {L.TEMPLATE_REVISION_HASH: "new1"}}}],
                 pods=[_pod("m", 0, 0, "old0", True, "n"), _pod("m", 1, 0, "new1", True, "n")],
                 events=[{"metadata": {"name": "e", "namespace": "default"}, "type": "Normal",
                          "involvedObject": {"kind": "RolloutPolicy", "name": "m"},
                          "reason": "RolloutStarted", "message": "started",
                          "lastTimestamp": "2026-01-01T00:00:00Z"}])
    html = Renderer(c, now=lambda: 0.0).rollout_fragment("default", "m")
    cells = re.findall(r'title="pods\' template-revision-hash (\w+)">group (\d)\s*<code class="policy-rev" '
                       r'data-policy-revision="(\w*)">([^<]*)</code>', html)
    assert cells == [("old0", "0", "stable0123456789", "stable stable0123"),
                     ("new1", "1", "canary0123456789", "canary canary0123")]
    assert '<td class="time">2026-01-01T00:00:00Z</td>' in html
    assert re.search(r"table\.events td\.time \{ white-space: nowrap; \}", CSS)
