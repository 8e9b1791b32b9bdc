"""``lwsflow dashboard`` (and ``kubectl lwsflow dashboard``): a live web view of RolloutPolicies.

A server on 127.0.0.1 that reads the cluster with the user's own kubeconfig (their RBAC decides what
they see and may do): watches fill a cache (``cache.py``), views turn it into page data (``views.py``,
``charts.py``), Jinja2 templates render it (``pages.py``), the server streams changed fragments as
server-sent events that htmx swaps in (``server.py``), and the buttons run ``policy_actions``, the
code ``kubectl lwsflow`` runs. docs/dashboard.md shows it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from lwsflow.dashboard.server import Dashboard

__all__ = ["Dashboard", "run_until_interrupted", "serve"]


def serve(kubeconfig: str | None = None, namespace: str | None = "default", port: int = 0,
          context: str | None = None) -> Dashboard:
    """Start watching and serving; the caller stops it (``Dashboard.stop``). ``namespace`` None: all."""
    from lwsflow.controller.kube.client import Kube
    from lwsflow.controller.policy import actions as policy_actions
    from lwsflow.controller.rollout import session
    from lwsflow.dashboard.cache import Cache

    def connect() -> Kube:
        return Kube.connect(kubeconfig, context)

    kube = connect()
    clock = session.clock_for(kube)  # the embedded cluster's virtual time for ages; raises if unreachable

    def act(action: str, ns: str, name: str) -> str:
        return policy_actions.BY_NAME[action](kube, ns, name)

    cache = Cache(namespace).start(connect)
    try:
        dash = Dashboard(cache, act, clock.now, port=port)
    except OSError:
        cache.stop()
        raise
    return dash.start()


def run_until_interrupted(kubeconfig: str | None, namespace: str | None, port: int,
                          say: Callable[[str], None] = print) -> None:
    """Serve until Ctrl-C (or SIGTERM), after printing the URL."""
    import signal

    from lwsflow.controller.errors import InvalidInput

    if not 0 <= port <= 65535:
        raise InvalidInput(f"--port {port}: not a port number", field="port")
    try:
        dash = serve(kubeconfig, namespace, port)
    except OSError as exc:
        raise InvalidInput(f"--port {port}: {exc.strerror or exc}", field="port") from None
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    scope = "all namespaces" if namespace is None else f"namespace {namespace}"
    say(f"lwsflow dashboard: {dash.url} ({scope}; Ctrl-C stops it)")
    try:
        done.wait()
    except KeyboardInterrupt:
        pass
    finally:
        dash.stop()
