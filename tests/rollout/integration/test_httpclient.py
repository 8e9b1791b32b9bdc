"""The shared HTTP client (controller/httpclient.py): one client for the process, and still one
connection per request, as the per-call ``httpx.get`` it replaced (a pod replaced between two
requests must never be reached over a connection kept open to the old one)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from lwsflow.controller import httpclient


class _Peers(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # the server would keep a connection open if the client asked
    peers: list[tuple[str, int]] = []

    def do_GET(self) -> None:
        self.peers.append(self.client_address)
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    _Peers.peers = []
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Peers)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}/"
    srv.shutdown()
    srv.server_close()


def test_one_client_per_process_and_a_new_connection_per_request(server: str) -> None:
    assert httpclient.shared() is httpclient.shared()
    for _ in range(3):
        assert httpclient.shared().get(server, timeout=5).text == "ok"
    assert len(_Peers.peers) == 3
    assert len(set(_Peers.peers)) == 3, _Peers.peers  # three source ports: nothing was kept alive


def test_the_client_is_shared_safely_between_threads(server: str) -> None:
    answers: list[str] = []

    def get() -> None:
        answers.append(httpclient.shared().get(server, timeout=5).text)

    threads = [threading.Thread(target=get) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert answers == ["ok"] * 8
