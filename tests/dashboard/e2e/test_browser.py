"""The dashboard as a person uses it, in headless chromium: the embedded cluster, the in-cluster
controller as its own process (the shipped RBAC, ``--prometheus local``, seeded traffic), and the
dashboard with the admin's kubeconfig and with a read-only user's.

One story, one browser: open the overview, follow the policy, watch a staged rollout move (the canary
group's cell changes revision, the stage advances, the analysis measures), pass the manual gate with
the Promote button (a confirm dialog), then watch a 40% slower release fail its analysis (the chart's
points above the tolerance band) and roll back; a read-only user's Retry is refused with a 403.
The page is never reloaded: everything after the first load arrives over server-sent events.

``LWSFLOW_DASHBOARD_SHOTS=1`` also writes the screenshots to docs/images (docs/dashboard.md)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import WebDriverWait

from lwsflow.components.loadgen import LoadGenerator, LoadSpec
from lwsflow.controller.kube.resources import ROLLOUT_POLICY
from lwsflow.dashboard import serve
from reliability.analysis_env import MODEL, NAME, NS, SAME, SLOWER, STABLE, AnalysisEnv, ttft_spec
from reliability.incluster_env import install_rbac, policy, sync

SHOTS = Path(__file__).resolve().parents[3] / "docs" / "images"

SPEC = ttft_spec(initial_delay="3s", window="3s")  # 40 req/s fill 3 s windows (issue 35: not 5 s)


def _until(browser: Any, what: str, pred: Callable[[Any], Any], timeout: float = 60.0) -> Any:
    return WebDriverWait(browser, timeout, poll_frequency=0.1).until(
        lambda d: pred(d), message=f"{what}; page text:\n{_text(browser, 'body')[:3000]}")


# Reads go through one script each: a live update may swap the elements between two WebDriver calls.
def _click(browser: Any, by: str, value: str) -> None:
    """Click an element, finding it again when a server-sent update replaced it between find and click
    (the overview re-renders whenever any policy's status changes)."""
    def attempt(d: Any) -> bool:
        d.find_element(by, value).click()
        return True
    stale = (StaleElementReferenceException,)
    wait = WebDriverWait(browser, 30, poll_frequency=0.1, ignored_exceptions=stale)
    wait.until(attempt, message=f"click {value}")


def _text(browser: Any, css: str) -> str:
    return str(browser.execute_script(
        "const e = document.querySelector(arguments[0]); return e ? e.innerText.trim() : '';", css))


def _attrs(browser: Any, css: str, *names: str) -> list[dict[str, str]]:
    return list(browser.execute_script(
        "return [...document.querySelectorAll(arguments[0])].map("
        "e => Object.fromEntries(arguments[1].map(n => [n, e.getAttribute(n) || ''])));", css, list(names)))


def _cells(browser: Any) -> dict[int, str]:
    """Group index -> the revision its cell shows."""
    return {int(c["data-group"]): c["data-revision"] for c in _attrs(browser, ".cell", "data-group",
                                                                     "data-revision")}


def _shot(browser: Any, name: str, tmp: Path, css: str | None = None) -> Path:
    path = tmp / f"dashboard-{name}.png"
    if css:
        el = browser.find_element(By.CSS_SELECTOR, css)
        browser.execute_script("arguments[0].scrollIntoView(true)", el)  # the whole element in view
        el.screenshot(str(path))
    else:
        browser.save_screenshot(str(path))
    assert path.stat().st_size > 5000 and path.read_bytes()[:4] == b"\x89PNG"
    if os.environ.get("LWSFLOW_DASHBOARD_SHOTS") == "1":
        shutil.copyfile(path, SHOTS / path.name)
    return path


def test_watch_promote_and_roll_back_a_bad_release(browser: Any, tmp_path: Path,
                                                   viewer_kubeconfig: Any) -> None:
    env = AnalysisEnv(tmp_path, speed=20.0)
    dashes = []
    try:
        env.create_ready(STABLE)
        stages = [{"groups": 1}, {"groups": "100%", "pause": {}}]  # a manual gate before the last stage
        env.kube.create(ROLLOUT_POLICY, NS, policy(NAME, NAME, stages, analysis=SPEC))
        for other in ("chat-small", "embed"):  # idle policies: the overview puts the rolled-back one first
            env.kube.create(ROLLOUT_POLICY, NS, policy(other, other, [{"groups": "100%"}]))
        sa = install_rbac(env, tmp_path)
        viewer = viewer_kubeconfig(env.kube, env.kubeconfig, tmp_path / "viewer.kubeconfig")
        dash = serve(str(env.kubeconfig), NS)
        dashes.append(dash)
        log = tmp_path / "controller.log"
        penv = {**os.environ, "LWSFLOW_LOG": "text"}
        penv.pop("KUBECONFIG", None)
        with log.open("wb") as sink, \
                LoadGenerator(LoadSpec(model=MODEL, rate=40, seed=5, max_tokens=(2, 4)), env.endpoints):
            proc = subprocess.Popen(
                [str(Path(sys.executable).parent / "lwsflow"), "controller", "run", "-n", NS, "--resync=1s",
                 "--metrics-addr=127.0.0.1:0", "--health-addr=127.0.0.1:0", "--prometheus", "local",
                 f"--kubeconfig={sa}"], stdout=sink, stderr=subprocess.STDOUT, env=penv)
            try:
                _story(browser, env, dash.url, tmp_path)
            except Exception:
                print(log.read_text()[-5000:])
                raise
            finally:
                proc.terminate()
                proc.wait(timeout=30)
        ro = serve(str(viewer), NS)
        dashes.append(ro)
        _read_only(browser, ro.url, tmp_path)
    finally:
        for d in dashes:
            d.stop()
        env.close()


def _story(browser: Any, env: AnalysisEnv, url: str, tmp: Path) -> None:
    browser.get(url)
    row = f'tr[data-policy="{NS}/{NAME}"]'
    _until(browser, "the controller adopts the stable release",
           lambda d: _text(d, f"{row} td.rev") not in ("", "-"))
    _click(browser, By.LINK_TEXT, NAME)  # to the rollout's page, as a person would
    _until(browser, "the rollout page", lambda d: _text(d, "#phase") == "Idle")
    browser.execute_script("window.__sameDocument = true")  # a reload would drop it
    before = _cells(browser)
    assert len(before) == 2 and len(set(before.values())) == 1, before
    old = next(iter(before.values()))

    sync(env, NAME, f"r.example/vllm@{SAME}")  # Git's new template, as Argo CD applies it
    _until(browser, "stage 1 runs", lambda d: _text(d, "#stage") == "1/2")
    # the canary group (the highest ordinal) changes revision; group 0 stays on the stable one
    cells = _until(browser, "group 1 on the new revision",
                   lambda d: (c := _cells(d)).get(1) not in (None, old) and c)
    assert cells[0] == old
    new = cells[1]
    _until(browser, "the gate before stage 2", lambda d: _text(d, "#phase") == "WaitingForPromotion", 90)
    states = [x["data-state"] for x in _attrs(browser, "#timeline li", "data-state")]
    assert states == ["passed", "gated"], states
    assert _attrs(browser, '.metric[data-metric="ttft-p95"]', "data-phase") == [{"data-phase": "successful"}]
    _shot(browser, "rollout", tmp)

    _click(browser, By.ID, "btn-promote")
    alert = WebDriverWait(browser, 5).until(EC.alert_is_present())
    assert "stage 2" in alert.text
    alert.accept()
    _until(browser, "the promote answer", lambda d: "promoted" in _text(d, "#action-result"), 10)
    _until(browser, "the release succeeds", lambda d: _text(d, "#phase") == "Succeeded", 90)
    _until(browser, "every group on the new revision", lambda d: set(_cells(d).values()) == {new})

    sync(env, NAME, f"r.example/vllm@{SLOWER}")  # Ready, but 40% slower time to first token
    _until(browser, "the bad release rolls back", lambda d: _text(d, "#phase") == "RolledBack", 120)
    _until(browser, "every group back on the good revision", lambda d: set(_cells(d).values()) == {new})
    points = _attrs(browser, '.metric[data-metric="ttft-p95"] circle.point', "data-verdict", "data-value",
                    "data-limit", "data-stage")
    failed = [p for p in points if p["data-verdict"] == "failed"]
    assert len(failed) == 2, points  # failureLimit 1: the 2nd failed measurement fails the metric
    assert all(float(p["data-value"]) > float(p["data-limit"]) for p in failed), failed  # above the band
    assert _attrs(browser, "#timeline li", "data-state")[0] == {"data-state": "failed"}
    assert "AnalysisFailed" in _text(browser, "#events")
    assert browser.execute_script("return window.__sameDocument === true"), "the page was reloaded"
    _shot(browser, "analysis", tmp, "#analysis")

    browser.get(url)
    rows = [r["data-policy"] for r in _attrs(browser, "tr[data-policy]", "data-policy")]
    assert rows == [f"{NS}/{NAME}", f"{NS}/chat-small", f"{NS}/embed"], rows  # the rolled-back one first
    assert _text(browser, f"{row} td.phase") == "RolledBack"
    _shot(browser, "overview", tmp, "main")


def _read_only(browser: Any, url: str, tmp: Path) -> None:
    """A user who may only read: the nodes they may not list are named as such; Retry gets a 403."""
    browser.get(f"{url}p/{NS}/{NAME}")
    _until(browser, "the read-only page", lambda d: _text(d, "#phase") == "RolledBack", 20)
    _until(browser, "the nodes' 403", lambda d: "403" in _text(d, '.banner[data-kind="nodes"]'), 20)
    _click(browser, By.ID, "btn-retry")
    WebDriverWait(browser, 5).until(EC.alert_is_present()).accept()
    said = _until(browser, "the refusal", lambda d: _text(d, "#action-result"), 10)
    assert "403 Forbidden" in said, said
    assert _attrs(browser, "#action-result .banner", "data-status") == [{"data-status": "403"}]
    _shot(browser, "forbidden", tmp)
