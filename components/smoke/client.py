"""HTTP for the smoke test: timeouts, bounded retries with backoff, a run deadline, SSE reading.

Retries are for a pod that is still warming up (connection refused, 503) and never for a request
that was accepted and then hung: a hang ends as a failure at the request timeout, not N times later.
"""

from __future__ import annotations

import json
import ssl
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx

from lwsflow.components.smoke.model import SmokeConfig
from lwsflow.controller.errors import InvalidInput

_RETRYABLE_STATUS = (502, 503, 504)


class CheckError(Exception):
    """A check's request failed; the message is what the report shows (expected vs got)."""

    def __init__(self, message: str, expected: str | None = None, got: str | None = None) -> None:
        super().__init__(message)
        self.expected, self.got = expected, got


class Deadline:
    """The run's total deadline; every request's timeout is capped by what is left of it."""

    def __init__(self, seconds: float) -> None:
        self.end = time.monotonic() + seconds

    def left(self) -> float:
        return self.end - time.monotonic()

    def cap(self, timeout: float) -> float:
        left = self.left()
        if left <= 0:
            raise CheckError("total smoke deadline exceeded")
        return min(timeout, left)


@dataclass
class StreamResult:
    """What an SSE response carried: parsed events, content pieces and their arrival times."""

    events: list[dict] = field(default_factory=list)
    pieces: list[str] = field(default_factory=list)
    times: list[float] = field(default_factory=list)  # seconds since the request was sent, per piece
    done: bool = False
    error: dict | None = None


class SmokeClient:
    """One httpx client per run (TLS verification on by default, bearer token on every request)."""

    def __init__(self, cfg: SmokeConfig, deadline: Deadline) -> None:
        self.cfg, self.deadline = cfg, deadline
        verify: bool | ssl.SSLContext = False
        if cfg.verify_tls:  # on by default; --ca-file trusts a private CA (e.g. a sidecar's own cert)
            try:
                verify = ssl.create_default_context(cafile=cfg.ca_file) if cfg.ca_file else True
            except (OSError, ssl.SSLError) as exc:
                raise InvalidInput(f"cannot load CA bundle {cfg.ca_file}: {exc}", field="--ca-file") from None
        headers = {"User-Agent": "lwsflow-smoke"}
        if cfg.token is not None:
            headers["Authorization"] = f"Bearer {cfg.token.get_secret_value()}"
        self._http = httpx.Client(verify=verify, headers=headers, follow_redirects=False)

    def close(self) -> None:
        self._http.close()

    def _timeout(self, timeout: float | None = None) -> httpx.Timeout:
        return httpx.Timeout(self.deadline.cap(timeout or self.cfg.request_timeout_s))

    def request(self, method: str, url: str, body: dict | None = None, *, retry: bool = True,
                timeout: float | None = None) -> httpx.Response:
        """Send with bounded retries on connection errors and 502/503/504; raises CheckError."""
        attempts = self.cfg.retries if retry else 1
        delay = self.cfg.backoff_s
        last = ""
        for attempt in range(1, attempts + 1):
            try:
                resp = self._http.request(method, url, json=body, timeout=self._timeout(timeout))
                if resp.status_code not in _RETRYABLE_STATUS or attempt == attempts:
                    return resp
                last = f"HTTP {resp.status_code}"
            except httpx.TimeoutException as exc:
                raise CheckError(f"{method} {url}: no answer within the timeout ({type(exc).__name__})",
                                 got="timeout") from exc
            except (httpx.ConnectError, httpx.RemoteProtocolError, httpx.ReadError) as exc:
                last = f"{type(exc).__name__}: {exc}"
                if attempt == attempts:
                    raise CheckError(f"{method} {url}: {last}", got=type(exc).__name__) from exc
            except httpx.HTTPError as exc:
                raise CheckError(f"{method} {url}: {type(exc).__name__}: {exc}") from exc
            if self.deadline.left() <= delay:
                break
            time.sleep(delay)
            delay *= 2
        raise CheckError(f"{method} {url}: gave up after {attempt} attempts ({last})", got=last)

    def json(self, method: str, url: str, body: dict | None = None, **kw: Any) -> tuple[int, Any]:
        """Status and parsed JSON body; a body that is not JSON is a CheckError."""
        resp = self.request(method, url, body, **kw)
        try:
            return resp.status_code, resp.json()
        except ValueError as exc:
            raise CheckError(f"{method} {url}: HTTP {resp.status_code} body is not JSON: "
                             f"{resp.text[:80]!r}", expected="JSON", got=resp.text[:80]) from exc

    def stream(self, url: str, body: dict) -> StreamResult:
        """POST and read SSE until ``data: [DONE]``; the whole read is bounded by the request timeout."""
        budget = self.deadline.cap(self.cfg.request_timeout_s)
        timeout = httpx.Timeout(budget)
        t0 = time.monotonic()
        out = StreamResult()
        try:
            with self._http.stream("POST", url, json=body, timeout=timeout) as resp:
                if resp.status_code != 200:
                    resp.read()
                    raise CheckError(f"POST {url}: HTTP {resp.status_code}: {resp.text[:200]}",
                                     expected="200", got=str(resp.status_code))
                ctype = resp.headers.get("content-type", "")
                if "text/event-stream" not in ctype:
                    raise CheckError(f"POST {url}: content-type {ctype!r}", expected="text/event-stream",
                                     got=ctype)
                for payload in _sse_data(resp.iter_lines()):
                    if time.monotonic() - t0 > budget:  # a trickling stream is still bounded
                        raise CheckError("stream did not finish within the request timeout", got="timeout")
                    if payload == "[DONE]":
                        out.done = True
                        break
                    try:
                        ev = json.loads(payload)
                    except ValueError as exc:
                        raise CheckError(f"SSE event is not JSON: {payload[:80]!r}") from exc
                    out.events.append(ev)
                    if isinstance(ev, dict) and "error" in ev:
                        out.error = ev["error"] if isinstance(ev["error"], dict) else {"message": ev["error"]}
                    piece = _content(ev)
                    if piece:
                        out.pieces.append(piece)
                        out.times.append(time.monotonic() - t0)
        except httpx.TimeoutException as exc:
            raise CheckError(f"POST {url}: stream stalled ({type(exc).__name__})", got="timeout") from exc
        except httpx.HTTPError as exc:
            name = type(exc).__name__
            raise CheckError(f"POST {url}: stream broke after {len(out.events)} events: {name}",
                             expected="data: [DONE]", got=name) from exc
        return out


def _sse_data(lines: Iterator[str]) -> Iterator[str]:
    """The ``data:`` payloads of an SSE stream (multi-line data joined, comments ignored)."""
    buf: list[str] = []
    for line in lines:
        if line.startswith("data:"):
            buf.append(line[5:].lstrip(" "))
        elif not line and buf:
            yield "\n".join(buf)
            buf = []
    if buf:
        yield "\n".join(buf)


def _content(ev: Any) -> str:
    if not isinstance(ev, dict):
        return ""
    for c in ev.get("choices") or []:
        if not isinstance(c, dict):
            continue
        if isinstance(c.get("text"), str) and c["text"]:
            return c["text"]
        delta = c.get("delta")
        if isinstance(delta, dict) and isinstance(delta.get("content"), str) and delta["content"]:
            return delta["content"]
    return ""
