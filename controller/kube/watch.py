"""Watches that survive cuts: resume from the last resourceVersion, relist on 410 Gone.

:func:`follow` yields the latest state of one object each time it changes (and once at the start),
until the caller stops iterating or the wall-clock budget runs out. It uses
``kubernetes.watch.Watch`` with ``resource_version`` and ``timeout_seconds``: a cut stream is
reopened from the last resourceVersion seen, a ``410 Gone`` (history compacted) triggers a fresh GET
(a relist of one object), and transient errors back off through :class:`Kube`'s retry policy.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any

import urllib3
from kubernetes import watch as kwatch
from kubernetes.client.exceptions import ApiException

from lwsflow.controller.api.wire import Obj
from lwsflow.controller.errors import Gone, NotFound
from lwsflow.controller.kube.client import Kube, translate
from lwsflow.controller.kube.resources import Resource

log = logging.getLogger("lwsflow.kube.watch")


def stream(kube: Kube, res: Resource, namespace: str | None, *, resource_version: str,
            timeout_s: int, field_selector: str = "", label_selector: str = "",
            quiet_s: float | None = None) -> Iterator[Obj]:
    """One watch request as raw events ``{"type", "object"}`` (the official Watch decoder).

    ``quiet_s``: end the stream (urllib3's ReadTimeoutError) once it has been silent that long, wall
    seconds. ``timeoutSeconds`` is a whole number of at least 1, so without it a wait shorter than a
    second overshoots by up to a second: minutes of cluster time on the embedded cluster.
    """
    def call(**kw: Any) -> Any:  # no docstring on purpose: Watch then yields plain dicts
        resp = kube.request("GET", res.path(namespace), preload=False, timeout=timeout_s + 5, query={
            "watch": "true", "resourceVersion": kw.get("resource_version") or None,
            "timeoutSeconds": timeout_s, "allowWatchBookmarks": "true",
            "fieldSelector": field_selector or None, "labelSelector": label_selector or None})
        # set after the headers came back (a short timeout on them would count as unreachable and be
        # retried); urllib3 sets the socket's timeout again before the connection's next request
        sock = getattr(getattr(resp, "connection", None), "sock", None)
        if quiet_s is not None and sock is not None:
            sock.settimeout(max(0.001, quiet_s))
        return resp

    w = kwatch.Watch()
    try:
        yield from w.stream(call, resource_version=resource_version, timeout_seconds=timeout_s)
    except ApiException as exc:  # an ERROR event inside the stream, e.g. 410 Gone
        raise translate(exc) from exc
    finally:
        w.stop()


def follow(kube: Kube, res: Resource, namespace: str, name: str, *, wall_budget: float,
           chunk_s: int = 30) -> Iterator[Obj]:
    """Yield the object now and after each change, for at most ``wall_budget`` wall seconds.

    Raises NotFound when the object is deleted (a rollout target must not vanish under us).
    """
    end = time.monotonic() + wall_budget
    obj = kube.get(res, namespace, name)
    rv = obj["metadata"]["resourceVersion"]
    yield obj
    selector = f"metadata.name={name}"
    while (left := end - time.monotonic()) > 0:
        timeout = max(1, min(chunk_s, int(left + 0.999)))
        opened = time.monotonic()
        try:
            for ev in stream(kube, res, namespace, resource_version=rv, timeout_s=timeout,
                              field_selector=selector, quiet_s=left):
                etype, o = ev.get("type"), ev.get("raw_object") or ev.get("object")
                if etype == "BOOKMARK" and isinstance(o, dict):
                    rv = (o.get("metadata") or {}).get("resourceVersion") or rv
                    if time.monotonic() >= end:
                        return
                    continue
                if not isinstance(o, dict) or (o.get("metadata") or {}).get("name") != name:
                    continue
                rv = o["metadata"].get("resourceVersion") or rv
                if etype == "DELETED":
                    raise NotFound(f"{res.plural} {namespace}/{name} was deleted")
                yield o
                if time.monotonic() >= end:
                    return
        except Gone:
            log.info("watch %s/%s: 410 Gone at rv %s, relisting", namespace, name, rv)
            obj = kube.get(res, namespace, name)
            rv = obj["metadata"]["resourceVersion"]
            yield obj
        except urllib3.exceptions.ReadTimeoutError:  # quiet for ``left`` since a read began: past ``end``
            return
        except (urllib3.exceptions.HTTPError, OSError) as exc:  # stream cut: resume from rv
            log.info("watch %s/%s cut (%s); resuming from rv %s", namespace, name,
                     type(exc).__name__, rv)
        if time.monotonic() - opened < 0.05:  # a stream cut at once: do not spin on reconnects
            time.sleep(0.05)

