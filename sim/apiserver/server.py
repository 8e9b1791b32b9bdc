"""The HTTP front of the embedded cluster: a threaded stdlib server speaking the Kubernetes API.

One thread per connection (HTTP/1.1 keep-alive); watches stream newline-delimited JSON events with
chunked encoding. Every request is authenticated (bearer token), may be answered by an injected
fault, and is recorded in ``request_log`` as the RBAC verb it needs, so a test can derive the least
privilege a client really uses.
"""

from __future__ import annotations

import json
import socket
import ssl
import threading
from collections import deque
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from lwsflow.controller.errors import (
    ApiError,
    BadRequest,
    InvalidInput,
    MethodNotAllowed,
    NotFound,
    ServerError,
    Unprocessable,
)
from lwsflow.sim import kinds
from lwsflow.sim.apiserver import discovery, openapi, openapi_v2, tables
from lwsflow.sim.apiserver.auth import Authenticator
from lwsflow.sim.apiserver.faults import ApiFaults, RequestInfo
from lwsflow.sim.apiserver.rbac import Attributes, User, authorize, forbidden_error, impersonate
from lwsflow.sim.apiserver.resources import Resources, WriteOptions, decode_body
from lwsflow.sim.apiserver.routing import Route, parse_resource_path
from lwsflow.sim.apiserver.tls import self_signed
from lwsflow.sim.apiserver.watch import WatchOptions, stream_watch
from lwsflow.sim.httpserver import QuietThreadingHTTPServer, read_body, send_body
from lwsflow.sim.kubeconfig import register_ca, write_kubeconfig
from lwsflow.sim.store import Store, rfc3339

RequestRecord = tuple[str, str, str, str, str, str]  # verb, group, resource, subresource, namespace, name
_HEALTH = ("/healthz", "/readyz", "/livez")


class ApiServer:
    """Serve ``store`` on ``host:port`` (127.0.0.1; port 0: an ephemeral port); see the module doc.

    ``token``: required as ``Authorization: Bearer`` on every request but the health probes (401
    otherwise); with a token the server speaks HTTPS with a fresh self-signed certificate, since
    client-go sends tokens only over TLS (``tls`` overrides). ``clock``/``speed``: what
    ``/lwsflow/v1/clock`` reports (default: the store's clock). ``faults``: injected errors (off by
    default). ``gone_as_http``: answer a too-old watch resourceVersion with HTTP 410 instead of the
    ERROR event kube-apiserver sends. Use ``write_kubeconfig(path)`` after ``start()``.
    """

    def __init__(
        self,
        store: Store,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        token: str | None = None,
        clock: Callable[[], float] | None = None,
        faults: ApiFaults | None = None,
        speed: float | Callable[[], float] = 1.0,
        gone_as_http: bool = False,
        bookmark_interval_s: float = 5.0,
        request_log_max: int = 100_000,
        tls: bool | None = None,
    ) -> None:
        self.store, self.host, self.port, self.token = store, host, port, token
        self.clock = clock or store.now
        self.faults = faults or ApiFaults()
        self.speed = speed
        self.gone_as_http = gone_as_http  # False: 410 as a watch ERROR event (what kube-apiserver sends)
        self.bookmark_interval_s = bookmark_interval_s
        self.resources = Resources(store)
        self.auth = Authenticator(store, token)
        # the latest requests (bounded: `sim serve` runs for days); verbs_used() keeps every verb seen
        self.request_log: deque[RequestRecord] = deque(maxlen=request_log_max)
        self._verbs: set[tuple[str, str, str]] = set()
        self._log_lock = threading.Lock()
        self._httpd: QuietThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.stopping = threading.Event()
        # client-go sends bearer tokens only over TLS: serve HTTPS whenever a token guards the server
        self.tls = self_signed(host) if (token is not None if tls is None else tls) else None

    # -- lifecycle -----------------------------------------------------------------------------------
    def start(self) -> str:
        """Start serving in a background thread; returns the base URL (``http://127.0.0.1:PORT``)."""
        self.stopping.clear()
        handler = type("Handler", (_Handler,), {"api": self})
        self._httpd = QuietThreadingHTTPServer((self.host, self.port), handler)
        self.port = self._httpd.server_address[1]
        if self.tls is not None:
            # handshake lazily in the connection's own thread, not in the accept loop
            self._httpd.socket = self.tls.server_context().wrap_socket(
                self._httpd.socket, server_side=True, do_handshake_on_connect=False
            )
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.1},
            name=f"apiserver:{self.port}",
            daemon=True,
        )
        self._thread.start()
        register_ca(self.base_url, self.ca_pem)
        return self.base_url

    @property
    def base_url(self) -> str:
        return f"{'https' if self.tls else 'http'}://{self.host}:{self.port}"

    @property
    def ca_pem(self) -> bytes | None:
        """The PEM of the server certificate (its own CA), or None when serving plain HTTP."""
        return self.tls.cert_pem if self.tls else None

    def write_kubeconfig(self, path: str | Path, context: str = "lwsflow-sim") -> Path:
        """A kubeconfig for this server (token and CA included); call after ``start``."""
        return write_kubeconfig(path, self.base_url, self.token, context, ca_pem=self.ca_pem)

    def stop(self) -> None:
        self.stopping.set()
        register_ca(self.base_url, None)
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> ApiServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def verbs_used(self) -> set[tuple[str, str, str]]:
        """(group, resource[/subresource], verb) triples seen so far: the RBAC rules a client needed."""
        with self._log_lock:
            return set(self._verbs)

    def log(self, rec: RequestRecord) -> None:
        verb, group, resource, sub, _, _ = rec
        with self._log_lock:
            self.request_log.append(rec)
            self._verbs.add((group, f"{resource}/{sub}" if sub else resource, verb))

    def current_speed(self) -> float:
        return float(self.speed() if callable(self.speed) else self.speed)


