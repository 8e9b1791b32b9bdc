"""Watch streams: newline-delimited ``{"type", "object"}`` JSON events over chunked HTTP.

resourceVersion semantics as kube-apiserver: unset or "0" starts with synthetic ADDED events for the
current objects; a resourceVersion replays what happened after it, and one older than the kept
history ends in ``410 Gone`` (an ERROR event carrying a ``Status``, or a plain HTTP 410 when the
server is configured so). ``timeoutSeconds`` ends the stream cleanly; ``allowWatchBookmarks`` adds
BOOKMARK events while idle. Injected faults cut streams early and force 410 on resume.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lwsflow.controller.errors import Gone
from lwsflow.sim.apiserver import tables
from lwsflow.sim.apiserver.faults import ApiFaults
from lwsflow.sim.apiserver.routing import Route
from lwsflow.sim.httpserver import LAST_CHUNK, start_chunked, write_chunk

if TYPE_CHECKING:
    from lwsflow.sim.apiserver.server import _Handler

_MAX_TIMEOUT_S = 1800.0  # kube-apiserver's default --min-request-timeout is 1800 s


@dataclass
class WatchOptions:
    table: bool
    faults: ApiFaults
    gone_as_http: bool
    bookmark_interval_s: float
    stopping: threading.Event


def _event_bytes(etype: str, obj: dict[str, Any]) -> bytes:
    return json.dumps({"type": etype, "object": obj}, separators=(",", ":")).encode() + b"\n"


def stream_watch(h: _Handler, route: Route, q: dict[str, str], opts: WatchOptions) -> None:
    store = h.api.store
    since = q.get("resourceVersion") or None
    resumed = since not in (None, "0")
    rtype = route.rtype
    label_sel = q.get("labelSelector", "")
    field_sel = q.get("fieldSelector", "")
    if route.name:  # /namespaces/ns/pods/x?watch=true (old style): a watch on one object
        field_sel = ",".join(s for s in (field_sel, f"metadata.name={route.name}") if s)
    gone: Gone | None = None
    w = None
    # WatchList (kubectl 1.37's informers): the current objects as ADDED, then a BOOKMARK marking
    # the end of the initial events, whatever resourceVersion was asked for
    initial_list = q.get("sendInitialEvents", "").lower() == "true"
    initial = -1  # number of initial events before the "initial-events-end" bookmark (-1: none due)
    if resumed and not initial_list and opts.faults.gone_on_resume():
        gone = Gone(f"too old resource version: {since} ({store.resource_version}) (injected fault)")
    else:
        try:
            with store.lock:  # the snapshot count and the watch registration are one atomic step
                w = store.watch(
                    rtype.key,
                    route.namespace or None,
                    since=None if initial_list else since,
                    label_selector=label_sel,
                    field_selector=field_sel,
                )
                if initial_list:
                    initial = len(store.list(rtype.key, route.namespace or None, label_sel, field_sel)[0])
        except Gone as exc:
            gone = exc
    if gone is not None and opts.gone_as_http:
        h.send_error_status(gone)
        return
    start_chunked(h, "application/json", "no-cache, private")
    try:
        if gone is not None or w is None:
            body = (gone or Gone("too old resource version")).to_status()
            write_chunk(h.wfile, _event_bytes("ERROR", body))
        else:
            _pump(h, w, route, q, opts, initial)
    except (BrokenPipeError, ConnectionResetError, OSError):
        h.close_connection = True
        return
    finally:
        if w is not None:
            w.stop()
    try:
        h.wfile.write(LAST_CHUNK)
        h.wfile.flush()
    except OSError:
        h.close_connection = True


def _bookmark(rtype: Any, rv: str, initial_end: bool = False) -> bytes:
    meta: dict[str, Any] = {"resourceVersion": rv}
    if initial_end:
        meta["annotations"] = {"k8s.io/initial-events-end": "true"}
    return _event_bytes("BOOKMARK", {"kind": rtype.kind, "apiVersion": rtype.api_version, "metadata": meta})


def _pump(h: _Handler, w: Any, route: Route, q: dict[str, str], opts: WatchOptions, initial: int) -> None:
    store = h.api.store
    rtype = route.rtype
    timeout = min(float(q.get("timeoutSeconds") or _MAX_TIMEOUT_S), _MAX_TIMEOUT_S)
    cut = opts.faults.watch_cut_after()
    start = time.monotonic()
    end = start + (min(timeout, cut) if cut is not None else timeout)
    bookmarks = q.get("allowWatchBookmarks", "").lower() == "true"
    last_sent = start
    headers_sent = False
    while not opts.stopping.is_set():
        if initial == 0:
            with store.lock:  # every event up to this resourceVersion is already queued
                rv_now = str(store.resource_version)
            write_chunk(h.wfile, _bookmark(rtype, rv_now, initial_end=True))
            initial = -1
        now = time.monotonic()
        if now >= end:
            return
        ev = w.next(timeout=min(end - now, 0.25))
        if ev is None:
            if w.closed:
                return
            if bookmarks and time.monotonic() - last_sent >= opts.bookmark_interval_s:
                with store.lock:  # empty queue under the lock: nothing up to rv_now is undelivered
                    ev = w.next(timeout=0)
                    rv_now = str(store.resource_version)
                if ev is None:
                    write_chunk(h.wfile, _bookmark(rtype, rv_now))
                    last_sent = time.monotonic()
                    continue
            else:
                continue
        if initial > 0:
            initial -= 1
        obj = ev.object
        if opts.table:
            tbl = tables.table(
                rtype,
                [obj],
                store.now(),
                {"resourceVersion": obj["metadata"].get("resourceVersion", "")},
                q.get("includeObject") or "Metadata",
            )
            if headers_sent:
                tbl["columnDefinitions"] = []  # like kube-apiserver: column headers on the first event only
            headers_sent = True
            obj = tbl
        write_chunk(h.wfile, _event_bytes(ev.type, obj))
        last_sent = time.monotonic()
