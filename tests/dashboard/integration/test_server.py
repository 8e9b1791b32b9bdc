"""The dashboard's HTTP server over a seeded cache: who may ask, the live stream, the shipped assets."""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from lwsflow.dashboard import Dashboard
from lwsflow.dashboard.cache import Cache

VENDOR = Path(__file__).resolve().parents[3] / "dashboard" / "vendor"


def pol(name: str, phase: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "default"},
            "spec": {"targetRef": {"kind": "LeaderWorkerSet", "name": name}, "stages": [{"groups": "100%"}]},
            "status": {"phase": phase}}


@pytest.fixture
def served() -> Iterator[tuple[Dashboard, list[tuple[str, str, str]]]]:
    cache = Cache("default")
    cache.seed("rolloutpolicies", [pol("m", "Progressing")])
    calls: list[tuple[str, str, str]] = []

    def act(action: str, ns: str, name: str) -> str:
        calls.append((action, ns, name))
        return f"{ns}/{name}: {action} done"

    d = Dashboard(cache, act, now=time.time).start()
    try:
        yield d, calls
    finally:
        d.stop()


def test_pages_and_scope(served: tuple[Dashboard, list[Any]]) -> None:
    d, _ = served
    assert 'data-policy="default/m"' in httpx.get(d.url).text
    assert httpx.get(d.url + "p/default/m").status_code == 200
    assert httpx.get(d.url + "p/other/m").status_code == 404  # another namespace than the one shown
    assert httpx.get(d.url + "p/default/nope").status_code == 404
    js = httpx.get(d.url + "vendor/htmx.min.js")
    assert js.status_code == 200 and "javascript" in js.headers["content-type"]
    assert httpx.get(d.url + "vendor/..%2Fserver.py").status_code == 404


def test_only_its_own_page_may_act(served: tuple[Dashboard, list[Any]]) -> None:
    d, calls = served
    url = d.url + "p/default/m/pause"
    hx = {"HX-Request": "true"}
    # a page from another site: a plain form post, or a fetch from its origin
    assert httpx.post(url).status_code == 403
    assert httpx.post(url, headers={**hx, "Origin": "http://evil.example"}).status_code == 403
    # DNS rebinding: the right address under another name
    assert httpx.get(d.url, headers={"Host": "evil.example"}).status_code == 403
    assert calls == []
    ok = httpx.post(url, headers={**hx, "Origin": d.url.rstrip("/")})
    assert ok.status_code == 200 and "default/m: pause done" in ok.text
    assert httpx.post(d.url + "p/default/m/delete", headers=hx).status_code == 404
    assert calls == [("pause", "default", "m")]


def test_a_change_reaches_an_open_stream(served: tuple[Dashboard, list[Any]]) -> None:
    d, _ = served
    events: list[str] = []
    got_two = threading.Event()

    def read() -> None:
        with httpx.stream("GET", d.url + "sse/p/default/m", timeout=10) as s:
            data: list[str] = []
            for line in s.iter_lines():
                if line.startswith("data: "):
                    data.append(line[6:])
                elif line == "" and data:
                    events.append("\n".join(data))
                    data = []
                    if len(events) == 2:
                        got_two.set()
                        return

    t = threading.Thread(target=read, daemon=True)
    t.start()
    deadline = time.monotonic() + 10
    while not events and time.monotonic() < deadline:
        time.sleep(0.01)
    assert events and 'id="phase">Progressing<' in events[0]
    d.cache.seed("rolloutpolicies", [pol("m", "Paused")])  # what a watch event does
    assert got_two.wait(10)
    assert 'id="phase">Paused<' in events[1]


def test_vendored_assets_match_their_recorded_sums() -> None:
    rows = [line.split() for line in (VENDOR / "VERSIONS.txt").read_text().splitlines()
            if line.split() and (VENDOR / line.split()[0]).is_file()]
    assert {r[0] for r in rows} == {p.name for p in VENDOR.iterdir() if p.name != "VERSIONS.txt"}
    for r in rows:
        assert hashlib.sha256((VENDOR / r[0]).read_bytes()).hexdigest() == r[-1], r[0]
