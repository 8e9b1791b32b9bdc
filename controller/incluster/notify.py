"""Webhook notifications (Slack-compatible ``{"text": ...}`` JSON), sent off the reconcile path.

``send`` only enqueues: one background thread posts, retrying with exponential backoff, so a slow
or dead webhook never delays a rollout. The URL is read from the policy's Secret when sending and
is never logged, put in status or in an event: logs name the Secret and key only.

A post is a write to the outside world: ``fence`` (the controller's leadership fence) is checked
immediately before each one, so a deposed leader's queued messages are dropped, never announced.
"""

from __future__ import annotations

import base64
import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import httpx

from lwsflow.controller import httpclient
from lwsflow.controller.errors import ApiError
from lwsflow.controller.kube.client import Fence, Kube
from lwsflow.controller.kube.resources import SECRET
from lwsflow.controller.policy.model import Webhook

log = logging.getLogger("lwsflow.controller.notify")


@dataclass(frozen=True)
class Message:
    namespace: str
    webhooks: tuple[Webhook, ...]
    text: str


class Notifier:
    """A queue and one sender thread; ``attempts`` tries per webhook, backoff doubling from ``base_s``."""

    def __init__(self, kube: Kube, *, attempts: int = 5, base_s: float = 0.5, timeout_s: float = 5.0,
                 post: Callable[[str, dict[str, str]], int] | None = None,
                 fence: Fence | None = None) -> None:
        self.kube, self.attempts, self.base_s, self.timeout_s = kube, attempts, base_s, timeout_s
        self.fence = fence  # a reason not to post now (None: post); the controller sets its own
        self.dropped = 0  # messages the fence refused
        self._post = post or self._http_post
        self._q: queue.Queue[Message | None] = queue.Queue(maxsize=1000)
        self.sent = 0
        self.failed = 0
        self._thread = threading.Thread(target=self._loop, name="notifier", daemon=True)
        self._thread.start()

    def send(self, namespace: str, webhooks: list[Webhook], text: str) -> None:
        if not webhooks:
            return
        try:
            self._q.put_nowait(Message(namespace, tuple(webhooks), text))
        except queue.Full:
            log.warning("notification queue full; dropped: %s", text[:80])

    def close(self) -> None:
        self._q.put(None)

    def drain(self, timeout_s: float) -> bool:
        """Wait until every queued message was sent, given up or fenced off (a stopping controller
        delivers what it announced while it still leads); False when ``timeout_s`` ran out first."""
        end = time.monotonic() + timeout_s
        with self._q.all_tasks_done:
            while self._q.unfinished_tasks:
                left = end - time.monotonic()
                if left <= 0:
                    return False
                self._q.all_tasks_done.wait(left)
        return True

    def _http_post(self, url: str, body: dict[str, str]) -> int:
        return httpclient.shared().post(url, json=body, timeout=self.timeout_s).status_code

    def _url(self, namespace: str, hook: Webhook) -> str | None:
        ref = hook.secretKeyRef
        try:
            secret = self.kube.get(SECRET, namespace, ref.name)
        except ApiError as exc:
            # the API server's words (e.g. the 403 naming the verb a Role lacks), never the Secret's
            log.warning("webhook secret %s/%s: %s", namespace, ref.name, str(exc)[:300])
            return None
        raw = (secret.get("data") or {}).get(ref.key)
        if raw is None:
            log.warning("webhook secret %s/%s has no key %r", namespace, ref.name, ref.key)
            return None
        return base64.b64decode(raw).decode().strip()

    def _loop(self) -> None:
        while (msg := self._q.get()) is not None:
            try:
                for hook in msg.webhooks:
                    self._deliver(msg, hook)
            finally:
                self._q.task_done()

    def _deliver(self, msg: Message, hook: Webhook) -> None:
        where = f"secret {msg.namespace}/{hook.secretKeyRef.name}[{hook.secretKeyRef.key}]"
        detail = ""
        for attempt in range(1, self.attempts + 1):
            url = self._url(msg.namespace, hook)
            if url is None:
                detail = "the Secret could not be read (logged above)"
            else:
                if self.fence is not None and (why := self.fence()):  # last, right before the post
                    self.dropped += 1
                    log.info("webhook (%s): not sent: %s", where, why)
                    return
                try:
                    code = self._post(url, {"text": msg.text})
                except httpx.HTTPError as exc:
                    code, detail = 0, type(exc).__name__
                else:
                    detail = f"HTTP {code}"
                if 200 <= code < 300:
                    self.sent += 1
                    return
                log.info("webhook (%s) attempt %d: %s", where, attempt, detail)
            if attempt < self.attempts:
                time.sleep(self.base_s * 2 ** (attempt - 1))
        self.failed += 1
        log.warning("webhook (%s): gave up after %d attempts (last: %s)", where, self.attempts, detail)
