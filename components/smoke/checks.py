"""The per-endpoint checks: health, version, models, completions and chat (plain and streaming),
error bodies, metrics, and the TTFT / inter-token latency gates.

Checks run in a fixed order and a check whose prerequisite failed is reported as skipped (with the
reason) rather than piling more failures on one root cause: a wrong served model fails ``models``,
not also every completion.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

from lwsflow.components.smoke import scrape, shapes
from lwsflow.components.smoke.client import CheckError, SmokeClient
from lwsflow.components.smoke.model import CheckResult, Endpoint, SmokeConfig

UNKNOWN_MODEL = "lwsflow-smoke-no-such-model"
GENERATION = ("completions", "chat", "completions-stream", "chat-stream")

Outcome = tuple[str, dict[str, Any]]  # (detail, data)


def timed(name: str, target: str, fn: Callable[[], Outcome]) -> CheckResult:
    """Run one check function; a CheckError becomes a failed result carrying expected/got."""
    t0 = time.monotonic()
    try:
        detail, data = fn()
        return CheckResult(name=name, target=target, passed=True, detail=detail,
                           duration_s=round(time.monotonic() - t0, 4), data=data)
    except CheckError as exc:
        return CheckResult(name=name, target=target, passed=False, detail=str(exc),
                           duration_s=round(time.monotonic() - t0, 4), expected=exc.expected, got=exc.got)


def skipped(name: str, target: str, because: str) -> CheckResult:
    return CheckResult(name=name, target=target, passed=False, skipped=True, detail=f"not run: {because}")


class EndpointChecks:
    """All checks against one endpoint, in order, with prerequisites."""

    def __init__(self, ep: Endpoint, cfg: SmokeConfig, client: SmokeClient, prompt: str,
                 gateway: bool = False) -> None:
        self.ep, self.cfg, self.http, self.prompt = ep, cfg, client, prompt
        self.gateway = gateway  # a gateway has no engine /health or /metrics of its own
        self.base = ep.url.rstrip("/")
        self.model = ep.model or cfg.model
        self.results: list[CheckResult] = []
        self.ttfts: list[float] = []
        self.itls: list[float] = []
        self._before: scrape.Scrape | None = None

    def _add(self, name: str, fn: Callable[[], Outcome], needs: tuple[str, ...] = ()) -> bool:
        failed = [r.name for r in self.results if r.name in needs and not r.passed]
        if failed:
            self.results.append(skipped(name, self.ep.target, f"{', '.join(failed)} failed"))
            return False
        res = timed(name, self.ep.target, fn)
        self.results.append(res)
        return res.passed

    def run(self) -> list[CheckResult]:
        if not self.gateway:
            self._add("health", self.health)
        if self.cfg.expected_version and not self.gateway:
            self._add("version", self.version, ("health",))
        self._add("models", self.models, ("health",))
        self._before = self._try_scrape()
        gen_needs = ("health", "models")
        self._add("completions", lambda: self.generate(chat=False), gen_needs)
        self._add("chat", lambda: self.generate(chat=True), gen_needs)
        self._add("completions-stream", lambda: self.stream(chat=False), gen_needs)
        self._add("chat-stream", lambda: self.stream(chat=True), gen_needs)
        self._add("error-shape", self.error_shape, ("health",))
        if not self.gateway:
            self._add("metrics", self.metrics, ("health",))
        streams_ok = [r for r in self.results if r.name.endswith("-stream") and r.passed]
        lat_needs = () if streams_ok else ("completions-stream", "chat-stream")
        self._add("ttft", self.ttft_gate, lat_needs)
        self._add("itl", self.itl_gate, lat_needs)
        return self.results

    # -- checks ----------------------------------------------------------------------------------------
    def health(self) -> Outcome:
        """GET /health until 200, retrying a warming pod (refused, 503) within ``warmup_s``."""
        end = time.monotonic() + self.cfg.warmup_s
        delay, attempts, last = self.cfg.backoff_s, 0, ""
        while True:
            attempts += 1
            try:
                resp = self.http.request("GET", f"{self.base}/health", retry=False)
                if resp.status_code == 200:
                    return f"200 after {attempts} attempt(s)", {"attempts": attempts}
                last = f"HTTP {resp.status_code}"
            except CheckError as exc:
                if exc.got == "timeout":  # accepted and never answered: a hang, not a warming pod
                    raise
                last = str(exc)
            if time.monotonic() + delay > end or self.http.deadline.left() <= delay:
                raise CheckError(f"/health not 200 after {attempts} attempt(s) in {self.cfg.warmup_s:g}s: "
                                 f"{last}", expected="200", got=last)
            time.sleep(delay)
            delay = min(delay * 2, 5.0)

    def version(self) -> Outcome:
        status, body = self.http.json("GET", f"{self.base}/version")
        got = body.get("version") if isinstance(body, dict) else None
        if status != 200 or got != self.cfg.expected_version:
            raise CheckError(f"/version: HTTP {status} {got!r}", expected=self.cfg.expected_version,
                             got=str(got))
        return f"version {got}", {"version": got}

    def models(self) -> Outcome:
        status, body = self.http.json("GET", f"{self.base}/v1/models")
        if status != 200:
            raise CheckError(f"/v1/models: HTTP {status}: {str(body)[:120]}", expected="200", got=str(status))
        data = body.get("data") if isinstance(body, dict) else None
        if not isinstance(data, list) or not all(isinstance(m, dict) and "id" in m for m in data):
            raise CheckError(f"/v1/models: no data[].id list: {str(body)[:120]}")
        ids = [m["id"] for m in data]
        if self.model is None:
            if not ids:
                raise CheckError("/v1/models lists no model", expected="one model", got="[]")
            self.model = ids[0]
            return f"no expected model given; serving {ids}", {"models": ids}
        if self.model not in ids:
            raise CheckError(f"/v1/models does not list {self.model!r}: {ids}", expected=self.model,
                             got=", ".join(ids))
        return f"lists {self.model}", {"models": ids}

    def _body(self, chat: bool, stream: bool) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model, "max_tokens": self.cfg.max_tokens, "temperature": 0}
        if chat:
            body["messages"] = [{"role": "user", "content": self.prompt}]
        else:
            body["prompt"] = self.prompt
        if stream:
            body |= {"stream": True, "stream_options": {"include_usage": True}}
        return body

    def generate(self, chat: bool) -> Outcome:
        path = "/v1/chat/completions" if chat else "/v1/completions"
        status, body = self.http.json("POST", f"{self.base}{path}", self._body(chat, False))
        if status != 200:
            form = shapes.error_form(body)
            msg = form[1] if form else str(body)[:160]
            raise CheckError(f"{path}: HTTP {status}: {msg}", expected="200", got=str(status))
        problems = shapes.completion_problems(body, self.model or "", chat, self.cfg.max_tokens)
        if problems:
            raise CheckError(f"{path}: " + "; ".join(problems), expected="valid response", got=problems[0])
        ch = body["choices"][0]
        text = ch["message"]["content"] if chat else ch["text"]
        return (f"{body['usage']['completion_tokens']} tokens, finish={ch['finish_reason']}",
                {"text": text[:80], "usage": body["usage"]})

    def stream(self, chat: bool) -> Outcome:
        path = "/v1/chat/completions" if chat else "/v1/completions"
        res = self.http.stream(f"{self.base}{path}", self._body(chat, True))
        if res.error is not None:
            raise CheckError(f"{path} stream: error event: {res.error.get('message', res.error)}",
                             expected="no error event", got=str(res.error.get("message"))[:80])
        problems = shapes.stream_problems(res.events, res.pieces, res.done, self.model or "", chat,
                                          self.cfg.max_tokens)
        if problems:
            raise CheckError(f"{path} stream: " + "; ".join(problems), got=problems[0])
        ttft = res.times[0]
        gaps = [b - a for a, b in zip(res.times, res.times[1:], strict=False)]
        self.ttfts.append(ttft)
        self.itls.extend(gaps)
        return (f"{len(res.pieces)} pieces, ttft {ttft * 1000:.1f} ms",
                {"ttft_s": round(ttft, 4), "itl_mean_s": round(statistics.fmean(gaps), 4) if gaps else None})

    def error_shape(self) -> Outcome:
        """Ask for a model that does not exist: expect 404 with a vLLM (nested) or SGLang (flat) body."""
        body = {"model": UNKNOWN_MODEL, "prompt": "x", "max_tokens": 1}
        resp = self.http.request("POST", f"{self.base}/v1/completions", body)
        try:
            parsed = resp.json()
        except ValueError:
            parsed = None
        form = shapes.error_form(parsed)
        if resp.status_code not in (400, 404) or form is None:
            raise CheckError(f"unknown model: HTTP {resp.status_code} {resp.text[:100]!r}",
                             expected="400/404 with an OpenAI error body (nested or flat)",
                             got=f"{resp.status_code} {resp.text[:60]}")
        return f"HTTP {resp.status_code}, {form[0]} error form", {"form": form[0]}

    def _try_scrape(self) -> scrape.Scrape | None:
        try:
            resp = self.http.request("GET", f"{self.base}/metrics", retry=False)
            return scrape.parse(resp.text) if resp.status_code == 200 else None
        except (CheckError, scrape.MetricsError):
            return None

    def metrics(self) -> Outcome:
        resp = self.http.request("GET", f"{self.base}/metrics")
        if resp.status_code != 200:
            raise CheckError(f"/metrics: HTTP {resp.status_code}", expected="200", got=str(resp.status_code))
        try:
            now = scrape.parse(resp.text)
        except scrape.MetricsError as exc:
            raise CheckError(f"/metrics: {exc}", expected="Prometheus text", got=resp.text[:60]) from exc
        missing = now.missing()
        if missing:
            raise CheckError(f"/metrics lacks {', '.join(missing)}", expected="vLLM metric families",
                             got=f"{len(now.families)} families")
        served = sum(1 for r in self.results if r.name in GENERATION and r.passed)
        ok_now, ok_before = _successes(now), _successes(self._before) if self._before else 0.0
        if self._before is not None and ok_now - ok_before < served:
            raise CheckError(f"request_success_total rose by {ok_now - ok_before:g} for {served} answered "
                             "requests", expected=f">= {served}", got=f"{ok_now - ok_before:g}")
        detail = f"{len(now.families)} families; success +{ok_now - ok_before:g}"
        return detail, {"families": len(now.families)}

    def ttft_gate(self) -> Outcome:
        if not self.ttfts:
            raise CheckError("no TTFT measured")
        worst = max(self.ttfts)
        gate = self.cfg.max_ttft_s
        if gate is not None and worst > gate:
            raise CheckError(f"TTFT {worst * 1000:.0f} ms > {gate * 1000:.0f} ms", expected=f"<= {gate}s",
                             got=f"{worst:.3f}s")
        return f"max {worst * 1000:.1f} ms" + (f" (gate {gate * 1000:.0f} ms)" if gate else ""), \
            {"ttft_max_s": round(worst, 4)}

    def itl_gate(self) -> Outcome:
        if not self.itls:
            return "no inter-token gaps (one-piece streams)", {}
        mean = statistics.fmean(self.itls)
        gate = self.cfg.max_itl_s
        if gate is not None and mean > gate:
            raise CheckError(f"mean ITL {mean * 1000:.0f} ms > {gate * 1000:.0f} ms", expected=f"<= {gate}s",
                             got=f"{mean:.3f}s")
        return f"mean {mean * 1000:.1f} ms, max {max(self.itls) * 1000:.1f} ms", \
            {"itl_mean_s": round(mean, 4), "itl_max_s": round(max(self.itls), 4)}


def _successes(s: scrape.Scrape) -> float:
    """Requests that finished normally (stop/length) according to ``vllm:request_success_total``."""
    return sum(s.total("vllm:request_success_total", finished_reason=r) or 0.0 for r in ("stop", "length"))
