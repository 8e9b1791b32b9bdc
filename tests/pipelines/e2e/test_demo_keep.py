"""`lwsflow demo --keep` (issue 31.9): after its checks the demo keeps the embedded cluster, the
controller and the dashboard up until Ctrl-C; `--bad-release`'s help says what the bad release does."""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest

from lwsflow.cli import main
from lwsflow.controller.kube.client import Kube
from lwsflow.controller.kube.resources import LWS, ROLLOUT_POLICY
from lwsflow.rehearsal import demo


def test_keep_holds_the_dashboard_and_the_cluster_until_stopped(
        tmp_path: Path, example_catalog: Path, capsys: pytest.CaptureFixture[str]) -> None:
    held = threading.Event()

    class Stop(threading.Event):  # Ctrl-C's stand-in, which says when the demo starts waiting for it
        def wait(self, timeout: float | None = None) -> bool:
            held.set()
            return super().wait(timeout)

    keep = demo.Keep(stop=Stop())
    seen: dict[str, Any] = {}

    def look_then_stop() -> None:  # what a person does while the demo is kept: look, then Ctrl-C
        held.wait()  # the demo is blocked until stop is set: nothing is torn down while we look
        try:
            seen["summary"] = json.loads((tmp_path / "summary.json").read_text())  # the checks ended
            page = httpx.get(keep.dashboard_url, timeout=30)
            seen["dashboard"] = (page.status_code, "llama-8b" in page.text)
            kube = Kube.connect(keep.kubeconfig)
            seen["policy"] = kube.get(ROLLOUT_POLICY, "llm-dev", "llama-8b")["status"].get("phase")
            seen["lws"] = kube.get(LWS, "llm-dev", "llama-8b")["status"].get("readyReplicas")
        finally:
            keep.stop.set()

    looker = threading.Thread(target=look_then_stop, daemon=True)
    looker.start()
    code = demo.run_demo(out=tmp_path, catalog=example_catalog, models=["llama-8b"], bad_release=False,
                         keep=keep)
    out = capsys.readouterr().out
    assert keep.up.is_set() and held.is_set(), out  # the demo reached --keep and waited there
    assert keep.stop.is_set(), out  # until asked to stop
    looker.join(timeout=60)
    assert seen["summary"]["models"][0]["ok"], out
    assert seen["dashboard"] == (200, True), seen
    assert seen["policy"] == "Succeeded" and seen["lws"] == 1, seen
    assert re.search(r"--keep: dashboard http://127\.0\.0\.1:\d+/, the in-cluster controller, the embedded "
                     r"cluster https://127\.0\.0\.1:\d+ .* stay up until Ctrl-C", " ".join(out.split())), out
    assert code == 0
    with pytest.raises(httpx.TransportError):  # stopped with the demo
        httpx.get(keep.dashboard_url, timeout=5)


def test_the_bad_release_help_says_what_it_does(capsys: pytest.CaptureFixture[str]) -> None:
    """The help's figures are the code's: the bad image's TTFT against the good one's."""
    assert main(["demo", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.replace("│", " ").split())
    slower = round((demo.SLOWER_FACTOR - 1) * 100)
    assert f"{slower}% slower" in text, text
    assert f"{(demo.SLOWER.ttft_s or 0) * 1000:g} ms instead of {demo.GOOD_TTFT_S * 1000:g} ms" in text, text
    assert "never becomes ready" not in text
    assert "--keep" in text and "until Ctrl-C" in text
