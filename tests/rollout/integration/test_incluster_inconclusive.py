"""An analysis that decides nothing pauses the rollout for a person (issue 32.2, ``onInconclusive``).

The in-cluster controller runs the real analysis hook (``components/analysis_hook``: revisions from
the API, the proportion test of ``controller/analysis``) against a small Prometheus stand-in that
answers each revision's error and request counts: a quiet model (40 requests per revision) cannot
show a pass, so stage 1 pauses with the traffic the decision needed in the status and an Event;
``kubectl lwsflow promote`` passes the stage (the analysis is not run again) and ``abort`` rolls it
back. ``onInconclusive: rollback`` rolls back as before, and a clearly bad release still fails.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import httpx
import pytest

from lwsflow.cli import kubectl_plugin
from lwsflow.components.analysis_hook import analysis_hook, revisions
from lwsflow.controller.analysis.incluster import OnMeasurement
from lwsflow.controller.analysis.spec import AnalysisSpec
from lwsflow.controller.incluster.manager import Controller
from lwsflow.controller.kube.client import Kube
from lwsflow.controller.kube.resources import EVENT, LWS, ROLLOUT_POLICY
from lwsflow.controller.rollout import hooks, state
from lwsflow.controller.yamlio import dump_yaml
from lwsflow.dashboard import serve
from reliability.incluster_env import policy, running, sync, wait_policy
from reliability.rollout_env import NS, Env, lws_manifest, new_release

NAME = "quiet"
_REV = re.compile(r'revision="([^"]*)"')


class FakePrometheus:
    """Instant queries ``errors{revision=..}`` and ``requests{revision=..}``: the stable revision's
    counts, or the new one's for any other revision."""

    def __init__(self) -> None:
        self.stable_rev = ""
        self.stable = (0.0, 40.0)  # (errors, requests) over the window
        self.new = (0.0, 40.0)
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                query = parse_qs(urlparse(self.path).query).get("query", [""])[0]
                m = _REV.search(query)
                errors, total = outer.stable if m and m.group(1) == outer.stable_rev else outer.new
                value = errors if query.startswith("errors") else total
                body = json.dumps({"status": "success", "data": {"resultType": "vector", "result": [
                    {"metric": {}, "value": [0, str(value)]}]}}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def prom() -> Iterator[FakePrometheus]:
    p = FakePrometheus()
    yield p
    p.close()


def _spec(**extra: object) -> dict:
    """Error ratio of the new revision against the stable one, two quick measurements."""
    return {**extra, "metrics": [{
        "name": "errors", "interval": "100ms", "count": 2,
        "provider": {"prometheus": {"query": 'errors{revision="{{revision}}"}'}},
        "compare": {"mode": "proportion", "tolerance": 0.005, "total": 'requests{revision="{{revision}}"}'}}]}


def _controller(env: Env, prom: FakePrometheus) -> Controller:
    kube = Kube.connect(str(env.kubeconfig))

    def factory(spec: AnalysisSpec, seen: OnMeasurement) -> hooks.Hook:
        return analysis_hook(spec, kube, prom.url, on_measurement=seen)
    return Controller(kube, env.clock(), namespace=NS, analysis=factory, resync_s=1.0)


def _start(env: Env, prom: FakePrometheus, analysis: dict) -> Controller:
    env.create_ready(lws_manifest(NAME, replicas=2, size=1, partition=2))
    env.kube.create(ROLLOUT_POLICY, NS, policy("p", NAME, [{"groups": 1}, {"groups": "100%"}],
                                               analysis=analysis))
    return _controller(env, prom)


def _release(env: Env, prom: FakePrometheus) -> None:
    wait_policy(env, "p", lambda s: bool(s.get("stableRevision")))
    prom.stable_rev = revisions(env.kube, NS, NAME)[0]
    sync(env, NAME, "vllm:2")


def _events(env: Env, name: str, reason: str) -> list[str]:
    items, _ = env.kube.list(EVENT, NS)
    return [e["message"] for e in items if e["involvedObject"]["name"] == name and e["reason"] == reason]


def _paused(env: Env) -> dict:
    """Waits for the inconclusive pause and checks what it tells a person."""
    p = wait_policy(env, "p", lambda s: s.get("phase") in ("Paused", "RolledBack", "Failed", "Succeeded"))
    s = p["status"]
    assert s["phase"] == "Paused", s
    assert s["currentStage"] == 1, s
    # what the decision needed, from the evaluation's own figure
    assert re.search(r"40 requests per revision, about \d+ needed", s["message"]), s["message"]
    assert "`kubectl lwsflow promote` passes the stage" in s["message"], s["message"]
    progressing = next(c for c in s["conditions"] if c["type"] == "Progressing")
    assert (progressing["status"], progressing["reason"]) == ("False", "AnalysisInconclusive"), progressing
    assert s["analysis"]["verdicts"][-1]["phase"] == "Inconclusive", s["analysis"]
    [ev] = _events(env, "p", "AnalysisInconclusive")
    assert "the rollout pauses" in ev and "needed" in ev, ev
    assert any("needed" in m for m in _events(env, NAME, "AnalysisInconclusive"))
    st = state.RolloutState.from_object(env.kube.get(LWS, NS, NAME))
    assert (st.phase, st.paused, st.passed, st.inconclusive) == (state.RUNNING, True, 0, 1), st
    return s


def _ended(env: Env, pred: Callable[[dict], bool] = lambda s: s.get("phase") in (
        "Succeeded", "RolledBack", "Failed")) -> dict:
    return wait_policy(env, "p", pred)["status"]


def test_inconclusive_pauses_then_promote_passes_the_stage(env: Env, prom: FakePrometheus) -> None:
    ctl = _start(env, prom, _spec())
    with running(ctl):
        _release(env, prom)
        _paused(env)
        dash = serve(str(env.kubeconfig), NS)  # the dashboard says it too, and offers promote
        try:
            page = httpx.get(f"{dash.url.rstrip('/')}/p/{NS}/p", timeout=30).text
        finally:
            dash.stop()
        button = re.search(r'<button id="btn-promote"[^>]*>', page)
        assert button and "disabled" not in button[0] and "analysis decided nothing" in button[0], page
        assert re.search(r"about \d+ needed", page), page
        assert kubectl_plugin.main(["promote", "p", "-n", NS, "--kubeconfig", str(env.kubeconfig)]) == 0
        s = _ended(env)
    assert s["phase"] == "Succeeded", s
    verdicts = [(v["stage"], v["phase"]) for v in s["analysis"]["verdicts"]]
    assert verdicts[0] == (1, "Inconclusive") and verdicts[-1][0] == 2, verdicts
    # stage 1's analysis ran once: the promote did not measure again
    assert sum(1 for v in verdicts if v[0] == 1 and v[1] != "Inconclusive") <= 1
    assert all(m["stage"] == 1 for m in s["analysis"]["metrics"][0]["measurements"]), s["analysis"]
    assert env.kube.get(LWS, NS, NAME)["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"][
        "containers"][0]["image"] == "vllm:2"


def test_inconclusive_pause_then_abort_rolls_back(env: Env, prom: FakePrometheus) -> None:
    ctl = _start(env, prom, _spec())
    with running(ctl):
        _release(env, prom)
        _paused(env)
        assert kubectl_plugin.main(["abort", "p", "-n", NS, "--kubeconfig", str(env.kubeconfig)]) == 0
        s = _ended(env)
    assert s["phase"] == "RolledBack", s
    assert env.kube.get(LWS, NS, NAME)["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"][
        "containers"][0]["image"] == "vllm:1"


def test_on_inconclusive_rollback_rolls_back_as_before(env: Env, prom: FakePrometheus) -> None:
    ctl = _start(env, prom, _spec(onInconclusive="rollback"))
    with running(ctl):
        _release(env, prom)
        s = _ended(env, lambda s: s.get("phase") in ("Paused", "Succeeded", "RolledBack", "Failed"))
    assert s["phase"] == "RolledBack", s
    assert "too little traffic" in s["message"], s["message"]
    assert s["analysis"]["verdicts"][-1]["phase"] == "Inconclusive"


def test_a_clearly_bad_release_still_fails_and_rolls_back(env: Env, prom: FakePrometheus) -> None:
    prom.stable, prom.new = (0.0, 2000.0), (300.0, 2000.0)  # 15 % errors against none
    ctl = _start(env, prom, _spec())
    with running(ctl):
        _release(env, prom)
        s = _ended(env, lambda s: s.get("phase") in ("Paused", "Succeeded", "RolledBack", "Failed"))
    assert s["phase"] == "RolledBack", s
    assert s["analysis"]["verdicts"][-1]["phase"] == "Failed", s["analysis"]
    assert not _events(env, "p", "AnalysisInconclusive")


def _cli(env: Env, *args: str) -> int:
    from lwsflow.cli import main

    return main(["rollout", *args, "-n", NS, "--kubeconfig", str(env.kubeconfig)])


def test_cli_exits_3_at_an_inconclusive_pause_and_promote_continues(
        env: Env, prom: FakePrometheus, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`lwsflow rollout run --analysis`: exit 3 and what to run next; `rollout promote` passes the stage
    and finishes the rollout; `--on-inconclusive rollback` rolls back (exit 1); a bad value is exit 2."""
    base = lws_manifest(NAME, replicas=2, size=1)
    env.create_ready(base)
    prom.stable_rev = revisions(env.kube, NS, NAME)[0]
    spec, mf = tmp_path / "a.yaml", tmp_path / "m.yaml"
    spec.write_text(dump_yaml(_spec()))
    mf.write_text(dump_yaml(new_release(base)))
    analysis = ("--analysis", str(spec), "--prometheus", prom.url)
    assert _cli(env, "run", f"lws/{NAME}", "--manifest", str(mf), "--stages", "1,100%", *analysis,
                "--on-inconclusive", "later") == 2
    assert "--on-inconclusive" in capsys.readouterr().err
    assert not state.RolloutState.from_object(env.kube.get(LWS, NS, NAME)).id  # nothing written
    assert _cli(env, "run", f"lws/{NAME}", "--manifest", str(mf), "--stages", "1,100%", *analysis) == 3
    out = capsys.readouterr().out
    assert re.search(r"40 requests per revision, about \d+ needed", out), out
    assert f"`lwsflow rollout promote lws/{NAME} -n {NS}` passes the stage" in out, out
    assert _cli(env, "promote", f"lws/{NAME}", *analysis) == 0
    out = capsys.readouterr().out
    assert "stage 1 passed despite an inconclusive analysis" in out and "succeeded" in out, out
    assert _cli(env, "promote", f"lws/{NAME}") == 2  # nothing paused any more

    nxt = new_release(base, image="vllm:3")
    mf.write_text(dump_yaml(nxt))
    prom.stable_rev = revisions(env.kube, NS, NAME)[0]
    assert _cli(env, "run", f"lws/{NAME}", "--manifest", str(mf), "--stages", "1,100%", *analysis,
                "--on-inconclusive", "rollback") == 1
    assert "rolled-back" in capsys.readouterr().out
