"""`Kube`: REST calls through the official client's ApiClient, with retries and error translation.

Why ``ApiClient.call_api`` rather than the generated per-kind APIs: the controller touches CRDs and
core kinds alike and needs explicit content types (merge patch, server-side apply); ``call_api``
still gives the official client's kubeconfig/in-cluster auth, TLS and connection pooling.

Retries: 429 and 5xx (and dropped connections) are retried with exponential backoff and full
jitter, never shorter than the server's ``Retry-After``. A wait the server asked for (a
``Retry-After`` of a second or more) is honoured in full, as often as it is asked, while it fits the
caller's deadline: a rollout's connection (:meth:`Kube.with_deadline`) gives its current stage's
deadline, anything else ``retry_window_s`` from the request's first attempt; a wait past it is not
shortened but given up at once, the error saying so. Other retries are bounded by ``attempts``. 409
Conflict is not retried here (a blind retry would overwrite someone's change): callers re-read and
retry through :meth:`Kube.read_modify_write`.

Every request has a timeout (``timeout_s``; a watch gets its own server-side timeout plus a margin),
and requests other than watches take a token from a QPS/burst bucket shared by every view.

Views (:meth:`Kube.view`): the same connection with its own request counter (per rollout, so a
rollout's report counts its own requests, not a delta of a process-wide counter), optionally a
deadline for server-directed waits (:meth:`Kube.with_deadline`: the rollout engines give their stage
deadline), and optional write fences: a fence that returns a reason refuses a write before it is
sent (``Fenced``), checked last before each attempt is sent (after the token bucket's wait). The
controller fences every write on its leadership (``incluster/leader.py``) and a rollout's writes on
its policy still existing.
"""

from __future__ import annotations

import copy
import json
import logging
import os
import random
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import urllib3
from kubernetes import client as kclient
from kubernetes import config as kconfig
from kubernetes.client.exceptions import ApiException

from lwsflow.controller.api.wire import Obj
from lwsflow.controller.errors import (
    ApiError,
    Conflict,
    Fenced,
    InvalidInput,
    ServerError,
    TooManyRequests,
    api_error_for,
)
from lwsflow.controller.kube.ratelimit import TokenBucket
from lwsflow.controller.kube.resources import Resource
from lwsflow.controller.kube.unreachable import unreachable

JsonPatch = list[Obj]  # RFC 6902 operations (a name: the method Kube.list shadows the builtin)

log = logging.getLogger("lwsflow.kube")

MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"
RETRYABLE = (TooManyRequests, ServerError)
WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})
POOL_SIZE = 64  # connections kept open to the API server (idle ones cost a socket each)
Fence = Callable[[], str | None]  # a reason to refuse writes now, or None
Deadline = Callable[[], float]  # wall seconds the caller can still wait (a rollout: its stage deadline)


def translate(exc: ApiException) -> ApiError:
    """An ``ApiException`` as the matching :mod:`lwsflow.controller.errors` class (Status message)."""
    message, reason = exc.reason or "", ""
    body = getattr(exc, "body", None)
    if body:
        try:
            doc = json.loads(body)
            message, reason = doc.get("message") or message, doc.get("reason") or ""
        except (ValueError, AttributeError):
            message = str(body)[:200]
    retry_after = None
    headers = getattr(exc, "headers", None) or {}
    if headers.get("Retry-After"):
        try:
            retry_after = float(headers["Retry-After"])
        except ValueError:
            retry_after = None
    if not exc.status:  # transport-level failure reported by the client as status 0
        return ServerError(message or "connection failed")
    return api_error_for(int(exc.status), message, reason, retry_after=retry_after)


def _client_timeout(timeout: float | None) -> float | tuple[float, float] | None:
    """The official client applies a number only when it is an ``int`` (a float like 3.0 is silently
    dropped and the call may hang forever); a (connect, read) pair is honoured for any number."""
    if timeout is None or isinstance(timeout, int):
        return timeout
    return (timeout, timeout)


