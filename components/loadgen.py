"""A small seeded load generator for OpenAI-compatible servers: traffic for analysis windows.

Why not a PyPI tool: guidellm (0.8.1, vllm-project) is well kept but pulls transformers and a
tokenizer from the Hugging Face Hub, which tests and the offline demo cannot reach; llmperf on PyPI is
a 0.0.1 placeholder (the project ships from git and needs Ray). This one needs only httpx: it sends a
seeded mix of chat and completions, streaming and not, with a spread of prompt and output lengths, at
a target rate spread over the endpoints, and counts what came back.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

import httpx

_WORDS = ("the", "model", "serves", "tokens", "cluster", "group", "leader", "worker", "cache", "prefill",
          "decode", "rollout", "stage", "gate", "latency", "request", "answer", "stream", "batch", "queue")


@dataclass
class LoadStats:
    sent: int = 0
    ok: int = 0
    errors: int = 0  # an HTTP error, or no answer from an address that still served at the end
    # no answer (status 0) from an address the endpoints no longer list at ``stop()``: a request in
    # flight to, or routed on a stale list to, a pod the rollout replaced (a client-side routing loss,
    # not the release's error; real kube-proxy has the same lag)
    lost: int = 0
    by_status: dict[int, int] = field(default_factory=dict)
    endpoint_errors: int = 0  # times the endpoint source raised (the last endpoints were kept)


@dataclass(frozen=True)
class LoadSpec:
    model: str
    rate: float = 5.0  # requests per second, all endpoints together
    seed: int = 0
    stream_share: float = 0.5
    chat_share: float = 0.5
    prompt_words: tuple[int, int] = (8, 256)
    max_tokens: tuple[int, int] = (4, 32)
    timeout_s: float = 30.0
    concurrency: int = 8


class LoadGenerator:
    """``start()`` sends Poisson-paced requests to ``endpoints()`` (re-read each request, so a rollout's
    new pods get traffic) until ``stop()``; ``stats`` counts the answers."""

    def __init__(self, spec: LoadSpec, endpoints: Callable[[], list[str]]) -> None:
        self.spec, self._endpoints = spec, endpoints
        self.stats = LoadStats()
        self._rng = random.Random(spec.seed)
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(spec.concurrency)
        self._thread: threading.Thread | None = None
        self._no_answer: dict[str, int] = {}  # url -> requests that got no HTTP answer
        self._client = httpx.Client(timeout=spec.timeout_s)

    def request(self) -> tuple[str, dict]:
        """The next seeded request: (path, body)."""
        r, s = self._rng, self.spec
        prompt = " ".join(r.choice(_WORDS) for _ in range(r.randint(*s.prompt_words)))
        body: dict = {"model": s.model, "max_tokens": r.randint(*s.max_tokens),
                      "stream": r.random() < s.stream_share}
        if r.random() < s.chat_share:
            body["messages"] = [{"role": "user", "content": prompt}]
            return "/v1/chat/completions", body
        body["prompt"] = prompt
        return "/v1/completions", body

    def _send(self, url: str, path: str, body: dict) -> None:
        status = 0
        try:
            if body["stream"]:
                with self._client.stream("POST", url + path, json=body) as resp:
                    status = resp.status_code
                    for line in resp.iter_lines():
                        if line.startswith('data: {"error"'):
                            status = 500  # vLLM reports mid-stream errors inside a 200 stream
            else:
                status = self._client.post(url + path, json=body).status_code
        except httpx.HTTPError:
            status = 0
        finally:
            self._slots.release()
        with self._lock:
            self.stats.by_status[status] = self.stats.by_status.get(status, 0) + 1
            if 200 <= status < 300:
                self.stats.ok += 1
            else:
                self.stats.errors += 1
                if status == 0:
                    self._no_answer[url] = self._no_answer.get(url, 0) + 1

    def _loop(self) -> None:
        urls: list[str] = []
        while not self._stop.wait(self._rng.expovariate(self.spec.rate)):
            try:
                urls = self._endpoints()
            except Exception:  # the endpoint source hiccuped (API timeout): keep the last ones
                self.stats.endpoint_errors += 1
            if not urls:
                continue
            url = self._rng.choice(sorted(urls))
            path, body = self.request()
            if not self._slots.acquire(blocking=False):
                continue  # every slot busy: the server is slower than the rate; do not pile up
            with self._lock:
                self.stats.sent += 1
            threading.Thread(target=self._send, args=(url, path, body), daemon=True).start()

    def start(self) -> LoadGenerator:
        self._thread = threading.Thread(target=self._loop, name="loadgen", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> LoadStats:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        for _ in range(self.spec.concurrency):  # wait for requests in flight
            self._slots.acquire(timeout=self.spec.timeout_s)
        self._client.close()
        self._count_lost()
        return self.stats

    def _count_lost(self) -> None:
        if not self._no_answer:
            return
        try:
            serving = set(self._endpoints())
        except Exception:  # cannot tell which addresses went away: every failure stays an error
            return
        with self._lock:
            for url, n in self._no_answer.items():
                if url not in serving:
                    self.stats.errors -= n
                    self.stats.lost += n
            self._no_answer.clear()

    def __enter__(self) -> LoadGenerator:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def pod_endpoints(pods: list[dict], port: int) -> list[str]:
    """Base URLs of the running leader pods among ``pods`` on ``port``; a terminating pod is left
    out, as the endpoints controller takes it out of a Service's ready addresses."""
    from lwsflow.controller.api import labels as L

    out = []
    for p in pods:
        status = p.get("status") or {}
        leader = ((p.get("metadata") or {}).get("labels") or {}).get(L.WORKER_INDEX, "0") == "0"
        gone = (p.get("metadata") or {}).get("deletionTimestamp")
        if leader and not gone and status.get("phase") == "Running" and status.get("podIP"):
            out.append(f"http://{status['podIP']}:{port}")
    return sorted(out)


class ServingPods:
    """The running leader pods of ``selector`` in ``namespace`` as base URLs, each on its own serving
    port (the ``lwsflow.io/serving-port`` annotation), re-read at most twice a second: the endpoints
    of ``rollout --load`` without ``--load-url``. ``model()``: their ``lwsflow.io/served-model``."""

    def __init__(self, list_pods: Callable[[], list[dict]]) -> None:
        self._list = list_pods
        self._at = -1.0
        self._urls: list[str] = []
        self._lock = threading.Lock()

    def __call__(self) -> list[str]:
        import time

        from lwsflow.controller.api import labels as L

        with self._lock:
            if time.monotonic() - self._at > 0.5:
                urls = []
                for p in self._list():
                    port = ((p.get("metadata") or {}).get("annotations") or {}).get(L.SERVING_PORT)
                    if port:
                        urls += pod_endpoints([p], int(port))
                self._at, self._urls = time.monotonic(), sorted(urls)
            return self._urls

    def model(self) -> str:
        from lwsflow.controller.api import labels as L

        return next((m for p in self._list()
                     if (m := ((p.get("metadata") or {}).get("annotations") or {}).get(L.SERVED_MODEL))), "")
