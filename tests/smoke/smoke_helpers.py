"""Helpers shared by the smoke tests (a uniquely named module: test folders are not packages)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx

from lwsflow.components.smoke import SmokeConfig, SmokeReport

MODEL = "stub-llama"


def fast_config(**kw: Any) -> SmokeConfig:
    """Short timeouts so failure paths finish in well under a second or two."""
    base: dict[str, Any] = {"model": MODEL, "request_timeout_s": 1.0, "warmup_s": 0.5, "retries": 2,
                            "backoff_s": 0.05, "deadline_s": 30.0, "max_tokens": 4}
    base.update(kw)
    return SmokeConfig(**base)


def failed_names(report: SmokeReport) -> set[str]:
    return {c.name for c in report.failed()}


def by_name(report: SmokeReport) -> dict[str, list]:
    out: dict[str, list] = {}
    for c in report.checks:
        out.setdefault(c.name, []).append(c)
    return out


class ToyPDProxy:
    """A minimal P/D router in the manner of vLLM's toy proxy / the llm-d sidecar (reference §4.1):
    for each completion it calls the prefiller (stream off, max_tokens 1, do_remote_decode) and then
    the decoder with the original body plus the returned kv_transfer_params. Test-only."""

    def __init__(self, prefill_url: str, decode_url: str) -> None:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True

            def log_message(self, *args: object) -> None:
                pass

            def _reply(self, status: int, data: bytes, ctype: str) -> None:
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                r = httpx.get(decode_url + self.path, timeout=5)
                self._reply(r.status_code, r.content, r.headers.get("content-type", "application/json"))

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
                pre = {k: v for k, v in body.items() if k not in ("stream", "stream_options")}
                pre |= {"max_tokens": 1, "kv_transfer_params": {"do_remote_decode": True}}
                p = httpx.post(prefill_url + self.path, json=pre, timeout=5)
                if p.status_code != 200:
                    self._reply(p.status_code, p.content, "application/json")
                    return
                proxy.handoffs += 1
                dec = {**body, "kv_transfer_params": p.json().get("kv_transfer_params")}
                r = httpx.post(decode_url + self.path, json=dec, timeout=5)
                self._reply(r.status_code, r.content, r.headers.get("content-type", "application/json"))

        self.handoffs = 0
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