def _verb(method: str, route: Route, q: dict[str, str]) -> str:
    if method == "GET":
        if q.get("watch", "").lower() in ("true", "1"):
            return "watch"  # also the old per-object form /namespaces/ns/pods/x?watch=true
        return "list" if not route.name else "get"
    if method == "DELETE":
        return "delete" if route.name else "deletecollection"
    return {"POST": "create", "PUT": "update", "PATCH": "patch"}.get(method, method.lower())


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    api: ApiServer
    user: User  # who the current request is from (authenticated, maybe impersonated)

    def setup(self) -> None:
        super().setup()
        # small JSON answers: without NODELAY, Nagle + the client's delayed ACK cost ~40 ms a request
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # the request log is structured (ApiServer.request_log); no stderr noise

    def handle(self) -> None:
        try:
            super().handle()
        except (ConnectionResetError, BrokenPipeError, ssl.SSLError):
            self.close_connection = True  # a client killed mid-request (TLS handshake, request line)

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def do_PUT(self) -> None:
        self._serve("PUT")

    def do_PATCH(self) -> None:
        self._serve("PATCH")

    def do_DELETE(self) -> None:
        self._serve("DELETE")

    # -- responses -----------------------------------------------------------------------------------
    def send_json(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        data = body if isinstance(body, bytes) else json.dumps(body, separators=(",", ":")).encode()
        send_body(self, status, data, "application/json", headers)

    def send_error_status(self, err: ApiError) -> None:
        headers = {}
        if err.retry_after is not None:
            headers["Retry-After"] = str(int(err.retry_after))
        self.send_json(err.status, err.to_status(), headers)

    # -- dispatch ------------------------------------------------------------------------------------
    def _serve(self, method: str) -> None:
        api = self.api
        url = urlsplit(self.path)
        q = {k: v[-1] for k, v in parse_qs(url.query, keep_blank_values=True).items()}
        try:
            raw = read_body(self) if method in ("POST", "PUT", "PATCH", "DELETE") else b""
            if url.path in _HEALTH or url.path.startswith(tuple(f"{h}/" for h in _HEALTH)):
                self.send_json(200, b"ok")
                return
            user = api.auth.authenticate(self.headers.get("Authorization"), api.clock())
            if self.headers.get("Impersonate-User"):  # kubectl --as / --as-group
                user = impersonate(api.store, user, self.headers["Impersonate-User"],
                                   tuple(self.headers.get_all("Impersonate-Group") or ()))
            self.user = user
            route = parse_resource_path(url.path)
            if route is not None:
                verb = _verb(method, route, q)
                t = route.rtype
                api.log((verb, t.group, t.plural, route.subresource, route.namespace, route.name))
                if not user.is_admin:
                    self._authorize(user, verb, route)
                if api.faults.request_hook is not None:
                    api.faults.request_hook(RequestInfo(
                        verb, url.path, f"{t.plural}/{route.subresource}" if route.subresource else t.plural,
                        route.namespace or "", route.name or "", user.name,
                        str(self.headers.get("User-Agent") or "")))
                fault = api.faults.request_fault(verb, url.path)
                if fault is not None:
                    raise fault
                try:
                    self._resource(method, verb, route, q, raw)
                except NotFound as err:
                    raise _qualified(err, route) from None
                return
            if not user.is_admin:
                attrs = Attributes(method.lower(), path=url.path)
                decision = authorize(api.store, user, attrs)
                if not decision.allowed:
                    raise forbidden_error(user, attrs, decision.reason)
            if method != "GET":
                raise MethodNotAllowed("the server does not allow this method on the requested resource")
            fault = api.faults.request_fault("get", url.path)
            if fault is not None:
                raise fault
            self._static(url.path)
        except ApiError as err:
            self.send_error_status(err)
        except InvalidInput as err:  # an unparsable body (bad YAML/JSON, bomb, non-UTF-8)
            self.send_error_status(BadRequest(str(err)))
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError):  # the client went away (killed)
            self.close_connection = True
        except Exception as err:  # a bug must cost one request a 500, never the connection thread
            self.close_connection = True
            self.send_error_status(ServerError(f"internal error: {type(err).__name__}: {err}"))

    def _authorize(self, user: User, verb: str, route: Route) -> None:
        """RBAC for one resource request; an apply that would create the object also needs ``create``
        (kube-apiserver authorises the create its patch handler performs)."""
        t, store = route.rtype, self.api.store
        checks = [verb]
        applying = "apply-patch" in (self.headers.get("Content-Type") or "")
        if (verb == "patch" and applying and not route.subresource
                and store.get_raw(t.key, route.namespace, route.name) is None):
            checks.append("create")
        for v in checks:
            attrs = Attributes(v, t.group, t.plural, route.subresource, route.namespace, route.name)
            decision = authorize(store, user, attrs)
            if not decision.allowed:
                raise forbidden_error(user, attrs, decision.reason)

    def _static(self, path: str) -> None:
        api = self.api
        parts = [p for p in path.split("/") if p]
        body: Any = None
        if path == "/version":
            body = discovery.version()
        elif path == "/api":
            body = discovery.api_versions(f"{api.host}:{api.port}")
        elif path == "/apis":
            body = discovery.api_group_list()
        elif path == "/api/v1":
            body = discovery.resource_list("", "v1")
        elif len(parts) == 2 and parts[0] == "apis":
            body = discovery.api_group(parts[1])
        elif len(parts) == 3 and parts[0] == "apis":
            body = discovery.resource_list(parts[1], parts[2])
        elif path.rstrip("/") == "/openapi/v2":
            if openapi_v2.wants_protobuf(self.headers.get("Accept") or ""):
                send_body(self, 200, openapi_v2.document_protobuf(), openapi_v2.PROTOBUF, None)
                return
            body = openapi_v2.document_json()
        elif path.rstrip("/") == "/openapi/v3":
            body = openapi.root_document()
        elif path.startswith("/openapi/v3/"):
            body = openapi.document_for_path(path)
        elif path == "/lwsflow/v1/clock":
            body = {"now": api.clock(), "speed": api.current_speed()}
        if body is None:
            raise NotFound("the server could not find the requested resource")
        self.send_json(200, body)

    def _resource(self, method: str, verb: str, route: Route, q: dict[str, str], raw: bytes) -> None:
        res = self.api.resources
        accept = self.headers.get("Accept") or ""
        as_table = "as=Table" in accept
        if verb == "watch":
            stream_watch(
                self,
                route,
                q,
                WatchOptions(
                    table=as_table,
                    faults=self.api.faults,
                    gone_as_http=self.api.gone_as_http,
                    bookmark_interval_s=self.api.bookmark_interval_s,
                    stopping=self.api.stopping,
                ),
            )
            return
        opts = WriteOptions(
            manager=q.get("fieldManager") or _manager_from_agent(self.headers.get("User-Agent")),
            manager_given=bool(q.get("fieldManager")),
            field_validation=q.get("fieldValidation") or "Warn",
            dry_run=q.get("dryRun") == "All",
            force=q.get("force", "").lower() == "true",
        )
        status = 200
        create_only = route.subresource == "token" or route.rtype is kinds.SELF_SUBJECT_ACCESS_REVIEW
        if verb != "create" and create_only:
            raise MethodNotAllowed("the server does not allow this method on the requested resource")
        if verb == "get":
            body = res.get(route)
        elif verb == "list":
            body = res.list(route, q)
        elif verb == "create" and route.subresource == "token":
            body, status = self._token_request(route, raw), 201
        elif verb == "create" and route.rtype is kinds.SELF_SUBJECT_ACCESS_REVIEW:
            body, status = self._access_review(decode_body(raw, self.headers.get("Content-Type", ""))), 201
        elif verb == "create":
            if route.name:
                raise MethodNotAllowed("POST to a named resource is not allowed")
            body = res.create(route, decode_body(raw, self.headers.get("Content-Type", "")), opts)
            status = 201
        elif verb == "update":
            body = res.update(route, decode_body(raw, self.headers.get("Content-Type", "")), opts)
        elif verb == "patch":
            existed = route.subresource or res.store.try_get(route.rtype.key, route.namespace, route.name)
            body = res.patch(route, raw, self.headers.get("Content-Type", ""), opts)
            status = 200 if existed else 201
        elif verb == "delete":
            body = res.delete(route, q, decode_body(raw) if raw else None)
        elif verb == "deletecollection":
            body = res.delete_collection(route, q)
        else:
            raise BadRequest(f"unsupported verb {verb}")
        if as_table and verb in ("get", "list"):
            now = self.api.store.now()
            include = q.get("includeObject") or "Metadata"
            if verb == "get":
                body = (
                    tables.table(
                        route.rtype,
                        [body],
                        now,
                        {"resourceVersion": body["metadata"].get("resourceVersion", "")},
                        include,
                    )
                    if route.subresource != "scale"
                    else body
                )
            else:
                body = tables.table(route.rtype, body["items"], now, body["metadata"], include)
        headers = (
            {"Warning": ", ".join(f'299 - "{w.replace(chr(34), chr(92) + chr(34))}"' for w in opts.warnings)}
            if opts.warnings
            else None
        )
        self.send_json(status, body, headers)

    def _token_request(self, route: Route, raw: bytes) -> dict[str, Any]:
        """TokenRequest (authentication.k8s.io/v1): a token for the ServiceAccount, default 1 hour."""
        api = self.api
        sa = api.store.get(kinds.SERVICE_ACCOUNT.key, route.namespace, route.name)
        req = decode_body(raw, self.headers.get("Content-Type", "")) if raw else None
        spec = dict((req or {}).get("spec") or {}) if isinstance(req, dict) else {}
        seconds = spec.get("expirationSeconds", 3600)
        if not isinstance(seconds, int) or isinstance(seconds, bool) or seconds < 600:
            raise Unprocessable(
                f'TokenRequest.authentication.k8s.io "{route.name}" is invalid: spec.expirationSeconds: '
                f"Invalid value: {seconds}: may not specify a duration less than 10 minutes",
                details={"name": route.name, "group": "authentication.k8s.io", "kind": "TokenRequest"},
            )
        now = api.clock()
        token = api.auth.mint(sa, now + seconds)
        return {
            "kind": "TokenRequest",
            "apiVersion": "authentication.k8s.io/v1",
            "metadata": {"name": route.name, "namespace": route.namespace, "creationTimestamp": None},
            "spec": {"audiences": spec.get("audiences") or ["https://kubernetes.default.svc"],
                     "expirationSeconds": seconds, "boundObjectRef": spec.get("boundObjectRef")},
            "status": {"token": token, "expirationTimestamp": rfc3339(now + seconds)},
        }

    def _access_review(self, review: Any) -> dict[str, Any]:
        """SelfSubjectAccessReview: may the caller do this? (``kubectl auth can-i``)."""
        spec = (review.get("spec") or {}) if isinstance(review, dict) else {}
        ra, nra = spec.get("resourceAttributes"), spec.get("nonResourceAttributes")
        if ra:
            attrs = Attributes(ra.get("verb", ""), ra.get("group", ""), ra.get("resource", ""),
                               ra.get("subresource", ""), ra.get("namespace", ""), ra.get("name", ""))
        elif nra:
            attrs = Attributes(nra.get("verb", ""), path=nra.get("path", "") or "/")
        else:
            raise Unprocessable(
                "SelfSubjectAccessReview.authorization.k8s.io \"\" is invalid: spec.resourceAttributes: "
                "Invalid value: \"null\": exactly one of nonResourceAttributes or resourceAttributes "
                "must be specified",
                details={"group": "authorization.k8s.io", "kind": "SelfSubjectAccessReview"},
            )
        decision = authorize(self.api.store, self.user, attrs)
        status: dict[str, Any] = {"allowed": decision.allowed}
        if decision.reason:
            status["reason"] = decision.reason
        return {
            "kind": "SelfSubjectAccessReview",
            "apiVersion": "authorization.k8s.io/v1",
            "metadata": {"creationTimestamp": None},
            "spec": spec,
            "status": status,
        }


def _qualified(err: NotFound, route: Route) -> NotFound:
    """kube-apiserver names custom resources with their group: ``leaderworkersets.<group> "x"``."""
    t = route.rtype
    prefix = f'{t.plural} "'
    if t.group and err.message.startswith(prefix):
        return NotFound(
            f'{t.plural}.{t.group} "' + err.message[len(prefix) :],
            details={**err.details, "group": t.group, "kind": t.plural},
        )
    return err


def _manager_from_agent(agent: str | None) -> str:
    """kube-apiserver's default field manager: the User-Agent up to its first '/'."""
    return (agent or "unknown").split("/", 1)[0] or "unknown"