class Kube:
    """One cluster connection. Thread-safe for concurrent calls (the client's pool is)."""

    def __init__(self, api_client: kclient.ApiClient, *, attempts: int = 8, base_delay: float = 0.05,
                 max_delay: float = 5.0, sleep: Callable[[float], None] = time.sleep,
                 rng: random.Random | None = None, timeout_s: float = 30.0,
                 qps: float = 50.0, burst: int = 100, retry_window_s: float = 60.0) -> None:
        self.api = api_client
        self.timeout_s = timeout_s
        self.limiter = TokenBucket(qps, burst)  # wall time: not the injected retry `sleep`
        self.fences: tuple[Fence, ...] = ()
        self.deadline: Deadline | None = None  # None: ``retry_window_s`` from a request's first attempt
        self.retry_window_s = retry_window_s
        self.written: dict[str, str] | None = None  # a view's: object path -> resourceVersion we wrote
        self.attempts = attempts
        self.base_delay = base_delay
        self.max_delay = max_delay
        self._sleep = sleep
        self._rng = rng or random.Random()
        self._lock = threading.Lock()
        self.requests: Counter[str] = Counter()  # verb -> count, including retried attempts
        self._counters: tuple[Counter[str], ...] = (self.requests,)  # this view's and its parents'
        self._retried: list[int] = [0]  # this view's retries (a list: shared with with_deadline copies)
        self._retry_counts: tuple[list[int], ...] = (self._retried,)  # this view's and its parents'
        # where requests go, and which config said so: the text of a transport failure
        self.source = "kubeconfig: (given in code)"

    @classmethod
    def connect(cls, kubeconfig: str | None = None, context: str | None = None, **kw: Any) -> Kube:
        """From ``kubeconfig`` (or $KUBECONFIG / ~/.kube/config), else the in-cluster service account."""
        cfg = kclient.Configuration()
        path = kubeconfig or os.environ.get("KUBECONFIG")
        try:
            if path or not os.environ.get("KUBERNETES_SERVICE_HOST"):
                if path and not os.path.exists(path):
                    raise InvalidInput(f"{path}: no such file", field="kubeconfig")
                kconfig.load_kube_config(config_file=path, context=context, client_configuration=cfg)
            else:
                kconfig.load_incluster_config(client_configuration=cfg)
        except kconfig.ConfigException as exc:
            raise InvalidInput(f"cannot load cluster config: {exc}", field="kubeconfig") from exc
        # urllib3 would otherwise retry 429/503 itself (sleeping on Retry-After, invisibly, and
        # on top of our bounded policy): one retry layer, this one, that counts and reports.
        cfg.retries = False
        # the client sizes its pool at 5 connections per CPU (10 on two cores): a controller with
        # informer watches, workers and concurrent rollouts would open (TLS handshake) and discard
        # a connection per request past that
        cfg.connection_pool_maxsize = max(cfg.connection_pool_maxsize, POOL_SIZE)
        kube = cls(kclient.ApiClient(cfg), **kw)
        kube.source = (f"kubeconfig: {path or kconfig.KUBE_CONFIG_DEFAULT_LOCATION}"
                       if path or not os.environ.get("KUBERNETES_SERVICE_HOST") else "in-cluster config")
        return kube

    @property
    def total_requests(self) -> int:
        with self._lock:
            return sum(self.requests.values())

    @property
    def retries(self) -> int:
        """Retried attempts sent through this view (its own views' included)."""
        return self._retried[0]

    def view(self, fence: Fence | None = None) -> Kube:
        """This connection with its own request counter (its requests still count in this one's) and,
        given ``fence``, one more condition on every write."""
        out = copy.copy(self)
        out.requests = Counter()
        out._counters = (*self._counters, out.requests)
        out._retried = [0]
        out._retry_counts = (*self._retry_counts, out._retried)
        out.written = {}
        if fence is not None:
            out.fences = (*self.fences, fence)
        return out

    def with_deadline(self, deadline: Deadline) -> Kube:
        """This very view (the same counters and write record) whose server-directed waits
        (``Retry-After``) end at ``deadline`` (wall seconds left, read at each wait)."""
        out = copy.copy(self)
        out.deadline = deadline
        return out

    def fenced(self) -> str | None:
        """Why a write would be refused now (None: it would be sent)."""
        for fence in self.fences:
            why = fence()
            if why:
                return why
        return None

    # -- raw request -------------------------------------------------------------------------------
    def request(self, method: str, path: str, *, body: Any = None, query: Obj | None = None,
                content_type: str = "application/json", preload: bool = True,
                timeout: float | None = None) -> Any:
        """One API call with bounded retries on 429/5xx/dropped connections; returns the JSON body."""
        headers = {"Accept": "application/json", "Content-Type": content_type}
        params = [(k, v) for k, v in (query or {}).items() if v is not None]
        verb = "watch" if (query or {}).get("watch") else method.lower()
        attempt = 0  # retries the server did not ask for (bounded by attempts)
        budget: float | None = None  # wall seconds left for waits at the first retry
        slept = 0.0  # since then (also bounds an injected sleep that takes no time)
        while True:
            attempt += 1
            if verb != "watch":
                self.limiter.take()
            # checked before every attempt, after the bucket's wait: a write held there past the renew
            # deadline must not go out once a standby may lead
            if method in WRITES and (why := self.fenced()):
                raise Fenced(f"{method} {path} not sent: {why}")
            with self._lock:
                for counter in self._counters:
                    counter[verb] += 1
            try:
                resp = self.api.call_api(
                    path, method, query_params=params, header_params=dict(headers), body=body,
                    auth_settings=["BearerToken"], _preload_content=False, _return_http_data_only=True,
                    _request_timeout=_client_timeout(timeout if timeout is not None else self.timeout_s))
            except ApiException as exc:
                err, cause = translate(exc), exc
                if not exc.status:  # TLS failure, reported by the client as status 0
                    err = unreachable(self.api.configuration.host, self.source, exc.reason or "")
            except (urllib3.exceptions.HTTPError, OSError) as exc:
                err, cause = unreachable(self.api.configuration.host, self.source, exc), exc
            else:
                if not preload:
                    return resp
                try:
                    data = resp.data
                finally:
                    resp.release_conn()
                doc = json.loads(data) if data else {}
                if self.written is not None and method in WRITES and isinstance(doc, dict):
                    self._wrote(path, doc)
                return doc
            if not isinstance(err, RETRYABLE):
                raise err from cause
            directed = err.retry_after is not None and err.retry_after >= 1.0
            if directed:
                attempt -= 1  # the server said when: its waits are bounded by the deadline instead
            elif attempt >= self.attempts:
                raise err from cause
            if budget is None:
                budget = self.deadline() if self.deadline is not None else self.retry_window_s
            left = budget - slept
            if self.deadline is not None:  # read again: the stage may have moved on
                left = min(left, self.deadline())
            slept += self._backoff(attempt, err, left, cause)

    def _wrote(self, path: str, doc: Obj) -> None:
        """Remember the resourceVersion our write produced (a cache older than it has not seen it)."""
        rv = (doc.get("metadata") or {}).get("resourceVersion") if doc.get("kind") != "Status" else None
        written = self.written
        if rv and written is not None:
            with self._lock:
                written[path.removesuffix("/status").removesuffix("/scale")] = str(rv)

    def _backoff(self, attempt: int, err: ApiError, left: float, cause: BaseException) -> float:
        # Full jitter (AWS architecture blog): uniform in [0, cap]; never shorter than Retry-After,
        # and a Retry-After is never cut short: past the deadline the request gives up at once.
        cap = min(self.max_delay, self.base_delay * 2 ** max(0, attempt - 1))
        delay = self._rng.uniform(0, cap)
        if err.retry_after is not None:
            delay = max(delay, err.retry_after)
            if delay > left:
                err.message += (f" (the server asked to retry after {err.retry_after:g}s; "
                                f"{max(0.0, left):.0f}s left before the deadline)")
                err.args = (f"{err.status} {err.reason}: {err.message}",)
                raise err from cause
        with self._lock:
            for count in self._retry_counts:
                count[0] += 1
        (log.info if delay >= 1.0 else log.debug)("%s: retrying in %.1fs", err, delay)
        self._sleep(delay)
        return delay

    # -- typed verbs -------------------------------------------------------------------------------
    def get(self, res: Resource, namespace: str, name: str) -> Obj:
        return self.request("GET", res.path(namespace, name))

    def list(self, res: Resource, namespace: str | None = None, *, label_selector: str = "",
             field_selector: str = "") -> tuple[list[Obj], str]:
        """Items and the list's resourceVersion (to start a watch from)."""
        doc = self.request("GET", res.path(namespace), query={
            "labelSelector": label_selector or None, "fieldSelector": field_selector or None})
        return list(doc.get("items") or []), str((doc.get("metadata") or {}).get("resourceVersion") or "")

    def create(self, res: Resource, namespace: str, obj: Obj) -> Obj:
        return self.request("POST", res.path(namespace), body=obj)

    def delete(self, res: Resource, namespace: str, name: str, *, uid: str = "") -> Obj:
        """DELETE, with a UID precondition when given (never delete a recreated namesake)."""
        body = {"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": {"uid": uid}} if uid else None
        return self.request("DELETE", res.path(namespace, name), body=body)

    def merge_patch(self, res: Resource, namespace: str, name: str, patch: Obj, *,
                    field_manager: str = "", subresource: str = "") -> Obj:
        """JSON merge patch. Put ``metadata.resourceVersion`` in ``patch`` to make it conditional."""
        return self.request("PATCH", res.path(namespace, name, subresource), body=patch,
                            content_type=MERGE_PATCH, query={"fieldManager": field_manager or None})

    def json_patch(self, res: Resource, namespace: str, name: str, ops: JsonPatch, *,
                   field_manager: str = "") -> Obj:
        return self.request("PATCH", res.path(namespace, name), body=ops, content_type=JSON_PATCH,
                            query={"fieldManager": field_manager or None})

    def apply(self, res: Resource, obj: Obj, *, field_manager: str, force: bool = True) -> Obj:
        """Server-side apply of ``obj`` (sent as JSON, which is YAML) under ``field_manager``."""
        meta = obj.get("metadata") or {}
        return self.request("PATCH", res.path(meta.get("namespace"), meta["name"]),
                            body=obj, content_type=APPLY_PATCH,
                            query={"fieldManager": field_manager, "force": "true" if force else None})

    def read_modify_write(self, res: Resource, namespace: str, name: str,
                          make_patch: Callable[[Obj], Obj | None], *, field_manager: str = "",
                          attempts: int = 10, current: Obj | None = None) -> Obj:
        """Re-read and retry on 409: ``make_patch(current)`` returns a merge patch (None: nothing to do).

        The patch carries the read resourceVersion, so a concurrent writer makes it fail with 409
        instead of being silently overwritten; then the object is read again and the patch rebuilt.
        ``current``: a copy just seen (e.g. from a watch) to try first, saving a GET on the hot path.
        """
        for attempt in range(1, attempts + 1):
            cur = current if attempt == 1 and current is not None else self.get(res, namespace, name)
            patch = make_patch(cur)
            if patch is None:
                return cur
            patch.setdefault("metadata", {})["resourceVersion"] = cur["metadata"]["resourceVersion"]
            try:
                return self.merge_patch(res, namespace, name, patch, field_manager=field_manager)
            except Conflict:
                if attempt == attempts:
                    raise
                self._sleep(self._rng.uniform(0, self.base_delay * attempt))
        raise AssertionError("unreachable")

    def get_json(self, path: str) -> Obj:
        """GET any path on the API server (e.g. the embedded cluster's ``/lwsflow/v1/clock``)."""
        return self.request("GET", path)
