"""A stopped stand-in engine drops its open keep-alive connections, as a pod that goes away does.

Prometheus scrapes each target over one keep-alive connection. When a rollout replaced a pod and the
new pod got the old one's IP (the embedded kubelet reuses freed IPs), the scraper kept talking to the
stopped engine's handler thread: the new revision's target showed the old engine's frozen counters and
the analysis found "no data" (docs/analysis.md)."""

from __future__ import annotations

import http.client

from lwsflow.sim.engine import start_engine


def test_a_keep_alive_client_does_not_reach_a_stopped_engine() -> None:
    old = start_engine(host="127.0.0.1", port=0, model="m")
    conn = http.client.HTTPConnection("127.0.0.1", old.port, timeout=5)
    conn.request("GET", "/metrics")
    first = conn.getresponse()
    assert first.status == 200 and first.getheader("Connection", "") != "close"
    first.read()
    old.stop()
    new = start_engine(host="127.0.0.1", port=old.port, model="m")  # the next pod, same IP and port
    try:
        try:
            conn.request("GET", "/metrics")
            answer = conn.getresponse().read()
        except (OSError, http.client.HTTPException):
            answer = None  # dropped: a client reconnects, and reaches the new engine
        assert answer is None, "the stopped engine still answered over the old connection"
    finally:
        conn.close()
        new.stop()
